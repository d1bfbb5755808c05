import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import type { AuditEvent } from '@medplum/fhirtypes';
import { composeTerminus } from '../../src/app';
import { linkHash } from '../../src/audit/chain';
import { storedEventJson } from '../../src/audit/stored-form';
import { loadConfig } from '../../src/config';
import { createContext } from '../../src/server';
import { migratedDataDir } from '../helpers/context';
import { entryArgs } from '../helpers/entry';

const run = promisify(execFile);

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `terminus audit verify` and `terminus audit export` (exit codes and output) against an
 * embedded store in DATA_DIR: the embedded store only, whatever the project's environment holds
 * (test/store-env.js STORE_FREE).
 */
describe('terminus audit', () => {
  let dataDir: string;
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = { PATH: process.env.PATH, DATA_DIR: '', LOG_LEVEL: 'silent', DEMO_DATA: 'false', METRICS_PORT: '0', GUARD_ENFORCEMENT: 'off' };
  const tsx = entryArgs(path.join(__dirname, '..', '..', 'src', 'main.ts'));
  const terminus = (args: string[]): Promise<Ran> =>
    run(process.execPath, [...tsx, ...args], { env }).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: Ran) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );

  /** Opens the store in DATA_DIR (this process holds it until `close`). */
  async function open() {
    const ctx = await createContext(loadConfig(env));
    return { ctx, close: () => ctx.db.close() };
  }

  beforeAll(async () => {
    dataDir = env.DATA_DIR = await migratedDataDir('terminus-audit-');
    // A server's life: accesses (without the guard: recorded with the address alone), then shutdown with its checkpoint.
    const { ctx, close } = await open();
    const app = composeTerminus(ctx);
    await app.start();
    try {
      for (let i = 0; i < 3; i++) {
        expect((await request(app.app).post('/fhir/Patient').set('Content-Type', 'application/fhir+json').send({ resourceType: 'Patient', active: true })).status).toBe(201);
        expect((await request(app.app).get('/fhir/Patient?_count=5')).status).toBe(200);
      }
    } finally {
      await app.stop();
      await close();
    }
  });

  test('verify: exit 0 and the count on the last line', async () => {
    const r = await terminus(['audit', 'verify']);
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(r.stdout.trim().split('\n').at(-1)).toMatch(/^\d+ audit events verified$/);
    expect(Number(/^(\d+)/.exec(r.stdout.trim().split('\n').at(-1)!)![1])).toBeGreaterThanOrEqual(6);
  });

  test('export: NDJSON of the period on stdout, the chain proof beside it', async () => {
    const proof = path.join(dataDir, 'proof.ndjson');
    const r = await terminus(['audit', 'export', '--since', '2000-01-01', '--proof', proof]);
    expect(r.code).toBe(0);
    const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as AuditEvent);
    expect(events.length).toBeGreaterThanOrEqual(6);
    for (const e of events) expect(e.resourceType).toBe('AuditEvent');
    expect(r.stderr).toContain(`${events.length} audit events exported`);
    const lines = fs.readFileSync(proof, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.slice(0, events.length).map((l) => l.id)).toEqual(events.map((e) => e.id));
    // Each line is rendered from the stored record its link hashes: the proof carries that record.
    const raw = r.stdout.trim().split('\n');
    let linked = 0;
    for (const [i, place] of lines.slice(0, events.length).entries()) {
      const stored = place.stored as string;
      expect(storedEventJson(stored)).toBe(raw[i]);
      if (place.hash === null) continue; // a write's event not linked yet
      linked++;
      const link = linkHash(place.chain as number, BigInt(place.seq as string), Buffer.from(place.prev as string, 'hex'), stored);
      expect(link.toString('hex')).toBe(place.hash);
    }
    expect(linked).toBeGreaterThan(0);
    expect(lines.some((l) => typeof l.jws === 'string')).toBe(true);
    expect((await terminus(['audit', 'export', '--since', '2999-01-01'])).stdout).toBe('');
    expect((await terminus(['audit', 'export', '--since', '2000-01-01', '--until', '2000-01-02'])).stdout).toBe('');
  });

  test('verify: exit 1 naming the AuditEvent altered with SQL', async () => {
    const { ctx, close } = await open();
    let id: string;
    try {
      const { rows } = await ctx.db.query<{ id: string }>('SELECT id FROM audit_event WHERE chain IS NOT NULL ORDER BY recorded LIMIT 1 OFFSET 2');
      id = rows[0].id;
      await ctx.db.query(`UPDATE audit_event SET content = replace(content, '"action":', '"action" :') WHERE id = $1`, [id]);
    } finally {
      await close();
    }
    const r = await terminus(['audit', 'verify']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`terminus audit verify: altered: audit event ${id}`);
  });

  test('exit 2: bad options, and a DATA_DIR a running server holds', async () => {
    const bad = await terminus(['audit', 'verify', '--since', 'yesterday']);
    expect([bad.code, bad.stderr.trim()]).toEqual([2, 'terminus: --since: "yesterday" is not an ISO date or instant']);
    expect((await terminus(['audit', 'export'])).code).toBe(2);
    expect((await terminus(['audit', 'frobnicate'])).code).toBe(2);
    const { close } = await open();
    try {
      const held = await terminus(['audit', 'verify']);
      expect(held.code).toBe(2);
      expect(held.stderr).toMatch(/^terminus: DATA_DIR: .*in use by process \d+.* \(a running server\): stop it first, then run terminus audit again/);
    } finally {
      await close();
    }
  });
});
