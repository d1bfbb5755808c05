import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { composeTerminus } from '../../src/app';
import { SoftwareCard } from '../../src/client/software-card';
import { createCardCa, issueCard } from '../../src/guard/pki/dev-pki';
import { trustListRefreshes } from '../../src/server-lib/metrics';
import { createTestContext } from '../helpers/context';
import { buildTsl, createTslSigner, OID_SMC_B_AUT, signTsl, SVC_STATUS, type ListedCa } from '../helpers/tsl';
import { exchange, guardHarness, type Harness } from './helpers/harness';

// Card trust from a TSL, end to end: the list decides which cards get a token at /token, and
// what happens when a refresh brings a bad, older or newer list, or none at all.

const DAY = 86_400_000;
const { ca: signerCa, signer } = createTslSigner();
const smcbCa1 = createCardCa({ commonName: 'SMC-B CA 1' });
const smcbCa2 = createCardCa({ commonName: 'SMC-B CA 2' });
const withdrawnCa = createCardCa({ commonName: 'Withdrawn SMC-B CA' });
const cardOf = (ca: { certPem: string; keyPem: string }, telematikId: string) => {
  const c = issueCard(ca, { telematikId });
  return new SoftwareCard(c.certPem, c.keyPem);
};

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'card-tsl-'));
  fs.writeFileSync(path.join(dir, 'signer-ca.pem'), signerCa.certPem);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function list(sequence: number, services: ListedCa[], o: { nextUpdate?: Date; signWith?: typeof signer } = {}): string {
  return signTsl(buildTsl({ sequence, nextUpdate: o.nextUpdate ?? new Date(Date.now() + 30 * DAY), services }), o.signWith ?? signer);
}
const smcb = (ca: { certPem: string }, status = SVC_STATUS.inaccord): ListedCa => ({ certPem: ca.certPem, status, extensionOids: [OID_SMC_B_AUT] });

/** Renamed over the old file, as a download job would. */
function publish(file: string, xml: string): void {
  fs.writeFileSync(`${file}.new`, xml);
  fs.renameSync(`${file}.new`, file);
}

async function readyz(h: Harness) {
  const res = await request(h.app).get('/readyz');
  return { status: res.status, card_tsl: res.body.checks.card_tsl, overall: res.body.status };
}

/** Polls /readyz until the list state matches (the refresh runs every second). */
async function until(h: Harness, pred: (s: Awaited<ReturnType<typeof readyz>>) => boolean): Promise<Awaited<ReturnType<typeof readyz>>> {
  for (let i = 0; ; i++) {
    const s = await readyz(h);
    if (pred(s)) return s;
    if (i > 600) throw new Error(`the list state never matched: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('CARD_TSL from a file', () => {
  let h: Harness;
  let file: string;
  beforeAll(async () => {
    file = path.join(dir, 'tsl.xml');
    publish(file, list(10, [smcb(smcbCa1), smcb(smcbCa2), smcb(withdrawnCa, SVC_STATUS.withdrawn)]));
    h = await guardHarness({ redis: false, env: { CARD_TSL: file, CARD_TSL_SIGNER_CA: path.join(dir, 'signer-ca.pem'), CARD_TSL_REFRESH: '1s', DATA_DIR: path.join(dir, 'data-file') } });
  });
  afterAll(() => h.close());

  test('a card of a listed SMC-B CA gets a token; /readyz names the list in use', async () => {
    const { res } = await exchange(h, { card: cardOf(smcbCa1, '1-TSL-PRAXIS') });
    expect([res.status, res.body.token_type]).toEqual([200, 'DPoP']);
    expect(await readyz(h)).toMatchObject({ status: 200, overall: 'ready', card_tsl: { status: 'ok', sequence: '10' } });
  });

  test.each([
    ['a withdrawn CA', () => cardOf(withdrawnCa, '1-WITHDRAWN')],
    ['a CA the list does not name (the development CA is not trusted beside a TSL)', () => cardOf(createCardCa({ commonName: 'Unlisted CA' }), '1-UNLISTED')],
  ])('a card of %s is 403 access_denied', async (_name, card) => {
    const { res } = await exchange(h, { card: card() });
    expect([res.status, res.body.error]).toEqual([403, 'access_denied']);
    expect(res.body.error_description).toMatch(/does not chain to a trusted card CA/);
  });

  test('the list on disk: a tampered one is refused and the last good list stays in force (degraded)', async () => {
    publish(file, list(11, [smcb(smcbCa2)]).replace('SMC-B CA 2', 'SMC-B CA X'));
    const s = await until(h, (r) => r.card_tsl.status === 'degraded');
    expect(s).toMatchObject({ status: 200, overall: 'degraded', card_tsl: { sequence: '10', reason: expect.stringMatching(/last refresh failed: the XML signature of the TSL \(CARD_TSL .*tsl\.xml\) does not verify/) } });
    const { res } = await exchange(h, { card: cardOf(smcbCa1, '1-TSL-PRAXIS') });
    expect(res.status).toBe(200);
  });

  test('a newer list that withdraws a CA takes effect at the next refresh', async () => {
    publish(file, list(11, [smcb(smcbCa1, SVC_STATUS.withdrawn), smcb(smcbCa2)]));
    await until(h, (r) => r.card_tsl.status === 'ok' && r.card_tsl.sequence === '11');
    expect((await exchange(h, { card: cardOf(smcbCa1, '1-TSL-PRAXIS') })).res.status).toBe(403);
    expect((await exchange(h, { card: cardOf(smcbCa2, '1-TSL-PRAXIS-2') })).res.status).toBe(200);
  });

  test('an older list (a rollback) is refused: the newer one stays in force', async () => {
    publish(file, list(10, [smcb(smcbCa1), smcb(smcbCa2)]));
    const s = await until(h, (r) => r.card_tsl.status === 'degraded');
    expect(s.card_tsl).toMatchObject({ sequence: '11', reason: expect.stringMatching(/sequence number 10, older than the one in use \(11\)/) });
    expect((await exchange(h, { card: cardOf(smcbCa1, '1-TSL-PRAXIS') })).res.status).toBe(403);
  });

  test('past NextUpdate by more than the grace, the list gives no trust: /readyz 503, cards refused', async () => {
    publish(file, list(12, [smcb(smcbCa2)], { nextUpdate: new Date(Date.now() + DAY) }));
    await until(h, (r) => r.card_tsl.sequence === '12' && r.card_tsl.status === 'ok');
    h.ctx.clock.advance(2 * DAY);
    expect((await readyz(h)).card_tsl.status).toBe('degraded');
    expect((await exchange(h, { card: cardOf(smcbCa2, '1-TSL-PRAXIS-2') })).res.status).toBe(200);
    h.ctx.clock.advance(3 * DAY);
    expect(await readyz(h)).toMatchObject({ status: 503, overall: 'unavailable', card_tsl: { status: 'unavailable', reason: expect.stringMatching(/past its NextUpdate .* by more than the grace/) } });
    const { res } = await exchange(h, { card: cardOf(smcbCa2, '1-TSL-PRAXIS-2') });
    expect([res.status, res.body.error]).toEqual([403, 'access_denied']);
  });
});

describe('CARD_TSL beside CARD_TRUST_ANCHORS', () => {
  const fixedCa = createCardCa({ commonName: 'Fixed SMC-B CA' });
  let h: Harness;
  let file: string;
  beforeAll(async () => {
    file = path.join(dir, 'tsl-merged.xml');
    fs.writeFileSync(path.join(dir, 'fixed.pem'), fixedCa.certPem);
    publish(file, list(30, [smcb(smcbCa1)], { nextUpdate: new Date(Date.now() + DAY) }));
    h = await guardHarness({
      redis: false,
      env: { CARD_TRUST_ANCHORS: path.join(dir, 'fixed.pem'), CARD_TSL: file, CARD_TSL_SIGNER_CA: path.join(dir, 'signer-ca.pem'), CARD_TSL_REFRESH: '1s', DATA_DIR: path.join(dir, 'data-merged') },
    });
  });
  afterAll(() => h.close());
  const outcomes = async () => Object.fromEntries((await trustListRefreshes.get()).values.filter((v) => v.labels.list === 'CARD_TSL').map((v) => [v.labels.outcome, v.value]));

  test('cards of the fixed anchors and of the listed CAs both get a token', async () => {
    expect((await exchange(h, { card: cardOf(fixedCa, '1-FIXED-PRAXIS') })).res.status).toBe(200);
    expect((await exchange(h, { card: cardOf(smcbCa1, '1-LISTED-PRAXIS') })).res.status).toBe(200);
    expect((await exchange(h, { card: cardOf(smcbCa2, '1-UNLISTED-PRAXIS') })).res.status).toBe(403);
  });

  test('a newer list signed by a foreign CA is refused at refresh (counted by its reason): the good list stays, its new CA gets nothing', async () => {
    const before = (await outcomes()).signer ?? 0;
    publish(file, list(31, [smcb(smcbCa1), smcb(smcbCa2)], { signWith: createTslSigner({ name: 'Foreign' }).signer }));
    const s = await until(h, (r) => r.card_tsl.status === 'degraded');
    expect(s.card_tsl).toMatchObject({ sequence: '30', reason: expect.stringMatching(/Foreign TSL Signing Unit.* does not chain to the list signer CA/) });
    expect((await outcomes()).signer).toBeGreaterThan(before);
    expect((await exchange(h, { card: cardOf(smcbCa2, '1-UNLISTED-PRAXIS') })).res.status).toBe(403);
    expect((await exchange(h, { card: cardOf(smcbCa1, '1-LISTED-PRAXIS') })).res.status).toBe(200);
  });

  test('the list past its grace: only the fixed anchors remain, and /readyz says degraded rather than unavailable', async () => {
    h.ctx.clock.advance(5 * DAY);
    expect(await readyz(h)).toMatchObject({ status: 200, overall: 'degraded', card_tsl: { status: 'degraded', reason: expect.stringMatching(/past its NextUpdate .* by more than the grace/) } });
    expect((await exchange(h, { card: cardOf(fixedCa, '1-FIXED-PRAXIS') })).res.status).toBe(200);
    expect((await exchange(h, { card: cardOf(smcbCa1, '1-LISTED-PRAXIS') })).res.status).toBe(403);
  });
});

describe('CARD_TSL at start', () => {
  test.each([
    ['signed by a foreign CA', () => list(1, [smcb(smcbCa1)], { signWith: createTslSigner({ name: 'Foreign' }).signer }), /the signer of the TSL \(CARD_TSL .*\) .*Foreign TSL Signing Unit.* does not chain to the list signer CA/],
    ['long past its NextUpdate', () => list(1, [smcb(smcbCa1)], { nextUpdate: new Date(Date.now() - 10 * DAY) }), /CARD_TSL: the list's NextUpdate .* is past by more than the grace of 72 h/],
  ])('a list %s and no stored copy stops the start, saying why', async (_name, xml, message) => {
    const file = path.join(dir, `start-${Math.random()}.xml`);
    publish(file, xml());
    const ctx = await createTestContext({ env: { CARD_TSL: file, CARD_TSL_SIGNER_CA: path.join(dir, 'signer-ca.pem'), DATA_DIR: path.join(dir, `data-${Math.random()}`) } });
    try {
      await expect(composeTerminus(ctx).warmUp()).rejects.toThrow(message);
    } finally {
      await ctx.db.close();
    }
  });

  test('from a URL: the stored copy serves when the source is down at the next start', async () => {
    const xml = list(20, [smcb(smcbCa1)]);
    const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/xml' }).end(xml));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ECC/ECC-RSA_TSL.xml`;
    const env = { CARD_TSL: url, CARD_TSL_SIGNER_CA: path.join(dir, 'signer-ca.pem'), DATA_DIR: path.join(dir, 'data-url') };
    const first = await guardHarness({ redis: false, env });
    try {
      expect((await exchange(first, { card: cardOf(smcbCa1, '1-URL-PRAXIS') })).res.status).toBe(200);
      expect(fs.readFileSync(path.join(dir, 'data-url', 'trust', 'card-tsl.xml'), 'utf8')).toBe(xml);
    } finally {
      await first.close();
      await new Promise((r) => server.close(r));
    }
    const second = await guardHarness({ redis: false, env });
    try {
      expect((await exchange(second, { card: cardOf(smcbCa1, '1-URL-PRAXIS') })).res.status).toBe(200);
      expect(await readyz(second)).toMatchObject({ status: 200, card_tsl: { status: 'degraded', sequence: '20', reason: expect.stringMatching(/could not be fetched/) } });
    } finally {
      await second.close();
    }
  });
});
