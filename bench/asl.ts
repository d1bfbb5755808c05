import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AslChannel, serializeRequest } from '../src/client/asl-channel';
import { fetchTransport } from '../src/client';
import { loadConfig } from '../src/config';
import { createLogger } from '../src/logger';
import { AslServer } from '../src/guard/asl/asl-server';
import { AslServerKeys } from '../src/guard/asl/asl-server-keys';
import { sharedState } from '../src/guard/state/shared-state';
import { createCardCa } from '../src/guard/pki/dev-pki';
import { decapsulate, deriveK1, deriveK2, encapsulate, encryptFrame, generateHybridKeyPair, open, seal, sha256 } from '../src/common/asl/asl-crypto';
import { bytesOf, decodeMap, encodeCbor, pointOf } from '../src/common/asl/asl-messages';
import { openDb } from '../src/store/db';
import { migrate } from '../src/store/migrate';
import { authenticatedRequests, prepareStore, query } from './pep';
import { startServerProcess } from './lib/server';

const HANDSHAKES = 300;
const FRAMES = 2_000;
const ROUNDS = 5;
const PER_ROUND = 150;

/**
 * Additional security layer benchmark. (1) The server's part of the handshake (M1 → M2, M3 → M4) in process on
 * one core, the client's part done outside the clock: p50/p99 and handshakes per second of
 * server CPU. (2) The server's cost of one data frame (open, the request counter, seal a 2 KiB
 * answer), in process. (3) The same slot search plain and through ASL against one server
 * process, 1 connection, interleaved rounds: what the tunnel adds end to end (client and server).
 */
export async function benchAsl(): Promise<string> {
  const lines: string[] = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-asl-'));
  const config = loadConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent', ASL_MODE: 'supported', PUBLIC_URL: 'http://127.0.0.1:1' });
  const db = await openDb({ dataDir: dir });
  try {
    await migrate(db);
    const ctx = { config, db, logger: createLogger('silent'), now: () => new Date() };
    const keys = new AslServerKeys(ctx);
    const server = new AslServer(ctx, keys, sharedState(ctx));
    await keys.currentSet();
    const m1m2: number[] = [];
    const m3m4: number[] = [];
    let session: { cid: string; k2: ReturnType<typeof deriveK2> } | undefined;
    for (let i = 0; i < HANDSHAKES + 20; i++) {
      const own = generateHybridKeyPair();
      const m1 = encodeCbor({ MessageType: 'M1', ECDH_PK: own.publicKeys.ecdh, 'ML-KEM-768_PK': Buffer.from(own.publicKeys.mlkem) });
      let t = process.hrtime.bigint();
      const { cid, m2 } = await server.handshake(m1);
      const a = Number(process.hrtime.bigint() - t) / 1e6;
      const msg2 = decodeMap(m2, 'M2');
      const ssE = decapsulate(own.privateKeys, pointOf(msg2, 'ECDH_ct'), bytesOf(msg2, 'ML-KEM-768_ct'));
      const k1 = deriveK1(ssE);
      const pub = decodeMap(bytesOf(decodeMap(open(k1.s2c, bytesOf(msg2, 'AEAD_ct'))!, 'keys'), 'signed_pub_keys'), 'pub');
      const enc = encapsulate({ ecdh: pointOf(pub, 'ECDH_PK'), mlkem: bytesOf(pub, 'ML-KEM-768_PK') });
      const k2 = deriveK2(ssE, enc.sharedSecret);
      const aeadCt = seal(k1.c2s, encodeCbor({ ECDH_ct: enc.ecdhCt, 'ML-KEM-768_ct': Buffer.from(enc.mlkemCt), ERP: false, ESO: false }));
      const m3 = encodeCbor({ MessageType: 'M3', AEAD_ct: aeadCt, AEAD_ct_key_confirmation: seal(k2.c2sKeyConfirmation, sha256(m1, m2, aeadCt)) });
      t = process.hrtime.bigint();
      await server.finish(cid, m3);
      const b = Number(process.hrtime.bigint() - t) / 1e6;
      if (i >= 20) {
        m1m2.push(a);
        m3m4.push(b);
      }
      session = { cid, k2 };
    }
    const total = m1m2.map((x, i) => x + m3m4[i]);
    const mean = total.reduce((s, x) => s + x, 0) / total.length;
    lines.push(
      `Handshake, server side in process (embedded store; ${HANDSHAKES} handshakes after 20 warm-up; the client's part outside the clock; ${os.cpus().length} cores, load average ${os.loadavg()[0].toFixed(1)}):`,
      '',
      '| step | p50 ms | p99 ms | mean ms |',
      '|---|---|---|---|',
      `| M1 → M2 (encapsulate, sign nothing: the keys were signed once, store the handshake) | ${pct(m1m2, 50)} | ${pct(m1m2, 99)} | ${avg(m1m2)} |`,
      `| M3 → M4 (decapsulate, key confirmation, store the session) | ${pct(m3m4, 50)} | ${pct(m3m4, 99)} | ${avg(m3m4)} |`,
      `| both | ${pct(total, 50)} | ${pct(total, 99)} | ${mean.toFixed(2)} |`,
      '',
      `About ${Math.round(1000 / mean)} handshakes per second on one core (the server's part, store included). Aim (docs/requirements.md#performance-aims): each handshake message under 75 ms mean, p99 under 1 s.`,
    );

    // One data frame: open (session row, counter), seal a 2 KiB answer.
    const answer = crypto.randomBytes(2048);
    const request = serializeRequest({ method: 'GET', url: `http://127.0.0.1${query(1)}`, headers: { authorization: `DPoP ${'x'.repeat(600)}`, dpop: 'y'.repeat(700) } });
    const frameTimes: number[] = [];
    for (let i = 1; i <= FRAMES + 100; i++) {
      const frame = encryptFrame(session!.k2.c2sAppData, { version: 2, env: 0, mode: 1, requestCounter: BigInt(i), keyId: session!.k2.keyId }, BigInt(i), request);
      const t = process.hrtime.bigint();
      const opened = await server.openRequest(session!.cid, frame, false);
      opened.sealResponse(answer);
      if (i > 100) frameTimes.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    lines.push(
      '',
      `One data frame, server side in process (a ${request.length}-byte request, a 2 KiB answer; ${FRAMES} frames): p50 ${pct(frameTimes, 50)} ms, p99 ${pct(frameTimes, 99)} ms, of which the store's statements (session row with the response counter, the request counter) are most; AES-256-GCM of both directions alone is about ${gcmCost(session!.k2.c2sAppData, request, answer)} ms. Aim: under 0.5 ms added per request.`,
    );
  } finally {
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  lines.push('', await endToEnd());
  return lines.join('\n');
}

/** The same authenticated slot search plain and through ASL, 1 connection, interleaved rounds. */
async function endToEnd(): Promise<string> {
  const store = await prepareStore(false);
  const ca = createCardCa();
  const anchors = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-ca-')), 'card-ca.pem');
  fs.writeFileSync(anchors, ca.certPem);
  const srv = await startServerProcess({ ...store.env, DEMO_DATA: 'false', CARD_TRUST_ANCHORS: anchors, ASL_MODE: 'supported', RATE_LIMIT_FHIR_PER_CLIENT: '100000000', RATE_LIMIT_PER_IP: '100000' });
  try {
    const next = await authenticatedRequests(srv.url, ca, ROUNDS * PER_ROUND * 2 + 400);
    const channel = new AslChannel({ origin: srv.url, transport: fetchTransport(), env: 0, now: () => Math.floor(Date.now() / 1000) });
    const plain: number[] = [];
    const tunneled: number[] = [];
    const send = async (asl: boolean, n: number) => {
      const r = await next(0, n);
      const t = process.hrtime.bigint();
      const res = asl
        ? await channel.send({ method: 'GET', url: `${srv.url}${r.path}`, headers: r.headers as Record<string, string> })
        : await fetch(`${srv.url}${r.path}`, { headers: r.headers as Record<string, string> }).then(async (x) => ({ status: x.status, body: await x.arrayBuffer() }));
      const ms = Number(process.hrtime.bigint() - t) / 1e6;
      if (res.status !== 200) throw new Error(`search answered ${res.status}`);
      return ms;
    };
    for (let i = 0; i < 100; i++) {
      await send(false, i);
      await send(true, i);
    }
    for (let r = 0; r < ROUNDS; r++) {
      for (let i = 0; i < PER_ROUND; i++) plain.push(await send(false, i));
      for (let i = 0; i < PER_ROUND; i++) tunneled.push(await send(true, i));
    }
    return [
      `End to end (one server process, ${store.store}, 20,000 Slots; \`${query(1)}\`; 1 connection; ${ROUNDS} interleaved rounds of ${PER_ROUND} requests each way after 100 warm-up; client and server on this machine, so the client's encryption counts too):`,
      '',
      '| path | p50 ms | p99 ms | mean ms |',
      '|---|---|---|---|',
      `| plain (DPoP token + proof) | ${pct(plain, 50)} | ${pct(plain, 99)} | ${avg(plain)} |`,
      `| through ASL (the same request encrypted, its answer decrypted) | ${pct(tunneled, 50)} | ${pct(tunneled, 99)} | ${avg(tunneled)} |`,
      '',
      `ASL adds ${(Number(pct(tunneled, 50)) - Number(pct(plain, 50))).toFixed(2)} ms at p50 end to end (both sides' encryption, the inner request's second parse, the session and counter statements).`,
    ].join('\n');
  } finally {
    await srv.stop();
    await store.cleanup();
    fs.rmSync(path.dirname(anchors), { recursive: true, force: true });
  }
}

function gcmCost(key: Buffer, request: Buffer, answer: Buffer): string {
  const n = 2000;
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    seal(key, request);
    seal(key, answer);
  }
  return (Number(process.hrtime.bigint() - t) / 1e6 / n).toFixed(3);
}

function pct(xs: number[], p: number): string {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))].toFixed(2);
}

function avg(xs: number[]): string {
  return (xs.reduce((s, x) => s + x, 0) / xs.length).toFixed(2);
}
