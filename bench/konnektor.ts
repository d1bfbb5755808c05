/**
 * The TI client paths: a login whose subject token the SMC-B signs behind a Konnektor (the
 * stand-in of the tests, answering every call after 50 ms, as a Konnektor on the practice network
 * might) against the same login with the card key in PEM files, in the same run; and the local
 * signing proxy's cost per request over a direct session.
 *
 *   node --import tsx bench/run.ts konnektor
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createClient, type ClientSession } from '../src/client';
import { startSigningProxy } from '../src/client/proxy/signing-proxy';
import { createCardCa, issueCard } from '../src/guard/pki/dev-pki';
import { startKonnektorStandIn } from '../test/helpers/konnektor-stand-in';
import { TlsPki } from '../test/helpers/tls-pki';
import { loadAverage } from './lib/cpu';
import { startServerProcess } from './lib/server';

const LOGINS = 8;
const KONNEKTOR_DELAY_MS = 50;
const ROUNDS = 6;
const PER_ROUND = 200;

export async function benchKonnektor(): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-konnektor-'));
  const cardCa = createCardCa({ commonName: 'Bench SMC-B CA' });
  fs.writeFileSync(path.join(dir, 'card-ca.pem'), cardCa.certPem);
  const card = issueCard(cardCa, { telematikId: '5-BENCH-PRAXIS', curve: 'brainpoolP256r1' });
  fs.writeFileSync(path.join(dir, 'card.pem'), card.certPem);
  fs.writeFileSync(path.join(dir, 'card.key.pem'), card.keyPem);
  const pki = new TlsPki(path.join(dir, 'tls'), 'bench-konnektor-ca');
  const { cert, key } = pki.issue('konnektor', { server: true });
  const context = { mandantId: 'M1', clientSystemId: 'C1', workplaceId: 'W1' };
  const standIn = await startKonnektorStandIn({ cert, key, context, cards: [{ handle: 'CH-1', ecc: { certPem: card.certPem, keyPem: card.keyPem } }], delayMs: KONNEKTOR_DELAY_MS });
  const kon = path.join(dir, 'praxis.kon');
  const ca = new crypto.X509Certificate(fs.readFileSync(pki.caPem)).raw.toString('base64');
  fs.writeFileSync(kon, JSON.stringify({ url: standIn.url, ...context, credentials: { type: 'basic', username: 'u', password: 'p' }, trustStore: [ca] }));
  const server = await startServerProcess({ CARD_TRUST_ANCHORS: path.join(dir, 'card-ca.pem'), DEMO_DATA: 'true', RATE_LIMIT_PER_IP: '100000000', RATE_LIMIT_PER_CLIENT: '100000000', RATE_LIMIT_FHIR_PER_CLIENT: '100000000' });
  const open = (n: number, backend: { konnektor: string } | { card: string; key: string }) =>
    createClient({ server: server.url, ...backend, home: path.join(dir, `home-${n}`), password: 'bench passphrase of terminus' });
  try {
    const login = { pem: [] as number[], konnektor: [] as number[] };
    const before = standIn.calls.ExternalAuthenticate ?? 0;
    for (let i = 0; i < LOGINS; i++) {
      for (const which of i % 2 === 0 ? (['pem', 'konnektor'] as const) : (['konnektor', 'pem'] as const)) {
        const s = await open(i * 2 + (which === 'pem' ? 0 : 1), which === 'pem' ? { card: path.join(dir, 'card.pem'), key: path.join(dir, 'card.key.pem') } : { konnektor: kon });
        const t0 = performance.now();
        await s.login();
        login[which].push(performance.now() - t0);
        s.close();
      }
    }
    const signatures = ((standIn.calls.ExternalAuthenticate ?? 0) - before) / LOGINS;
    const proxied = await proxyOverhead(await open(99, { card: path.join(dir, 'card.pem'), key: path.join(dir, 'card.key.pem') }), server.url);
    return [
      `A server process (PGlite, demo calendars, guard on); the Konnektor stand-in answers each SOAP call after ${KONNEKTOR_DELAY_MS} ms (and signs with OpenSSL); ${LOGINS} first logins each way (registration and token exchange), alternating; load average ${loadAverage()} at the end.`,
      '',
      '| login | p50 ms | min ms | max ms |',
      '|---|---|---|---|',
      row('card key in PEM files (floor)', login.pem),
      row(`SMC-B behind the Konnektor (service directory, GetCards, ReadCardCertificate, GetPinStatus, ExternalAuthenticate: 5 calls of ${KONNEKTOR_DELAY_MS} ms)`, login.konnektor),
      '',
      `ExternalAuthenticate calls per token exchange: ${signatures.toFixed(2)} (aim: at most 2). Konnektor login minus PEM login at p50: ${(median(login.konnektor) - median(login.pem)).toFixed(0)} ms, of which ${5 * KONNEKTOR_DELAY_MS} ms are the stand-in's delay.`,
      '',
      proxied,
    ].join('\n');
  } finally {
    await server.stop();
    await standIn.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** `GET /fhir/Slot?...` one at a time, through the session directly and through the proxy on 127.0.0.1, alternating rounds. */
async function proxyOverhead(session: ClientSession, origin: string): Promise<string> {
  await session.login();
  const proxy = await startSigningProxy({ session, port: 0 });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const query = '/fhir/Slot?schedule=Schedule/demo-schedule-allgemeinmedizin&status=free&_count=10';
  const direct = async () => {
    const res = await session.fetch(`${origin}${query}`);
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${query} answered ${res.status}`);
  };
  const viaProxy = () =>
    new Promise<void>((resolve, reject) => {
      http.get(`${proxy.address}${query}`, { agent }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`${query} through the proxy answered ${res.statusCode}`))));
      }).on('error', reject);
    });
  const p50 = { direct: [] as number[], proxy: [] as number[] };
  try {
    for (let i = 0; i < 50; i++) await Promise.all([direct(), viaProxy()]);
    for (let round = 0; round < ROUNDS; round++) {
      for (const which of round % 2 === 0 ? (['direct', 'proxy'] as const) : (['proxy', 'direct'] as const)) {
        const times: number[] = [];
        for (let i = 0; i < PER_ROUND; i++) {
          const t0 = performance.now();
          await (which === 'direct' ? direct() : viaProxy());
          times.push(performance.now() - t0);
        }
        p50[which].push(median(times));
      }
    }
  } finally {
    agent.destroy();
    await proxy.close();
    session.close();
  }
  const added = p50.proxy.map((p, i) => p - p50.direct[i]);
  return [
    `Signing proxy: \`GET ${query}\` one at a time, ${ROUNDS} alternating rounds of ${PER_ROUND}, through the session's own fetch and through \`terminus-client serve\`'s proxy (127.0.0.1, a kept-alive connection from the caller).`,
    '',
    '| path | p50 ms (median of rounds) |',
    '|---|---|',
    `| direct session | ${median(p50.direct).toFixed(2)} |`,
    `| through the proxy | ${median(p50.proxy).toFixed(2)} |`,
    '',
    `Added by the proxy at p50: ${median(added).toFixed(2)} ms (per round: ${added.map((a) => a.toFixed(2)).join(', ')}; aim: at most 1 ms).`,
  ].join('\n');
}

function row(name: string, values: number[]): string {
  return `| ${name} | ${median(values).toFixed(0)} | ${Math.min(...values).toFixed(0)} | ${Math.max(...values).toFixed(0)} |`;
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
