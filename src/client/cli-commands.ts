import fs from 'node:fs';
import path from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { bookParameters, withScheduleCodes, type BookableSlot } from './book-request';
import { GuardClient, GuardClientError } from './guard-client';
import { defaultHome, KeyStore, KeyStoreError } from './key-store';
import { ClientInputError } from './pem-files';
import type { CardChoice } from './card/open-card';
import { KonnektorError } from './card/konnektor/konnektor-error';
import { requireSecureOrigin, serverFetch, type ServerTrust } from './server-tls';
import { fetchTransport } from './transport';
import { ClientSession, LoggedOut, type HelperSettings } from './session';
import { runStress, SCENARIOS } from './stress';
import { bundleSummary, resourceLine, summary } from './summary';
import { Unreachable } from './unreachable';

/** The server refused (exit 1); its answer is printed. */
export class Refused extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`the server answered ${status}`);
  }
}

/** Usage or local error (exit 2). */
export class LocalError extends Error {}

/** Where a command writes, and whether a person reads it (the process's streams, or a test's). */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** stdout is a terminal: summaries instead of JSON (unless --json). */
  isTTY: boolean;
  /** A command's exit code other than 0 when it did not throw (`http` with a 4xx answer). */
  exitCode?: number;
}

export function processIo(): CliIo {
  return { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t), isTTY: Boolean(process.stdout.isTTY) };
}

/** Output: JSON by default, or with --json; a human summary when stdout is a terminal. */
function print(io: CliIo, o: { json?: boolean }, value: unknown, summary?: string): void {
  if (io.isTTY && !o.json && summary) io.out(`${summary}\n`);
  else io.out(`${typeof value === 'string' ? value : JSON.stringify(value, null, 2)}\n`);
}

interface SessionOptions {
  server?: string;
  card?: string;
  key?: string;
  p12?: string;
  konnektor?: string;
  attestation?: string;
  helper?: string;
  helperCa?: string;
  helperCert?: string;
  helperKey?: string;
  asl?: boolean;
  aslProd?: boolean;
  json?: boolean;
  ca?: string;
  requireOcsp?: boolean;
}

/**
 * Opens the key store (held for the whole command, so two CLI processes never lose each other's
 * refresh-token rotation), then the session for `--server` or the last server used. Card, key and
 * helper settings given once are remembered with the server.
 */
async function withSession<T>(o: SessionOptions, f: (s: ClientSession, store: KeyStore) => Promise<T>, requireCard = true): Promise<T> {
  const store = await KeyStore.open();
  let session: ClientSession | undefined;
  try {
    const settings = sessionSettings(o, store, requireCard);
    session = await ClientSession.open({ ...settings, store });
    try {
      return await f(session, store);
    } catch (err) {
      if (err instanceof Refused || err instanceof GuardClientError) (err as { hint?: string }).hint = originHint(err, session, store);
      throw err;
    }
  } finally {
    session?.close();
    store.close();
  }
}

/**
 * A refusal whose cause is the origin this client uses: a proof for another origin than the
 * server's PUBLIC_URL (the enforcement point names the URL it expected), or a registration refused
 * with 409 because this key store's client key is registered already, under the origin the server
 * publishes (`127.0.0.1` and `localhost` are two origins to the guard, RFC 6454 §4).
 */
function originHint(err: Refused | GuardClientError, session: ClientSession, store: KeyStore): string | undefined {
  const body = err.body as { error?: string; error_description?: string } | undefined;
  const published = session.guard.discoveryCache?.resource.resource;
  const expected = published ? new URL(published).origin : undefined;
  const expects = (o: string) => `the server expects requests for the origin ${o} (its PUBLIC_URL): pass --server ${o}`;
  if (/htu/.test(body?.error_description ?? '')) return expected ? expects(expected) : 'the server expects requests for the origin of its PUBLIC_URL (see terminus-client discover): pass --server <that origin>';
  if (err.status !== 409 || body?.error !== 'conflict') return undefined;
  if (expected && expected !== session.origin) return `${expects(expected)}; this key store's client is registered there already`;
  const issuer = session.guard.discoveryCache?.authorizationServer.issuer;
  const other = Object.entries(store.data.servers).find(([o, st]) => o !== session.origin && st.clientId && st.discovery?.authorizationServer.issuer === issuer)?.[0];
  return other ? `this key store's client is registered at this guard for ${other}: pass --server ${other}` : undefined;
}

/** The server (given or last used) with its card, key and helper (given now or remembered; remembered from now on). */
function sessionSettings(o: SessionOptions, store: KeyStore, requireCard: boolean): CardChoice & { server: string; helper?: HelperSettings; asl?: boolean; aslProduction?: boolean; trust: ServerTrust } {
  const server = o.server ?? store.data.lastServer;
  if (!server) throw new LocalError('no server known yet: pass --server URL');
  let origin: string;
  try {
    origin = new URL(server).origin;
  } catch {
    throw new LocalError(`--server ${server} is not a URL`);
  }
  secureOrigin(origin);
  const remembered = store.server(origin) as Record<string, unknown>;
  const trust = serverTrust(o, remembered);
  const cards = cardChoice(o, remembered);
  if (requireCard && !cards.p12 && !cards.konnektor && (!cards.card || !cards.key)) throw new LocalError('pass the institution card: --konnektor FILE.kon, --p12 FILE.p12, or --card CERT.pem --key KEY.pem (remembered after the first login)');
  const helper = helperSettings(o, remembered.helper as HelperSettings | undefined);
  remembered.helper = helper;
  return { server: origin, ...cards, helper, trust, ...(o.asl || o.aslProd ? { asl: true } : {}), ...(o.aslProd ? { aslProduction: true } : {}) };
}

/**
 * The card backend given now, else the one remembered with the server (which file, never a
 * password): given now, it replaces the remembered one. Paths are kept absolute, for a later
 * command may run in another folder.
 */
function cardChoice(o: SessionOptions, remembered: Record<string, unknown>): CardChoice {
  if ([o.p12, o.konnektor, o.card || o.key].filter(Boolean).length > 1) throw new LocalError('pass one card: --konnektor, --p12, or --card and --key');
  if (o.konnektor) {
    remembered.card = { backend: 'konnektor', konFile: absolute(o.konnektor) };
  } else if (o.p12) {
    remembered.card = { backend: 'p12', p12File: absolute(o.p12) };
  } else if (o.card || o.key) {
    const was = remembered.card as { backend?: string; cardFile?: string; keyFile?: string } | undefined;
    const pem = was?.backend === 'pem' ? was : {};
    remembered.card = { backend: 'pem', cardFile: absolute(o.card) ?? pem.cardFile, keyFile: absolute(o.key) ?? pem.keyFile };
  } else if (!remembered.card && (remembered.cardFile || remembered.keyFile)) {
    // Key stores written before the card had a backend.
    remembered.card = { backend: 'pem', cardFile: remembered.cardFile, keyFile: remembered.keyFile };
  }
  delete remembered.cardFile;
  delete remembered.keyFile;
  const c = remembered.card as { backend: 'pem' | 'p12' | 'konnektor'; cardFile?: string; keyFile?: string; p12File?: string; konFile?: string } | undefined;
  if (c?.backend === 'konnektor') return { konnektor: c.konFile };
  if (c?.backend === 'p12') return { p12: c.p12File };
  return { card: c?.cardFile, key: c?.keyFile };
}

/**
 * A long-running command (`ui`, `serve`): its settings remembered, the key store released (other
 * commands can use it while this one runs; the session writes its token rotations as they happen),
 * the session logged in before anything listens (a card or Konnektor problem shows now, not at
 * the first request), then `serve` until SIGINT or SIGTERM and its `close`.
 */
async function serveWithSession(o: SessionOptions, serve: (session: ClientSession, settings: ReturnType<typeof sessionSettings>) => Promise<{ close(): Promise<void> }>): Promise<void> {
  const store = await KeyStore.open();
  let settings: ReturnType<typeof sessionSettings>;
  try {
    settings = sessionSettings(o, store, true);
    store.save();
  } finally {
    store.close();
  }
  const session = await ClientSession.open(settings);
  try {
    await session.accessToken();
    const running = await serve(session, settings);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    await running.close();
  } finally {
    session.close();
  }
}

/** `ui`: the practice page. */
function servePracticePage(io: CliIo, o: SessionOptions & { port: number; timeZone?: string }): Promise<void> {
  return serveWithSession(o, async (session, settings) => {
    const { ownerScopeWarning, startPracticeUi } = await import('./ui/server');
    const warning = await ownerScopeWarning(session, settings);
    if (warning) io.err(`terminus-client: warning: ${warning}\n`);
    const ui = await startPracticeUi({ origin: session.origin, fetch: session.fetch, port: o.port, timeZone: o.timeZone, log: (line) => io.err(`${line}\n`) }).catch((err: NodeJS.ErrnoException) => {
      throw err.code === 'EADDRINUSE' ? new LocalError(`--port ${o.port}: 127.0.0.1:${o.port} is already in use`) : err;
    });
    print(io, o, { listening: ui.url, login_url: ui.loginUrl }, `Practice page for ${session.origin}: open ${ui.loginUrl}\n(a one-time login link; Ctrl-C stops the page)`);
    return ui;
  });
}

/** `serve`: the local signing proxy for the session. */
function serveSigningProxy(io: CliIo, o: SessionOptions & { socket?: string; port?: number }): Promise<void> {
  if (o.socket && o.port !== undefined) throw new LocalError('pass --socket or --port, not both');
  return serveWithSession(o, async (session) => {
    const { startSigningProxy } = await import('./proxy/signing-proxy');
    const socket = o.port === undefined ? path.resolve(o.socket ?? path.join(defaultHome(), 'serve.sock')) : undefined;
    const proxy = await startSigningProxy({ session, socket, port: o.port, log: (line) => io.err(`${line}\n`) }).catch((err: NodeJS.ErrnoException) => {
      throw err.code === 'EADDRINUSE' ? new LocalError(socket ? `--socket ${socket} is in use by another running proxy` : `--port ${o.port}: 127.0.0.1:${o.port} is already in use`) : err;
    });
    const base = proxy.address.startsWith('unix:') ? `curl --unix-socket ${socket} http://localhost/fhir/...` : `${proxy.address}/fhir`;
    print(io, o, { listening: proxy.address, server: session.origin }, `Signing proxy for ${session.origin} at ${proxy.address} (FHIR base: ${base}; Ctrl-C stops it)`);
    return proxy;
  });
}

/** Plain http to loopback only (a local error, exit 2). */
function secureOrigin(server: string): void {
  try {
    requireSecureOrigin(server);
  } catch (err) {
    throw new LocalError(`--server ${(err as Error).message}`);
  }
}

/**
 * The server's TLS trust: `--ca FILE` (remembered with the server from then on), else
 * TERMINUS_CLIENT_CA, else the CA remembered; `--require-ocsp` likewise remembered. Without a CA,
 * Node's public store.
 */
function serverTrust(o: SessionOptions, remembered: Record<string, unknown>): ServerTrust {
  if (o.ca !== undefined) remembered.caFile = absolute(o.ca);
  if (o.requireOcsp) remembered.requireOcsp = true;
  const caFile = o.ca !== undefined ? absolute(o.ca) : (process.env.TERMINUS_CLIENT_CA ?? (remembered.caFile as string | undefined));
  let ca: string | undefined;
  if (caFile) {
    const source = o.ca !== undefined ? '--ca' : process.env.TERMINUS_CLIENT_CA ? 'TERMINUS_CLIENT_CA' : 'the remembered --ca';
    try {
      ca = fs.readFileSync(caFile, 'utf8');
    } catch (err) {
      throw new LocalError(`${source} ${caFile}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
    if (!/-----BEGIN CERTIFICATE-----/.test(ca)) throw new LocalError(`${source} ${caFile}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it`);
  }
  return { ca, requireOcsp: remembered.requireOcsp === true };
}

function helperSettings(o: SessionOptions, remembered: HelperSettings | undefined): HelperSettings | undefined {
  if (o.attestation === 'software') return undefined;
  if (o.attestation === 'tpm' || o.helper) {
    if (!o.helper || !o.helperCa || !o.helperCert || !o.helperKey) throw new LocalError('--attestation tpm needs --helper ADDR --helper-ca F --helper-cert F --helper-key F');
    return { address: o.helper, ca: absolute(o.helperCa)!, cert: absolute(o.helperCert)!, key: absolute(o.helperKey)! };
  }
  return remembered;
}

/** A file option as an absolute path (PEM text stays as it is). */
function absolute(file: string | undefined): string | undefined {
  return file === undefined || file.includes('-----BEGIN') ? file : path.resolve(file);
}

const serverOption = (c: Command) =>
  c
    .option('--server <url>', 'the repository origin (PUBLIC_URL); default: the last one used')
    .option('--asl', 'send /fhir requests through the additional security layer (default: when the server requires it)')
    .option('--asl-prod', 'the same, to a production (PU) server')
    .option('--json', 'print JSON at a terminal too (default there: a summary)')
    .option('--ca <file>', "PEM CA certificates the server's TLS certificate must chain to, instead of the public store (remembered per server; or TERMINUS_CLIENT_CA)")
    .option('--require-ocsp', 'refuse a server that staples no OCSP answer for its certificate (remembered per server)');

/** Commands that may log in by themselves take the card too (remembered per server after the first login). */
const withCard = (c: Command) => cardOptions(serverOption(c));

const cardOptions = (c: Command) =>
  c
    .option('--card <file>', 'institution card certificate (PEM)')
    .option('--key <file>', 'the card key (PEM)')
    .option('--p12 <file>', 'the institution card as a PKCS#12 file (password in TERMINUS_CLIENT_P12_PASSWORD)')
    .option('--konnektor <file>', "the SMC-B behind the practice's Konnektor, as a .kon file (gematik zeta-cli format)");

/**
 * The URL of a FHIR path: relative to the server's `/fhir` base, given with or without that prefix
 * (`Slot/1`, `/fhir/Slot/1`, and `/fhir` itself for a transaction or batch Bundle), or absolute.
 */
export function fhirUrl(origin: string, path: string): string {
  if (/^https?:\/\//.test(path)) return path;
  const rest = path.replace(/^\/+/, '').replace(/^fhir(?=[/?#]|$)/, '').replace(/^\/+/, '');
  const base = `${origin}/fhir`;
  if (!rest) return base;
  return rest.startsWith('?') ? `${base}${rest}` : `${base}/${rest}`;
}

async function fhirCall(s: ClientSession, method: string, path: string, o: { body?: string; contentType?: string; xml?: boolean; prefer?: string } = {}) {
  const headers: Record<string, string> = { accept: o.xml ? 'application/fhir+xml' : 'application/fhir+json' };
  if (o.body !== undefined) headers['content-type'] = o.contentType ?? 'application/fhir+json';
  if (o.prefer) headers.prefer = o.prefer;
  const res = await s.fetch(fhirUrl(s.origin, path), { method, headers, body: o.body });
  const text = await res.text();
  return { status: res.status, headers: Object.fromEntries(res.headers), text, json: parse(text) };
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A file named by an option, or a LocalError naming both. */
function readInput(file: string, option: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const where = path.resolve(file) === file ? file : `${file} (${path.resolve(file)})`;
    throw new LocalError(`${option} ${where}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'a folder, not a file' : `cannot be read (${code ?? (err as Error).message})`}`);
  }
}

export function addCommands(cli: Command, io: CliIo): void {
  const answer = (o: { json?: boolean }, r: { status: number; text: string; json: unknown }, line: (j: Record<string, unknown>) => string) => {
    if (r.status >= 400) throw new Refused(r.status, r.json ?? r.text);
    print(io, o, r.json ?? r.text, r.json ? line(r.json as Record<string, unknown>) : undefined);
  };

  serverOption(cli.command('discover').description('print both discovery documents'))
    .action(async (o: SessionOptions) => {
      const server = o.server ?? (await lastServer());
      // No key store here: the trust given now (or TERMINUS_CLIENT_CA), not the remembered one.
      secureOrigin(server);
      const transport = fetchTransport({ fetch: serverFetch(serverTrust(o, {})) });
      const d = await new GuardClient({ server, retries: 2, transport }).discover(true);
      print(io, o, { protected_resource: d.resource, authorization_server: d.authorizationServer }, `${d.resource.resource} guarded by ${d.authorizationServer.issuer}`);
    });

  cardOptions(serverOption(cli.command('login').description('discovery, registration (first time), token exchange')))
    .option('--attestation <kind>', 'software or tpm', (v) => {
      if (v !== 'software' && v !== 'tpm') throw new InvalidArgumentError('software or tpm');
      return v;
    })
    .option('--helper <addr>', 'attestation helper host:port (with --attestation tpm)')
    .option('--helper-ca <file>', "CA of the helper's server certificate")
    .option('--helper-cert <file>', 'client certificate for the helper')
    .option('--helper-key <file>', 'key of that client certificate')
    .option('--scope <scopes>', 'space-separated scopes (default: what the policy grants)')
    .action(async (o: SessionOptions & { scope?: string }) =>
      withSession(o, async (s) => {
        const t = await s.login({ scope: o.scope });
        const out = { client_id: s.guard.clientId, scope: t.scope, expires_at: new Date(t.expiresAt * 1000).toISOString(), attestation: s.status().attestation, ...(t.raw.svc_att_token ? { svc_att_token: true } : {}) };
        print(io, o, out, `logged in to ${s.origin} as client ${s.guard.clientId} (${out.attestation}); scopes ${t.scope}; access token until ${out.expires_at}`);
      }),
    );

  const konnektor = cli.command('konnektor').description("the practice's Konnektor, as a .kon file (gematik zeta-cli format) describes it");
  konnektor
    .command('inspect <file>')
    .description('the Konnektor\'s services and versions, its SMC-Bs with handle, Telematik-ID and PIN status')
    .option('--json', 'print JSON at a terminal too')
    .action(async (file: string, o: { json?: boolean }) => {
      const { inspectKonnektor, inspectionText } = await import('./card/konnektor/inspect');
      const report = await inspectKonnektor(file);
      print(io, o, report, inspectionText(report));
    });

  serverOption(cli.command('status').description('session state from the key store')).action(async (o: SessionOptions) =>
    withSession(o, async (s) => {
      const st = s.status();
      print(io, o, st, st.logged_in ? `logged in to ${st.server} as ${st.client_id}, scopes ${st.scope}` : `not logged in to ${st.server}${st.logged_out ? ' (logged out: terminus-client login starts a session)' : ''}`);
    }, false),
  );

  serverOption(cli.command('logout').description('revoke the session and forget its tokens and DPoP key; no request until the next login')).action(async (o: SessionOptions) =>
    withSession(o, async (s) => {
      await s.logout();
      print(io, o, { logged_out: s.origin }, `logged out of ${s.origin}`);
    }, false),
  );

  withCard(cli.command('get <path>').description('authenticated FHIR read, e.g. Slot/123 or metadata'))
    .option('--xml', 'ask for XML')
    .action(async (path: string, o: SessionOptions & { xml?: boolean }) => withSession(o, async (s) => answer(o, await fhirCall(s, 'GET', path, { xml: o.xml }), summary)));

  withCard(cli.command('search <type> [params...]').description('authenticated FHIR search: search Slot status=free schedule=Schedule/1'))
    .option('--xml', 'ask for XML')
    .action(async (type: string, params: string[], o: SessionOptions & { xml?: boolean }) =>
      withSession(o, async (s) => {
        const q = new URLSearchParams();
        for (const p of params) {
          const i = p.indexOf('=');
          if (i <= 0) throw new LocalError(`search parameter "${p}" must be name=value`);
          q.append(p.slice(0, i), p.slice(i + 1));
        }
        answer(o, await fhirCall(s, 'GET', `${type}${q.size ? `?${q}` : ''}`, { xml: o.xml }), (j) =>
          j.resourceType === 'Bundle' ? bundleSummary(j, `${(j.entry as unknown[] | undefined)?.length ?? 0} ${type} entries${j.total !== undefined ? ` of ${j.total}` : ''}`) : summary(j),
        );
      }),
    );

  withCard(cli.command('book').description('$book an appointment on a slot'))
    .requiredOption('--slot <ref>', 'Slot/ID')
    .option('--patient <ref>', 'Patient/ID')
    .option('--patient-file <file>', 'a Patient resource (JSON) to book for')
    .option('--async', 'asynchronous $book (Prefer: respond-async)')
    .action(async (o: SessionOptions & { slot: string; patient?: string; patientFile?: string; async?: boolean }) =>
      withSession(o, async (s) => {
        if (!o.patient === !o.patientFile) throw new LocalError('pass exactly one of --patient Patient/ID and --patient-file FILE');
        const patientBody = o.patientFile ? readInput(o.patientFile, '--patient-file') : undefined;
        const read = async (ref: string) => {
          const r = await fhirCall(s, 'GET', ref);
          if (r.status >= 400) throw new Refused(r.status, r.json ?? r.text);
          return r.json as Record<string, unknown>;
        };
        const slotId = /^(?:.*\/)?Slot\/([^/?#]+)\/?$/.exec(o.slot)?.[1] ?? (o.slot.includes('/') ? undefined : o.slot);
        if (!slotId) throw new LocalError(`--slot ${o.slot} is not a Slot reference: Slot/ID`);
        const slot = await withScheduleCodes({ ...((await read(`Slot/${slotId}`)) as Partial<BookableSlot>), id: slotId }, read);
        let patient = o.patient!;
        if (patientBody !== undefined) {
          const created = await fhirCall(s, 'POST', 'Patient', { body: patientBody });
          if (created.status >= 400) throw new Refused(created.status, created.json ?? created.text);
          patient = `Patient/${(created.json as { id: string }).id}`;
        }
        const r = await fhirCall(s, 'POST', 'Appointment/$book', { body: JSON.stringify(bookParameters(slot, patient)), prefer: o.async ? 'respond-async' : undefined });
        if (o.async && r.status === 202) return print(io, o, { status: 202, location: r.headers['content-location'] ?? r.headers.location }, `accepted: poll ${r.headers['content-location'] ?? r.headers.location}`);
        answer(o, r, (j) => `booked: ${summary(j)}`);
      }),
    );

  withCard(cli.command('cancel <appointment>').description('cancel an appointment (FHIRPath Patch status = cancelled)')).action(async (ref: string, o: SessionOptions) =>
    withSession(o, async (s) => {
      const patch = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] }] };
      answer(o, await fhirCall(s, 'PATCH', ref, { body: JSON.stringify(patch) }), (j) => resourceLine(j));
    }),
  );

  withCard(cli.command('serve').description('a local signing proxy: any FHIR client books through it without DPoP (/fhir/..., GET /api/health)'))
    .option('--socket <path>', 'a unix socket, created mode 600 (default: serve.sock in the key store folder)')
    .option('--port <n>', 'a port on 127.0.0.1 instead of the socket', (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('a port number');
      return n;
    })
    .action(async (o: SessionOptions & { socket?: string; port?: number }) => serveSigningProxy(io, o));

  withCard(cli.command('http <method> <path>').description('any authenticated request to the FHIR base (/fhir for a transaction Bundle, Slot?..., /fhir/metadata); prints status, headers and body'))
    .option('--data <file>', 'request body from a file')
    .option('--content-type <type>', 'content type of --data', 'application/fhir+json')
    .action(async (method: string, path: string, o: SessionOptions & { data?: string; contentType: string }) =>
      withSession(o, async (s) => {
        const body = o.data ? readInput(o.data, '--data') : undefined;
        const r = await fhirCall(s, method.toUpperCase(), path, { body, contentType: o.contentType });
        print(io, o, { status: r.status, headers: r.headers, body: r.json ?? r.text }, `${r.status}\n${r.text}`);
        if (r.status >= 400) io.exitCode = 1;
      }),
    );

  withCard(cli.command('ui').description("the practice's page on 127.0.0.1 behind a one-time login link"))
    .option('--port <n>', 'port on 127.0.0.1 (default: any free port)', (v) => port(v), 0)
    .option('--time-zone <tz>', "time zone of the week grid and opening hours (default: this machine's)")
    .action(async (o: SessionOptions & { port: number; timeZone?: string }) => {
      if (o.timeZone) {
        try {
          new Intl.DateTimeFormat('en', { timeZone: o.timeZone });
        } catch {
          throw new LocalError(`--time-zone ${o.timeZone} is not a time zone (for example Europe/Berlin)`);
        }
      }
      await servePracticePage(io, o);
    });

  withCard(cli.command('stress <scenario>').description(`load: ${SCENARIOS.join(', ')}; prints req/s and p50/p95/p99`))
    .option('--duration <seconds>', 'how long', (v) => positive(v), 10)
    .option('--concurrency <n>', 'parallel clients', (v) => positive(v), 4)
    .option('--max-requests <n>', 'stop after this many requests', (v) => positive(v))
    .option('--slot-search <query>', 'which slots search and book take (default: the free slots of the first Schedule)')
    .action(async (scenario: string, o: SessionOptions & { duration: number; concurrency: number; maxRequests?: number; slotSearch?: string }) => {
      if (!(SCENARIOS as readonly string[]).includes(scenario)) throw new LocalError(`unknown scenario ${scenario}: one of ${SCENARIOS.join(', ')}`);
      await withSession(o, async (s) => {
        const report = await runStress(s, scenario as (typeof SCENARIOS)[number], { durationSec: o.duration, concurrency: o.concurrency, maxRequests: o.maxRequests, slotSearch: o.slotSearch });
        print(io, o, report, `${scenario}: ${report.requests} requests, ${report.rps} req/s, p50 ${report.p50_ms} ms, p95 ${report.p95_ms} ms, p99 ${report.p99_ms} ms, errors ${JSON.stringify(report.errors)}`);
      });
    });
}

function port(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('a port number 0-65535');
  return n;
}

function positive(v: string): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('a positive number');
  return n;
}

async function lastServer(): Promise<string> {
  const store = await KeyStore.open();
  try {
    if (!store.data.lastServer) throw new LocalError('no server known yet: pass --server URL');
    return store.data.lastServer;
  } finally {
    store.close();
  }
}

/** Prints a failure and returns the exit code: 1 when the server refused, 2 for local errors. */
export async function report(err: unknown, io: CliIo): Promise<number> {
  if (err instanceof Refused || err instanceof GuardClientError) {
    const status = err.status;
    const body = err.body as { error?: string; error_description?: string; issue?: { diagnostics?: string; details?: { text?: string } }[] } | undefined;
    const lines = [`terminus-client: the server answered ${status}`];
    if (body?.error) lines.push(`error: ${body.error}${body.error_description ? `: ${body.error_description}` : ''}`);
    for (const i of body?.issue ?? []) lines.push(`issue: ${i.diagnostics ?? i.details?.text ?? ''}`);
    const hint = (err as { hint?: string }).hint;
    if (hint) lines.push(`hint: ${hint}`);
    io.err(`${lines.join('\n')}\n`);
    if (!io.isTTY && body !== undefined) io.out(`${JSON.stringify(body)}\n`);
    return 1;
  }
  if (err instanceof KonnektorError) {
    io.err(`terminus-client: ${err.message}\n`);
    return err.kind === 'unreachable' ? 2 : 1;
  }
  if (err instanceof LoggedOut) {
    io.err(`terminus-client: not logged in to ${err.origin} (logged out): run terminus-client login\n`);
    return 2;
  }
  if (err instanceof KeyStoreError || err instanceof LocalError || err instanceof ClientInputError || err instanceof Unreachable) {
    io.err(`terminus-client: ${err.message}\n`);
    return 2;
  }
  const e = err as NodeJS.ErrnoException;
  io.err(`terminus-client: ${e?.message ?? String(err)}\n`);
  return 2;
}
