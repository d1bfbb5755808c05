// The only entry point to @medplum/core in this project: the shim import must run before medplum
// loads (see websocket-shim.ts), which a single import site guarantees.
import './websocket-shim';

export * from '@medplum/core';
