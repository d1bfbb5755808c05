/**
 * Request bodies through the additional security layer (docs/requirements.md, Additional security layer): an inner request's body
 * reaches the FHIR layer whole, through the enforcing guard with a real session, with ASL_MODE
 * supported and required. The inner requests are written byte by byte (Content-Length, chunked
 * transfer coding per RFC 9112 7.1, header names in any case and order per RFC 9110 5.1, multibyte
 * UTF-8 counted in bytes per RFC 9110 8.6), encrypted as data frames of a handshake done by hand;
 * the reference client's channel and GuardClient carry bodies as well.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Appointment, Bundle, Patient } from '@medplum/fhirtypes';
import request from 'supertest';
import { AslChannel, parseResponse } from '../../src/client/asl-channel';
import { createClient } from '../../src/client';
import type { HttpResponse } from '../../src/client/transport';
import { importResources } from '../../src/fhir';
import { devPkiFor, issueCard } from '../../src/guard/pki/dev-pki';
import { decapsulate, decryptFrame, deriveK1, deriveK2, encapsulate, encryptFrame, open, seal, sha256, generateHybridKeyPair } from '../../src/common/asl/asl-crypto';
import { bytesOf, decodeMap, encodeCbor, pointOf } from '../../src/common/asl/asl-messages';
import { freeSlot, parameters, proposal } from '../booking/builders';
import type { TestToken } from './helpers/get-token';
import { supertestTransport } from './helpers/transport';
import { institution, pepHarness, type PepHarness } from './pep/helpers';

const PUBLIC_URL = 'https://terminus.example';

const asBytes = (r: request.Test) =>
  r.buffer(true).parse((res, done) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => done(null, Buffer.concat(chunks)));
  });

/** The outer answer of a data frame: its status, and the inner response when it is 200. */
interface Exchange {
  status: number;
  error?: Record<string, unknown>;
  inner?: HttpResponse;
}

/** An established ASL session (M1-M4 by hand) that sends any plaintext as a request frame. */
async function tunnel(h: PepHarness): Promise<(plaintext: Buffer) => Promise<Exchange>> {
  const own = generateHybridKeyPair();
  const m1 = encodeCbor({ MessageType: 'M1', ECDH_PK: own.publicKeys.ecdh, 'ML-KEM-768_PK': Buffer.from(own.publicKeys.mlkem) });
  const first = await asBytes(request(h.app).post('/ASL').set('Content-Type', 'application/cbor').set('Accept', 'application/cbor').send(m1));
  expect(first.status).toBe(200);
  const cid = first.headers['svc-asl-cid'] as string;
  const m2 = first.body as Buffer;
  const msg2 = decodeMap(m2, 'M2');
  const ssE = decapsulate(own.privateKeys, pointOf(msg2, 'ECDH_ct'), bytesOf(msg2, 'ML-KEM-768_ct'));
  const k1 = deriveK1(ssE);
  const keys = decodeMap(bytesOf(decodeMap(open(k1.s2c, bytesOf(msg2, 'AEAD_ct'))!, 'signed'), 'signed_pub_keys'), 'keys');
  const enc = encapsulate({ ecdh: pointOf(keys, 'ECDH_PK'), mlkem: bytesOf(keys, 'ML-KEM-768_PK') });
  const k2 = deriveK2(ssE, enc.sharedSecret);
  const aeadCt = seal(k1.c2s, encodeCbor({ ECDH_ct: enc.ecdhCt, 'ML-KEM-768_ct': Buffer.from(enc.mlkemCt), ERP: false, ESO: false }));
  const m3 = encodeCbor({ MessageType: 'M3', AEAD_ct: aeadCt, AEAD_ct_key_confirmation: seal(k2.c2sKeyConfirmation, sha256(m1, m2, aeadCt)) });
  expect((await asBytes(request(h.app).post(cid).set('Content-Type', 'application/cbor').send(m3))).status).toBe(200);
  let counter = 0n;
  return async (plaintext) => {
    counter += 1n;
    const frame = encryptFrame(k2.c2sAppData, { version: 2, env: 0, mode: 1, requestCounter: counter, keyId: k2.keyId }, counter, plaintext);
    const res = await asBytes(request(h.app).post(cid).set('Content-Type', 'application/octet-stream').set('Accept', 'application/octet-stream').send(frame));
    if (res.status !== 200) return { status: res.status, error: decodeMap(res.body as Buffer, 'error') };
    return { status: 200, inner: await parseResponse(decryptFrame(k2.s2cAppData, res.body as Buffer)!) };
  };
}

/** `Authorization` and `DPoP` of a resource request (htu is PUBLIC_URL's, RFC 9449 4.3). */
async function credentials(t: TestToken, method: string, path: string): Promise<{ authorization: string; dpop: string }> {
  return { authorization: `DPoP ${t.accessToken}`, dpop: await t.makeProof(method, `${PUBLIC_URL}${path.split('?')[0]}`, t.accessToken) };
}

/** One HTTP/1.1 request as bytes: the request line, the header lines exactly as given (order and case kept), the body. */
function http11(method: string, path: string, headers: [string, string][], body: Buffer | string = Buffer.alloc(0)): Buffer {
  const head = [`${method} ${path} HTTP/1.1`, ...headers.map(([k, v]) => `${k}: ${v}`)].join('\r\n');
  return Buffer.concat([Buffer.from(`${head}\r\n\r\n`, 'latin1'), Buffer.from(body)]);
}

/** A body in the chunked transfer coding (RFC 9112 7.1): pieces of `sizes` bytes, sizes in upper-case hex, a chunk extension on the first. */
function chunked(body: Buffer, sizes: number[]): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (const [i, n] of sizes.entries()) {
    const piece = body.subarray(at, at + n);
    at += piece.length;
    if (piece.length === 0) break;
    parts.push(Buffer.from(`${piece.length.toString(16).toUpperCase()}${i === 0 ? ';note=first' : ''}\r\n`), piece, Buffer.from('\r\n'));
  }
  if (at < body.length) parts.push(Buffer.from(`${(body.length - at).toString(16)}\r\n`), body.subarray(at), Buffer.from('\r\n'));
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

/** The finding's Patient: exactly 57 bytes of JSON. */
const PATIENT_57 = '{"resourceType":"Patient","active":true,"gender":"other"}';

describe.each(['supported', 'required'] as const)('inner request bodies with ASL_MODE %s', (mode) => {
  let h: PepHarness;
  let t: TestToken;
  let send: (plaintext: Buffer) => Promise<Exchange>;

  beforeAll(async () => {
    h = await pepHarness({ env: { ASL_MODE: mode }, fixture: true });
    t = await institution(h, { telematikId: `1-ASL-BODIES-${mode.toUpperCase()}` });
    const slots = ['A', 'B', 'C', 'D'].map((s, i) => freeSlot(`Slot-Asl-Body-${s}`, `2027-03-0${i + 1}T09:00:00Z`, `2027-03-0${i + 1}T09:30:00Z`));
    await importResources(h.fhir, { resourceType: 'Bundle', type: 'collection', entry: slots.map((resource) => ({ resource })) } as Bundle);
    send = await tunnel(h);
  });
  afterAll(() => h?.close());

  /** An inner request with the session's credentials first, then `headers`; the inner response (the outer answer must be 200). */
  async function inner(method: string, path: string, headers: [string, string][], body?: Buffer | string): Promise<HttpResponse> {
    const c = await credentials(t, method, path);
    const res = await send(http11(method, path, [['Host', 'terminus.example'], ['Authorization', c.authorization], ['DPoP', c.dpop], ...headers], body));
    expect(res).toMatchObject({ status: 200 });
    return res.inner!;
  }

  const jsonHeaders = (body: Buffer | string): [string, string][] => [
    ['Content-Type', 'application/fhir+json'],
    ['Content-Length', String(Buffer.byteLength(body))],
  ];

  test('the finding: inner POST /fhir/Patient with Content-Length 57 and a JSON body is 201, its body stored', async () => {
    expect(Buffer.byteLength(PATIENT_57)).toBe(57);
    const res = await inner('POST', '/fhir/Patient', jsonHeaders(PATIENT_57), PATIENT_57);
    expect([res.status, res.text]).toEqual([201, expect.stringContaining('"resourceType":"Patient"')]);
    expect(res.json).toMatchObject({ resourceType: 'Patient', active: true, gender: 'other', id: expect.any(String) });
    const read = await inner('GET', `/fhir/Patient/${(res.json as Patient).id}`, [['Accept', 'application/fhir+json']]);
    expect(read.json).toMatchObject({ active: true, gender: 'other' });
    if (mode === 'supported') {
      // The same request plain answers the same.
      const c = await credentials(t, 'POST', '/fhir/Patient');
      const plain = await request(h.app).post('/fhir/Patient').set('Authorization', c.authorization).set('DPoP', c.dpop).set('Content-Type', 'application/fhir+json').send(PATIENT_57);
      expect(plain.status).toBe(201);
    } else {
      const c = await credentials(t, 'POST', '/fhir/Patient');
      const plain = await request(h.app).post('/fhir/Patient').set('Authorization', c.authorization).set('DPoP', c.dpop).set('Content-Type', 'application/fhir+json').send(PATIENT_57);
      expect([plain.status, plain.body.error]).toEqual([403, 'asl_required']);
    }
  });

  test('header names in any case and order, other JSON media types: every inner POST is 201', async () => {
    const body = JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Reihenfolge' }] });
    const length = String(Buffer.byteLength(body));
    const variants: { name: string; head: (c: { authorization: string; dpop: string }) => [string, string][] }[] = [
      { name: 'lower case', head: (c) => [['host', 'terminus.example'], ['authorization', c.authorization], ['dpop', c.dpop], ['content-type', 'application/fhir+json'], ['content-length', length]] },
      { name: 'upper case', head: (c) => [['HOST', 'terminus.example'], ['AUTHORIZATION', c.authorization], ['DPOP', c.dpop], ['CONTENT-TYPE', 'application/fhir+json'], ['CONTENT-LENGTH', length]] },
      { name: 'length first', head: (c) => [['Content-Length', length], ['Content-Type', 'application/json'], ['Host', 'terminus.example'], ['DPoP', c.dpop], ['Authorization', c.authorization]] },
      { name: 'type last, charset', head: (c) => [['cOnTeNt-LeNgTh', length], ['Host', 'terminus.example'], ['Accept', 'application/fhir+json'], ['Authorization', c.authorization], ['DPoP', c.dpop], ['Content-Type', 'application/fhir+json; charset=utf-8']] },
      { name: 'Expect: 100-continue', head: (c) => [['Host', 'terminus.example'], ['Expect', '100-continue'], ['Authorization', c.authorization], ['DPoP', c.dpop], ['Content-Type', 'application/fhir+json'], ['Content-Length', length]] },
      { name: 'fhirVersion parameter', head: (c) => [['Host', 'terminus.example'], ['Content-Type', 'application/fhir+json; fhirVersion=4.0'], ['Authorization', c.authorization], ['Content-Length', length], ['DPoP', c.dpop], ['Prefer', 'return=representation']] },
    ];
    for (const v of variants) {
      const res = await send(http11('POST', '/fhir/Patient', v.head(await credentials(t, 'POST', '/fhir/Patient')), body));
      expect([v.name, res.status, res.inner?.status]).toEqual([v.name, 200, 201]);
      expect(res.inner!.json).toMatchObject({ resourceType: 'Patient', name: [{ family: 'Reihenfolge' }] });
    }
  });

  test('a chunked inner body (Transfer-Encoding: chunked, any case) is read whole: 201', async () => {
    const body = Buffer.from(JSON.stringify({ resourceType: 'Patient', active: false, name: [{ family: 'Stückweise', given: ['Chunk'] }] }));
    for (const te of ['chunked', 'Chunked']) {
      const res = await inner('POST', '/fhir/Patient', [['Content-Type', 'application/fhir+json'], ['Transfer-Encoding', te]], chunked(body, [1, 16, 7]));
      expect([te, res.status]).toEqual([te, 201]);
      expect(res.json).toMatchObject({ active: false, name: [{ family: 'Stückweise', given: ['Chunk'] }] });
    }
  });

  test('multibyte UTF-8: Content-Length in bytes is 201 and stores the text unchanged; counted in characters, the frame is no request (400 code 101)', async () => {
    const name = { family: 'Müller-Lüdenscheidt', given: ['Zoë', '李', '😀'] };
    const body = JSON.stringify({ resourceType: 'Patient', name: [name] });
    expect(Buffer.byteLength(body)).toBeGreaterThan(body.length);
    const res = await inner('POST', '/fhir/Patient', jsonHeaders(body), body);
    expect(res.status).toBe(201);
    const read = await inner('GET', `/fhir/Patient/${(res.json as Patient).id}`, []);
    expect((read.json as Patient).name).toEqual([name]);
    // Characters instead of bytes: the body is cut and its rest is no second request.
    const c = await credentials(t, 'POST', '/fhir/Patient');
    const wrong = await send(http11('POST', '/fhir/Patient', [['Host', 'terminus.example'], ['Authorization', c.authorization], ['DPoP', c.dpop], ['Content-Type', 'application/fhir+json'], ['Content-Length', String(body.length)]], body));
    expect(wrong).toMatchObject({ status: 400, error: { MessageType: 'Error', ErrorCode: 101 } });
  });

  test('$book with an Appointment body and with a Parameters body, then PUT and FHIRPath PATCH of the appointment', async () => {
    const byAppointment = JSON.stringify(proposal({ slot: [{ reference: 'Slot/Slot-Asl-Body-A' }], start: '2027-03-01T09:00:00Z', end: '2027-03-01T09:30:00Z' }));
    const booked = await inner('POST', '/fhir/Appointment/$book', jsonHeaders(byAppointment), byAppointment);
    expect([booked.status, (booked.json as Appointment).status]).toEqual([201, 'booked']);
    const byParameters = JSON.stringify(parameters({ 'appt-resource': proposal({ slot: [{ reference: 'Slot/Slot-Asl-Body-B' }], start: '2027-03-02T09:00:00Z', end: '2027-03-02T09:30:00Z' }) }));
    const second = await inner('POST', '/fhir/Appointment/$book', [['content-type', 'application/fhir+json'], ['transfer-encoding', 'chunked']], chunked(Buffer.from(byParameters), [100, 100]));
    expect([second.status, (second.json as Appointment).slot]).toEqual([201, [{ reference: 'Slot/Slot-Asl-Body-B' }]]);

    const appointment = booked.json as Appointment;
    const updated = JSON.stringify({ ...appointment, comment: 'Über ASL geändert' });
    const put = await inner('PUT', `/fhir/Appointment/${appointment.id}`, jsonHeaders(updated), updated);
    expect([put.status, (put.json as Appointment).comment]).toEqual([200, 'Über ASL geändert']);

    const patch = JSON.stringify(parameters({ operation: { part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] } }));
    const patched = await inner('PATCH', `/fhir/Appointment/${appointment.id}`, jsonHeaders(patch), patch);
    expect([patched.status, (patched.json as Appointment).status, (patched.json as Appointment).comment]).toEqual([200, 'cancelled', 'Über ASL geändert']);
  });

  test('the reference client: AslChannel.send, and createClient(asl) session fetch with POST, $book, PUT and PATCH bodies', async () => {
    const channel = new AslChannel({ origin: PUBLIC_URL, transport: supertestTransport(h.app), env: 0, now: () => Math.floor(h.ctx.now().getTime() / 1000) });
    const body = JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Kanal-Größe' }] });
    const created = await channel.send({ method: 'POST', url: `${PUBLIC_URL}/fhir/Patient`, headers: { ...(await credentials(t, 'POST', '/fhir/Patient')), 'content-type': 'application/fhir+json' }, body });
    expect([created.status, (created.json as Patient).name]).toEqual([201, [{ family: 'Kanal-Größe' }]]);

    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'asl-bodies-'));
    try {
      const card = issueCard(devPkiFor(h.ctx).ca, { telematikId: `1-ASL-LIB-${mode.toUpperCase()}`, commonName: 'Praxis ASL', organizationName: 'Praxis ASL' });
      const s = await createClient({ server: PUBLIC_URL, card: card.certPem, key: card.keyPem, home, password: 'correct horse battery staple', transport: supertestTransport(h.app), asl: true, retries: 0 });
      const json = { 'content-type': 'application/fhir+json', accept: 'application/fhir+json' };
      const patient = await s.fetch(`${PUBLIC_URL}/fhir/Patient`, { method: 'POST', headers: json, body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Bibliothek' }] }) });
      expect(patient.status).toBe(201);
      const booking = parameters({ 'appt-resource': proposal({ slot: [{ reference: 'Slot/Slot-Asl-Body-C' }], start: '2027-03-03T09:00:00Z', end: '2027-03-03T09:30:00Z', participant: [{ actor: { reference: `Patient/${((await patient.json()) as Patient).id}` }, status: 'accepted' }] }) });
      const booked = await s.fetch(`${PUBLIC_URL}/fhir/Appointment/$book`, { method: 'POST', headers: json, body: JSON.stringify(booking) });
      expect(booked.status).toBe(201);
      const appointment = (await booked.json()) as Appointment;
      const put = await s.fetch(`${PUBLIC_URL}/fhir/Appointment/${appointment.id}`, { method: 'PUT', headers: json, body: JSON.stringify({ ...appointment, comment: 'Bitte früher kommen' }) });
      expect([put.status, ((await put.json()) as Appointment).comment]).toEqual([200, 'Bitte früher kommen']);
      const patch = parameters({ operation: { part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] } });
      const patched = await s.fetch(`${PUBLIC_URL}/fhir/Appointment/${appointment.id}`, { method: 'PATCH', headers: json, body: JSON.stringify(patch) });
      expect([patched.status, ((await patched.json()) as Appointment).status]).toEqual([200, 'cancelled']);
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  });
});
