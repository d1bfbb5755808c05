// @medplum/core 5 reads `WebSocket.CLOSING` / `WebSocket.CLOSED` while loading (its subscription
// client); Node 20 has no global WebSocket, so the load throws. The repository never opens a
// WebSocket through medplum, so an inert class is enough. This lives in its own module because
// bundlers and ESM hoist `export * from` above any statement in the importing file: only an
// import that precedes '@medplum/core' is guaranteed to run first.
const g = globalThis as { WebSocket?: unknown };
g.WebSocket ??= class WebSocketUnavailable {
  static readonly CONNECTING = 0;
  static readonly OPEN = 1;
  static readonly CLOSING = 2;
  static readonly CLOSED = 3;
};

export {};
