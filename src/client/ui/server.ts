import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import { GuardClientError } from '../guard-client';
import { createCalendar, parseForm, previewCalendar } from './calendar-plan';
import { Fhir, FhirError, outcome, type Reason, type SignedFetch } from './fhir';
import { auditLog, type AuditFilter } from './audit-log';
import { Practice } from './practice';
import { isTimeZone, machineTimeZone } from './time-zone';

export { ownerScopeWarning } from './owner-scopes';

export interface PracticeUiOptions {
  /** The repository origin and the session's signing fetch (every call goes through the guard). */
  origin: string;
  fetch: SignedFetch;
  /** 0: any free port. */
  port?: number;
  /** Time zone the week grid and opening hours are read in by default (default: this machine's); the page can choose another. */
  timeZone?: string;
  /** How often the live update asks the repository for changes while a page is open. */
  pollMs?: number;
  /** Where a failing call is reported (never tokens; the repository's answer only). */
  log?: (line: string) => void;
}

export interface PracticeUi {
  url: string;
  /** The one-time login link (valid until used). */
  loginUrl: string;
  close(): Promise<void>;
}

const COOKIE = 'terminus_ui';
const HOST = '127.0.0.1';

/**
 * The practice page (docs/requirements.md#practice-page-and-operations): a small web app on
 * loopback behind a one-time login link. The link's token is exchanged for an HttpOnly
 * SameSite=Strict cookie; every state-changing call also carries the anti-CSRF token and a
 * same-origin `Origin`; the Host header must name this server (no DNS rebinding). The page's calls become FHIR calls with the client's DPoP session.
 */
export async function startPracticeUi(o: PracticeUiOptions): Promise<PracticeUi> {
  const timeZone = o.timeZone ?? machineTimeZone();
  const fhir = new Fhir(`${o.origin}/fhir`, o.fetch);
  const practice = new Practice(fhir, timeZone);
  let loginToken: string | undefined = crypto.randomBytes(32).toString('base64url');
  const sessions = new Map<string, { csrf: string }>();
  const log = o.log ?? (() => undefined);
  let origins: string[] = [];

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use((req, res, next) => {
    res.set({
      'content-security-policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'x-frame-options': 'DENY',
      'cache-control': 'no-store',
    });
    // Only this server's own names: a rebinding DNS name pointing here is refused.
    if (!origins.includes(`http://${req.headers.host ?? ''}`)) {
      res.status(421).type('text/plain').send('this server answers only at its own address');
      return;
    }
    next();
  });

  app.get('/login', (req, res) => {
    const given = typeof req.query.token === 'string' ? req.query.token : '';
    if (!loginToken || !sameSecret(given, loginToken)) {
      res.status(401).type('html').send(page('Login link not valid', 'This login link is wrong or was already used. Start <code>terminus-client ui</code> again for a new link. / Dieser Anmeldelink ist falsch oder wurde schon benutzt. Starten Sie <code>terminus-client ui</code> neu.'));
      return;
    }
    loginToken = undefined;
    const id = crypto.randomBytes(32).toString('base64url');
    sessions.set(id, { csrf: crypto.randomBytes(32).toString('base64url') });
    res.cookie(COOKIE, id, { httpOnly: true, sameSite: 'strict', path: '/' });
    res.redirect(303, '/');
  });

  const dir = publicDir();
  // The style sheet holds nothing secret: the "not logged in" page uses it too.
  app.get('/style.css', (_req, res) => {
    res.type('text/css; charset=utf-8').send(fs.readFileSync(path.join(dir, 'style.css')));
  });

  // Browsers ask for it on every page; the page has none.
  app.get('/favicon.ico', (_req, res) => {
    res.status(204).end();
  });

  const authenticated = (req: Request, res: Response, next: NextFunction) => {
    const id = cookieOf(req, COOKIE);
    const session = id ? sessions.get(id) : undefined;
    if (!session) {
      if (req.path.startsWith('/api/')) res.status(401).json({ outcome: outcome('login', 'not logged in: open the login link terminus-client ui printed'), reason: { code: 'not-logged-in' } });
      else res.status(401).type('html').send(page('Not logged in', 'Open the login link that <code>terminus-client ui</code> printed. / Öffnen Sie den Anmeldelink, den <code>terminus-client ui</code> ausgegeben hat.'));
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      if (!origins.includes(req.headers.origin ?? '')) {
        res.status(403).json({ outcome: outcome('forbidden', 'cross-origin request refused (Origin)'), reason: { code: 'forbidden' } });
        return;
      }
      if (!sameSecret(String(req.headers['x-csrf-token'] ?? ''), session.csrf)) {
        res.status(403).json({ outcome: outcome('forbidden', 'missing or wrong anti-CSRF token'), reason: { code: 'forbidden' } });
        return;
      }
    }
    res.locals.csrf = session.csrf;
    next();
  };
  app.use(authenticated);

  const files: Record<string, [string, string]> = { '/': ['index.html', 'text/html; charset=utf-8'] };
  // The page's ES modules (app.js, views/*.js, ...), each at its path under public/: the browser
  // imports them from this origin (the CSP's script-src 'self'), and modules need a JavaScript type.
  for (const file of pageModules(dir)) files[`/${file}`] = [file, 'text/javascript; charset=utf-8'];
  for (const [route, [file, type]] of Object.entries(files)) {
    app.get(route, (_req, res) => {
      res.type(type).send(fs.readFileSync(path.join(dir, file)));
    });
  }

  const api = express.Router();
  api.use(express.json({ limit: '256kb' }));
  const handle = (f: (req: Request) => Promise<unknown>) => async (req: Request, res: Response) => {
    try {
      res.json(await f(req));
    } catch (err) {
      const [status, body, reason] = errorAnswer(err, o.origin);
      if (status >= 500) log(`practice page: ${req.method} ${req.path}: ${body.issue[0]?.diagnostics}`);
      res.status(status).json({ outcome: body, ...(reason ? { reason } : {}) });
    }
  };
  const id = (req: Request) => {
    const v = String(req.params.id);
    if (!/^[A-Za-z0-9\-.]{1,64}$/.test(v)) throw new FhirError(400, outcome('invalid', `${v} is not a FHIR id`), { code: 'not-found' });
    return v;
  };
  const body = (req: Request) => (req.body ?? {}) as Record<string, unknown>;
  const version = (req: Request) => (typeof body(req).version === 'string' ? (body(req).version as string) : undefined);

  // The page's time zone: this machine's unless the person chose another (`tz`).
  const zoned = (req: Request) => {
    const tz = req.query.tz ?? body(req).timeZone;
    if (tz === undefined || tz === '' || tz === timeZone) return practice;
    if (typeof tz !== 'string' || !isTimeZone(tz)) throw new FhirError(400, outcome('invalid', `time zone ${JSON.stringify(tz)} is not an IANA time zone (for example Europe/Berlin)`, 'tz'), { code: 'time-zone' });
    return new Practice(fhir, tz);
  };

  api.get('/me', (_req, res) => {
    res.json({ server: o.origin, timeZone, csrf: res.locals.csrf });
  });
  api.get('/calendars', handle(() => practice.calendars()));
  api.get('/week', handle((req) => zoned(req).week(String(req.query.calendar ?? ''), dateParam(req.query.date))));
  api.get('/pending', handle(() => practice.pending()));
  api.get('/appointments/:id', handle((req) => zoned(req).appointment(id(req))));
  api.post('/appointments/:id/confirm', handle((req) => practice.confirm(id(req), version(req))));
  api.post('/appointments/:id/decline', handle((req) => practice.cancel(id(req), body(req).reason, { version: version(req), only: ['pending'], action: 'decline' })));
  api.post('/appointments/:id/cancel', handle((req) => practice.cancel(id(req), body(req).reason, { version: version(req), only: ['booked', 'pending', 'arrived', 'checked-in', 'proposed', 'waitlist'], action: 'cancel' })));
  api.get('/options', handle(() => practice.options()));
  api.post('/calendars/preview', handle((req) => previewCalendar(fhir, parseForm(req.body), zoned(req).timeZone)));
  api.post('/calendars', handle((req) => createCalendar(fhir, parseForm(req.body), zoned(req).timeZone)));
  api.get('/subscriptions', handle(() => practice.subscriptions()));
  api.get('/audit', handle((req) => auditLog(fhir, auditFilter(req.query))));
  app.use('/api', api);

  const live = liveUpdates(practice, o.pollMs ?? 5000, log);
  app.get('/api/events', (req, res) => live.attach(req, res));
  app.use((_req: Request, res: Response) => {
    res.status(404).json({ outcome: outcome('not-found', 'no such page'), reason: { code: 'not-found' } });
  });
  // Express 5 error handler: a body that is not JSON, too large, and the like.
  app.use((err: Error & { status?: number }, _req: Request, res: Response, _next: NextFunction) => {
    const status = err.status && err.status >= 400 && err.status < 500 ? err.status : 500;
    res.status(status).json({ outcome: outcome(status === 500 ? 'exception' : 'invalid', status === 500 ? 'the page server failed' : err.message) });
  });

  const server = http.createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, HOST, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  origins = [`http://${HOST}:${port}`, `http://localhost:${port}`];
  const url = `http://${HOST}:${port}`;
  return {
    url,
    loginUrl: `${url}/login?token=${loginToken}`,
    close: async () => {
      live.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Server-sent `change` events when the newest Appointment or Slot change moves (one poller for all open pages). */
function liveUpdates(practice: Practice, pollMs: number, log: (line: string) => void) {
  const clients = new Set<Response>();
  let last: string | null | undefined;
  let timer: NodeJS.Timeout | undefined;
  const tick = async () => {
    try {
      const now = await practice.lastChange();
      if (last !== undefined && now !== last) for (const c of clients) c.write(`event: change\ndata: ${JSON.stringify({ at: now })}\n\n`);
      last = now;
    } catch (err) {
      log(`practice page: live update: ${(err as Error).message}`);
    }
    if (clients.size) timer = setTimeout(tick, pollMs);
    else timer = undefined;
  };
  return {
    attach(req: Request, res: Response) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
      res.write(`retry: ${pollMs}\n\n`);
      clients.add(res);
      req.on('close', () => clients.delete(res));
      if (!timer) timer = setTimeout(tick, 0);
    },
    close() {
      if (timer) clearTimeout(timer);
      for (const c of clients) c.end();
      clients.clear();
    },
  };
}

function errorAnswer(err: unknown, server: string): [number, ReturnType<typeof outcome>, Reason | undefined] {
  if (err instanceof FhirError) return [err.status, err.outcome, err.reason];
  if (err instanceof GuardClientError) return [502, outcome('security', `the access guard refused the session: ${err.message}`), { code: 'session-refused', server }];
  const cause = unreachableCause(err);
  if (cause) return [502, outcome('transient', `the repository at ${server} cannot be reached (${cause})`), { code: 'unreachable', server, cause }];
  return [500, outcome('exception', (err as Error)?.message ?? 'unexpected error'), undefined];
}

/**
 * The system error of a request that got no HTTP answer (fetch's `TypeError` with the socket's
 * error as its cause, an error carrying that code itself, or the time limit), else undefined.
 */
function unreachableCause(err: unknown): string | undefined {
  const e = err as { name?: string; code?: unknown; cause?: { code?: unknown; errors?: { code?: unknown }[] } } | undefined;
  if (e?.name === 'TimeoutError') return 'ETIMEDOUT';
  const systemCode = (v: unknown) => (typeof v === 'string' && /^(E[A-Z0-9_]+|UND_ERR_[A-Z_]+)$/.test(v) ? v : undefined);
  return systemCode(e?.code) ?? (err instanceof TypeError ? (systemCode(e?.cause?.code) ?? systemCode(e?.cause?.errors?.[0]?.code)) : undefined);
}

/** The day asked for, or undefined: the week view then opens on the calendar's next slot. */
function dateParam(v: unknown): string | undefined {
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(v) || Number.isNaN(Date.parse(`${v}T00:00:00Z`))) throw new FhirError(400, outcome('invalid', `date ${JSON.stringify(v)} is not YYYY-MM-DD`, 'date'), { code: 'form-field', field: 'date' });
  return v;
}

function sameSecret(a: string, b: string): boolean {
  const x = crypto.createHash('sha256').update(a).digest();
  const y = crypto.createHash('sha256').update(b).digest();
  return crypto.timingSafeEqual(x, y) && a.length === b.length;
}

function cookieOf(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return undefined;
}

function page(title: string, html: string): string {
  return `<!doctype html><html lang="en"><meta charset="utf-8"><title>${title}</title><link rel="stylesheet" href="/style.css"><main class="notice"><h1>${title}</h1><p>${html}</p></main></html>`;
}

/** The `.js` files under the page's folder, as paths with `/` (listed once: the routes are fixed at start). */
function pageModules(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((f) => f.split(path.sep).join('/'))
    .filter((f) => f.endsWith('.js'))
    .sort();
}

/** The page's files: beside this module when run from source, in the package's src/ when built. */
function publicDir(): string {
  const candidates = [path.join(__dirname, 'public'), path.resolve(__dirname, '../../../../src/client/ui/public')];
  const found = candidates.find((d) => fs.existsSync(path.join(d, 'index.html')));
  if (!found) throw new Error(`the practice page's files are missing (looked in ${candidates.join(', ')})`);
  return found;
}

/** The audit log's filter from the page's query: strings only, each as typed. */
function auditFilter(query: Request['query']): AuditFilter {
  const text = (name: string) => (typeof query[name] === 'string' && query[name] !== '' ? (query[name] as string) : undefined);
  return { patient: text('patient'), appointment: text('appointment'), user: text('user'), from: text('from'), to: text('to'), cursor: text('cursor') };
}
