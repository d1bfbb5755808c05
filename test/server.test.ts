import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../src/config';
import { startServer } from '../src/server';
import { migratedDataDir } from './helpers/context';
import { entryArgs } from './helpers/entry';

const run = promisify(execFile);

/** The embedded mode of `npm start`: PGlite in DATA_DIR, demo data, restart keeps everything. */
describe('server lifecycle on the embedded store', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-embedded-'));
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const config = () => loadConfig({ PORT: '0', METRICS_PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'silent', GUARD_ENFORCEMENT: 'off' });

  test('first start loads demo calendars; a restart keeps data and does not reload them', async () => {
    const first = await startServer(config());
    const schedules = await getJson(`${first.url}/fhir/Schedule?_count=0`);
    expect(schedules.total).toBeGreaterThanOrEqual(3);
    const put = await send('PUT', `${first.url}/fhir/Practitioner/kept`, { resourceType: 'Practitioner', id: 'kept', name: [{ family: 'Bleibt' }] });
    expect(put.status).toBe(201);
    await first.close();

    const second = await startServer(config());
    const kept = await getJson(`${second.url}/fhir/Practitioner/kept`);
    expect(kept.name[0].family).toBe('Bleibt');
    const again = await getJson(`${second.url}/fhir/Schedule?_count=0`);
    expect(again.total).toBe(schedules.total);
    const demo = await getJson(`${second.url}/fhir/Schedule?_count=100`);
    for (const e of demo.entry ?? []) expect(e.resource.meta.versionId).toBe('1');
    await second.close();
  });

  test('the guard signs with a key that exists before the first request (start-up work done before listening)', async () => {
    const server = await startServer(config());
    try {
      const { rows } = await server.ctx.db.query<{ n: string }>('SELECT count(*) AS n FROM guard_signing_key WHERE retire_at > now()');
      expect(Number(rows[0].n)).toBeGreaterThanOrEqual(1);
    } finally {
      await server.close();
    }
  });

  test('close lets an in-flight request finish before the store closes', async () => {
    const server = await startServer(config());
    let closing: Promise<void> | undefined;
    server.http.once('request', () => {
      closing = server.close();
    });
    const result = await getJson(`${server.url}/fhir/Slot?schedule.actor:Practitioner.name=a&_count=5`);
    expect(result.resourceType).toBe('Bundle');
    expect(closing).toBeDefined();
    await closing;
    await expect(getJson(`${server.url}/healthz`)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});

describe('terminus CLI', () => {
  // A migrated store: the first start's migrations run in the lifecycle tests above.
  let dataDir: string;
  beforeAll(async () => {
    dataDir = env.DATA_DIR = await migratedDataDir('terminus-cli-');
  }, 120_000);
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  // The embedded store only, whatever the project's environment holds (test/store-env.js).
  const env = { PATH: process.env.PATH, DATA_DIR: '', LOG_LEVEL: 'silent' };
  const main = path.join(__dirname, '..', 'src', 'main.ts');
  const tsx = entryArgs(main);

  test('import loads the ISiK fixture keeping ids; a bad file stores nothing', async () => {
    const fixture = path.join(__dirname, '..', 'fixtures', 'isik-stufe5.json');
    const ok = await run(process.execPath, [...tsx, 'import', fixture], { env });
    expect(ok.stdout).toMatch(/isik-stufe5\.json: \d+ resources imported/);
    const bad = path.join(dataDir, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [{ resource: { resourceType: 'Slot', id: 'x', status: 'free' } }] }));
    const failed = await run(process.execPath, [...tsx, 'import', bad], { env }).catch((e: { code: number; stderr: string }) => e);
    expect((failed as { code: number }).code).toBe(1);
    // Each problem names the file, the entry with its resource, and the missing element.
    const lines = (failed as { stderr: string }).stderr.trim().split('\n');
    expect(lines.slice(0, 4)).toEqual([
      `${bad}: import failed, nothing from this file was stored (422, 4 problems):`,
      `${bad}: Bundle.entry[0] (Slot/x): Missing required property Slot.schedule (minimum cardinality of the base definition)`,
      `${bad}: Bundle.entry[0] (Slot/x): Missing required property Slot.start (minimum cardinality of the base definition)`,
      `${bad}: Bundle.entry[0] (Slot/x): Missing required property Slot.end (minimum cardinality of the base definition)`,
    ]);
    const invariant = `${bad}: Bundle.entry[0] (Slot/x): ISiK-slot-1 (ISiKTerminblock): `;
    expect([lines.length, lines[4].slice(0, invariant.length)]).toEqual([5, invariant]);
  });

  test('a bad configuration value stops with one line naming the variable', async () => {
    const err = await run(process.execPath, [...tsx, 'migrate'], { env: { ...env, PORT: 'abc' } }).catch((e: { code: number; stderr: string }) => e);
    expect((err as { code: number }).code).toBe(2);
    expect((err as { stderr: string }).stderr.trim()).toBe('terminus: PORT: must be a port number 0-65535, got "abc"');
  });
});

function getJson(url: string): Promise<any> {
  return new Promise((resolve, reject) => {
    http.get(url, { headers: { accept: 'application/fhir+json' } }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve(JSON.parse(body)));
    }).on('error', reject);
  });
}

function send(method: string, url: string, body: unknown): Promise<{ status: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: { 'content-type': 'application/fhir+json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}
