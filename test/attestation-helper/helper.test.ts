import { execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { AttestationHelperClient, HelperCallError, startAttestationHelper, TpmTools, type RunningHelper } from '../../src/attestation-helper';
import { parseEventLog, replaySha256 } from '../../src/common/tpm-event-log';
import { parseTpm2bPublic } from '../../src/guard/attestation/tpm/tpm-public';
import { verifyQuote } from '../../src/guard/attestation/tpm/verify-quote';
import { GuardClient, helperAttestor } from '../../src/client';
import { testCard } from '../guard/helpers/get-token';
import { guardHarness } from '../guard/helpers/harness';
import { supertestTransport } from '../guard/helpers/transport';
import { createDevPki, writeDevPki } from '../../src/guard/pki/dev-pki';
import { startServer } from '../../src/server';
import { createTestContext } from '../helpers/context';
import { freePort, startSoftwareTpm, type SoftwareTpm } from '../helpers/swtpm';
import { TlsPki } from '../helpers/tls-pki';
import { entryArgs } from '../helpers/entry';

/** The gRPC attestation helper (docs/requirements.md#attestation-helper-grpc) on a real swtpm over real mutual TLS: every row of its table. */
let tpm: SoftwareTpm;
let dir: string;
let pki: TlsPki;
let server: { cert: string; key: string };
let helper: RunningHelper | undefined;
const clients: Record<string, AttestationHelperClient> = {};

async function start(o: { baselineFile?: string } = {}): Promise<RunningHelper> {
  helper = await startAttestationHelper({
    listen: '127.0.0.1:0',
    tlsCert: server.cert,
    tlsKey: server.key,
    tlsClientCa: pki.caPem,
    allowedClientCns: ['svc-client'],
    tcti: tpm.tcti,
    stateDir: path.join(dir, 'state'),
    measure: path.join(dir, 'package'),
    baselineFile: o.baselineFile,
  });
  return helper;
}

function connect(name: string, cert?: { cert: string; key: string }): AttestationHelperClient {
  clients[name]?.close();
  clients[name] = new AttestationHelperClient(helper!.address, { ca: fs.readFileSync(pki.caPem), cert: cert && fs.readFileSync(cert.cert), key: cert && fs.readFileSync(cert.key) });
  return clients[name];
}

let client: { cert: string; key: string };
let intruder: { cert: string; key: string };
let stranger: { cert: string; key: string };

beforeAll(async () => {
  tpm = await startSoftwareTpm();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'helper-'));
  fs.mkdirSync(path.join(dir, 'package'));
  fs.writeFileSync(path.join(dir, 'package', 'client.js'), 'console.log("terminus-client")\n');
  pki = new TlsPki(dir, 'helper-ca');
  server = pki.issue('localhost', { server: true });
  client = pki.issue('svc-client');
  intruder = pki.issue('intruder');
  stranger = new TlsPki(path.join(dir, 'foreign'), 'foreign-ca').issue('svc-client');
  await start();
}, 120_000);
afterAll(async () => {
  for (const c of Object.values(clients)) c.close();
  await helper?.close();
  await tpm?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const challenge = () => crypto.randomBytes(32);
async function failure(p: Promise<unknown>): Promise<HelperCallError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(HelperCallError);
  return err as HelperCallError;
}

test('OK: a quote over PCR 7 and 23 that the guard verifies, PCR values equal to the event-log replay', async () => {
  const c = connect('client', client);
  const material = await c.getRegistrationMaterial(Buffer.from(JSON.stringify({ crv: 'P-256', kty: 'EC', ...xy() })));
  const ch = challenge();
  const res = await c.getAttestation(ch, [23, 7]);
  expect(res.status).toBe('ATTESTATION_STATUS_SUCCESS');
  expect(Number(res.timestamp!.seconds)).toBeGreaterThan(Date.now() / 1000 - 60);
  const verified = verifyQuote(parseTpm2bPublic(material.ak_public, 'ak'), res.attestation_quote, res.event_log, ch);
  expect(verified.pcrs['23']).toBe(res.current_pcr_values['23'].toString('hex'));
  expect(verified.pcrs['7']).toBe(res.current_pcr_values['7'].toString('hex'));
  const events = parseEventLog(res.event_log).events.filter((e) => e.pcrIndex === 23);
  expect(events).toHaveLength(1);
  expect(events[0].data.toString()).toMatch(/^terminus-client \S+ package sha256:[0-9a-f]{64}$/);
  expect(events[0].digests.get(0x000b)!.equals(helper!.measurement)).toBe(true);
});

test('INVALID_ARGUMENT (3) with the status trailer: a 16-byte challenge, no PCRs, PCR 24, a repeated PCR', async () => {
  const c = connect('client', client);
  for (const [ch, pcrs] of [[crypto.randomBytes(16), [7]], [challenge(), []], [challenge(), [7, 24]], [challenge(), [7, 7]]] as const) {
    const err = await failure(c.getAttestation(ch, [...pcrs]));
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.status).toBe('ATTESTATION_STATUS_INVALID_REQUEST');
  }
});

test('UNAUTHENTICATED (16) without a client certificate and with one from another CA; PERMISSION_DENIED (7) for a CN not allowed', async () => {
  expect((await failure(connect('anonymous').getAttestation(challenge(), [7]))).code).toBe(grpc.status.UNAUTHENTICATED);
  expect((await failure(connect('stranger', stranger).getAttestation(challenge(), [7]))).code).toBe(grpc.status.UNAUTHENTICATED);
  expect((await failure(connect('intruder', intruder).getAttestation(challenge(), [7]))).code).toBe(grpc.status.PERMISSION_DENIED);
  expect((await failure(connect('intruder', intruder).activateCredential(Buffer.alloc(4), Buffer.alloc(4)))).code).toBe(grpc.status.PERMISSION_DENIED);
});

test('the setup service signs only a canonical P-256 JWK', async () => {
  const c = connect('client', client);
  const err = await failure(c.getRegistrationMaterial(Buffer.from('{"kty":"EC","crv":"P-256","x":"a","y":"b"}')));
  expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
  expect(err.status).toBe('ATTESTATION_STATUS_INVALID_REQUEST');
});

test('a client without TPM rights registers and logs in through the helper (GuardClient with the helper attestor)', async () => {
  const anchors = path.join(dir, 'ek-anchors.pem');
  fs.writeFileSync(anchors, tpm.ekCaPem);
  const h = await guardHarness({ env: { TPM_EK_TRUST_ANCHORS: anchors } });
  try {
    const guardClient = new GuardClient({ server: h.publicUrl, transport: supertestTransport(h.app), retries: 0, attestor: helperAttestor(connect('client', client)) });
    const tokens = await guardClient.login(testCard(h.ctx, { telematikId: '1-TPM-PRAXIS' }));
    expect(tokens.raw.svc_att_token).toEqual(expect.any(String));
    const row = await h.ctx.db.query<{ attestation_type: string; status: string }>('SELECT attestation_type, status FROM guard_client WHERE client_id = $1', [guardClient.clientId]);
    expect(row.rows[0]).toEqual({ attestation_type: 'tpm', status: 'active' });
    // A second login of the same client: a fresh quote for a fresh nonce.
    await guardClient.login(testCard(h.ctx, { telematikId: '1-TPM-PRAXIS' }));
  } finally {
    await h.close();
  }
});

test('terminus-client login --attestation tpm --helper: registration through the helper, TPM posture, svc_att_token', async () => {
  const anchors = path.join(dir, 'ek-anchors.pem');
  fs.writeFileSync(anchors, tpm.ekCaPem);
  writeDevPki(path.join(dir, 'pki'), createDevPki(), { force: true });
  const port = await freePort();
  const ctx = await createTestContext({ env: { PUBLIC_URL: `http://127.0.0.1:${port}`, GUARD_ENFORCEMENT: 'on', TPM_EK_TRUST_ANCHORS: anchors, CARD_TRUST_ANCHORS: path.join(dir, 'pki', 'card-ca.pem') } });
  const running = await startServer({ ...ctx.config, port, host: '127.0.0.1' }, ctx);
  try {
    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [...entryArgs('src/client/cli.ts'), 'login', '--server', `http://127.0.0.1:${port}`, '--card', path.join(dir, 'pki', 'card-p256.pem'), '--key', path.join(dir, 'pki', 'card-p256.key.pem'),
          '--attestation', 'tpm', '--helper', helper!.address.replace('127.0.0.1', 'localhost'), '--helper-ca', pki.caPem, '--helper-cert', client.cert, '--helper-key', client.key],
        { env: { ...process.env, NODE_OPTIONS: '', TERMINUS_CLIENT_HOME: path.join(dir, 'cli-home'), TERMINUS_CLIENT_PASSWORD: 'helper-test-passphrase' } },
        (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ attestation: 'tpm', svc_att_token: true });
    const row = await ctx.db.query<{ attestation_type: string; status: string }>('SELECT attestation_type, status FROM guard_client WHERE client_id = $1', [JSON.parse(out.stdout).client_id]);
    expect(row.rows[0]).toEqual({ attestation_type: 'tpm', status: 'active' });
  } finally {
    await running.close();
  }
});

test('restart: PCR 23 measured again, one more event in the log, and a baseline of today passes', async () => {
  const before = parseEventLog((await connect('client', client).getAttestation(challenge(), [23])).event_log).events.length;
  await helper!.close();
  const baseline = path.join(dir, 'baseline.json');
  const tools = new TpmTools(tpm.tcti);
  // The baseline is what PCR 23 will be after this start: today's value extended with the measurement.
  const now = (await tools.pcrRead([23])).get(23)!;
  const next = crypto.createHash('sha256').update(now).update(helper!.measurement).digest('hex');
  fs.writeFileSync(baseline, JSON.stringify({ '23': next }));
  await start({ baselineFile: baseline });
  const res = await connect('client', client).getAttestation(challenge(), [7, 23]);
  expect(res.status).toBe('ATTESTATION_STATUS_SUCCESS');
  const events = parseEventLog(res.event_log).events;
  expect(events.length).toBe(before + 1);
  expect(replaySha256(events, [23]).get(23)!.toString('hex')).toBe(next);
});

test('BASELINE_MISMATCH (OK) when PCR 23 changed behind the helper; UNAVAILABLE (14) when the baseline file is gone', async () => {
  await new TpmTools(tpm.tcti).pcrExtend(23, crypto.randomBytes(32));
  const res = await connect('client', client).getAttestation(challenge(), [7, 23]);
  expect(res.status).toBe('ATTESTATION_STATUS_BASELINE_MISMATCH');
  expect(res.attestation_quote.length).toBeGreaterThan(0);
  fs.rmSync(path.join(dir, 'baseline.json'));
  const err = await failure(connect('client', client).getAttestation(challenge(), [7, 23]));
  expect(err.code).toBe(grpc.status.UNAVAILABLE);
  expect(err.status).toBe('ATTESTATION_STATUS_INTERNAL_ERROR');
});

test('terminus-client attestation-helper: the bin serves the helper until SIGTERM', async () => {
  const child = spawn(process.execPath, [...entryArgs('src/client/cli.ts'), 'attestation-helper', '--listen', '127.0.0.1:0', '--tls-cert', server.cert, '--tls-key', server.key, '--tls-client-ca', pki.caPem, '--allowed-client-cn', 'svc-client', '--state-dir', path.join(dir, 'cli-state')], {
    env: { ...process.env, TPM2TOOLS_TCTI: tpm.tcti, NODE_OPTIONS: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      let err = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        if (out.includes('\n')) resolve(out.split('\n')[0]);
      });
      child.stderr.on('data', (c: Buffer) => (err += c.toString()));
      child.once('exit', (code) => reject(new Error(`exited ${code}: ${err}`)));
    });
    const { listening } = JSON.parse(line) as { listening: string };
    const c = new AttestationHelperClient(listening, { ca: fs.readFileSync(pki.caPem), cert: fs.readFileSync(client.cert), key: fs.readFileSync(client.key) });
    try {
      expect((await c.getAttestation(challenge(), [7, 23])).status).toBe('ATTESTATION_STATUS_SUCCESS');
    } finally {
      c.close();
    }
  } finally {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
  expect(child.exitCode).toBe(0);
});

test('UNAVAILABLE (14) with TPM_ERROR when the TPM is down', async () => {
  await helper!.close();
  await start();
  await tpm.stop();
  try {
    const err = await failure(connect('client', client).getAttestation(challenge(), [7, 23]));
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(err.status).toBe('ATTESTATION_STATUS_TPM_ERROR');
  } finally {
    await tpm.start();
  }
});

function xy(): { x: string; y: string } {
  const jwk = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
  return { x: jwk.x!, y: jwk.y! };
}

test('a helper addressed by IP must present a certificate for that IP (the name sent in SNI is a placeholder, the check is not)', async () => {
  const elsewhere = pki.issue('elsewhere', { server: true, san: 'DNS:elsewhere.example' });
  const impostor = tls.createServer({ cert: fs.readFileSync(elsewhere.cert), key: fs.readFileSync(elsewhere.key), ALPNProtocols: ['h2'] }, (socket) => socket.destroy());
  await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve));
  const c = new AttestationHelperClient(`127.0.0.1:${(impostor.address() as AddressInfo).port}`, { ca: fs.readFileSync(pki.caPem), cert: fs.readFileSync(client.cert), key: fs.readFileSync(client.key) });
  try {
    const err = await failure(c.getAttestation(challenge(), [7]));
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(err.message).toMatch(/127\.0\.0\.1/);
  } finally {
    c.close();
    impostor.close();
  }
});

test('a helper that speaks at most TLS 1.2 is refused in the handshake (TLS 1.3 at least, as towards the server)', async () => {
  const server = pki.issue('tls12-helper', { server: true });
  let handshakes = 0;
  const old = tls.createServer({ cert: fs.readFileSync(server.cert), key: fs.readFileSync(server.key), ALPNProtocols: ['h2'], maxVersion: 'TLSv1.2' }, (socket) => {
    handshakes++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => old.listen(0, '127.0.0.1', resolve));
  const c = new AttestationHelperClient(`127.0.0.1:${(old.address() as AddressInfo).port}`, { ca: fs.readFileSync(pki.caPem), cert: fs.readFileSync(client.cert), key: fs.readFileSync(client.key) });
  try {
    const err = await failure(c.getAttestation(challenge(), [7]));
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(handshakes).toBe(0);
  } finally {
    c.close();
    old.close();
  }
});
