import crypto from 'node:crypto';
import type { AppContext } from '../../context';
import { keyEncryptionFor, type KeyEncryption } from '../keys/key-encryption';
import { stateKey, type SharedState } from '../state/shared-state';
import {
  decapsulate,
  decryptFrame,
  deriveK1,
  deriveK2,
  encapsulate,
  encryptFrame,
  FRAME_HEADER_BYTES,
  FRAME_VERSION,
  MODE_REQUEST,
  MODE_RESPONSE,
  open,
  parseFrameHeader,
  seal,
  sha256,
} from '../../common/asl/asl-crypto';
import { AslError, decodeM1, decodeM3, decodeM3Inner, encodeCbor, encodeM2, encodeM4 } from '../../common/asl/asl-messages';
import type { AslServerKeys } from './asl-server-keys';
import { purgeAslSessions, reserveAslResponseNumbers, saveAslSession, takeAslHandshake, type AslSessionState } from './asl-session-store';

/** Sessions live 24 h from M3 (libasl server.rs), not sliding. */
const SESSION_TTL_SEC = 86400;
/** A client has this long between M2 and M3. */
const HANDSHAKE_TTL_SEC = 300;
/** Frame overhead: header 43, IV 12, tag 16; at least one byte of plaintext. */
const MIN_FRAME_BYTES = FRAME_HEADER_BYTES + 12 + 16 + 1;
export const CID_PREFIX = '/ASL/';
/**
 * Response frames are numbered by the store in blocks: a replica takes this many numbers with one
 * statement and counts through them itself, so IVs never repeat across replicas and most frames
 * cost no statement for it.
 */
const COUNTER_BLOCK = 256n;
/** Established sessions a replica keeps at hand (their keys opened once). */
const SESSION_CACHE_SIZE = 10_000;

interface Handshake {
  ssE: string;
  transcript: string;
  keySetId: string;
}

interface Established {
  keyId: string;
  c2s: string;
  s2c: string;
}

/** A session as a replica holds it: its keys, its expiry and the block of response numbers it took. */
interface Held {
  keyId: Buffer;
  c2s: Buffer;
  s2c: Buffer;
  expiresAt: Date;
  next: bigint;
  end: bigint;
}

/** What the enforcement point gets from a data frame: the inner request and how to seal its answer. */
export interface OpenedRequest {
  plaintext: Buffer;
  /** Encrypts the inner response as a response frame of this request. */
  sealResponse(response: Buffer): Buffer;
}

/**
 * The ASL server (gematik libasl's wire format, docs/requirements.md#additional-security-layer-asl):
 * M1 → M2 with a new connection id, M3 → M4, then data frames, as functions over bytes with no
 * HTTP in them. Handshakes and sessions are kept in the store, sealed, so any replica continues
 * them; each request counter is accepted once per session across replicas; response frames are
 * numbered by the store.
 */
export class AslServer {
  private readonly kek: KeyEncryption;
  private readonly held = new Map<string, Held>();

  constructor(
    private readonly ctx: AppContext,
    private readonly keys: AslServerKeys,
    private readonly state: SharedState,
  ) {
    this.kek = keyEncryptionFor(ctx);
  }

  /** M1 → M2 and the connection id the client continues under. */
  async handshake(m1: Buffer): Promise<{ cid: string; m2: Buffer }> {
    const client = decodeM1(m1);
    const set = await this.keys.currentSet();
    let enc;
    try {
      enc = encapsulate({ ecdh: client.ecdh, mlkem: client.mlkem });
    } catch {
      throw new AslError('decoding', 'decoding error: ECDH_PK is not a point of P-256 or ML-KEM-768_PK is not a key');
    }
    const k1 = deriveK1(enc.sharedSecret);
    const signed = encodeCbor({
      signed_pub_keys: set.signedPubKeys,
      'signature-ES256': set.signature,
      cert_hash: set.certHash,
      cdv: set.cdv,
      ocsp_response: Buffer.alloc(0),
    });
    const m2 = encodeM2(enc.ecdhCt, enc.mlkemCt, seal(k1.s2c, signed));
    const cid = `${CID_PREFIX}${crypto.randomUUID()}`;
    const handshake: Handshake = { ssE: enc.sharedSecret.toString('base64'), transcript: Buffer.concat([m1, m2]).toString('base64'), keySetId: set.id };
    await this.save(cid, 'handshaking', handshake, HANDSHAKE_TTL_SEC);
    return { cid, m2 };
  }

  /** M3 → M4: the client's keys decapsulated with the static set, both key confirmations; the session from then on. */
  async finish(cid: string, m3: Buffer): Promise<Buffer> {
    const now = this.ctx.now();
    // Single use: a second M3, or one after a failed first, starts again from M1.
    const sealed = await takeAslHandshake(this.ctx.db, cid, now);
    if (!sealed) throw new AslError('unknownCid', `unknown CID: ${cid} is no handshake in progress`);
    const h = JSON.parse(this.kek.open(sealed).toString('utf8')) as Handshake;
    const ssE = Buffer.from(h.ssE, 'base64');
    const transcript = Buffer.from(h.transcript, 'base64');
    const { aeadCt, keyConfirmation } = decodeM3(m3);
    const inner = open(deriveK1(ssE).c2s, aeadCt);
    if (!inner) throw new AslError('decryptionFailure', 'GCM returns FAIL');
    const { ecdhCt, mlkemCt } = decodeM3Inner(inner);
    const set = await this.keys.find(h.keySetId);
    if (!set) throw new AslError('internal', 'internal error: the server keys of this handshake have expired');
    let ssS: Buffer;
    try {
      ssS = decapsulate(set.privateKeys, ecdhCt, mlkemCt);
    } catch {
      throw new AslError('decryptionFailure', 'GCM returns FAIL: ECDH_ct is not a point of P-256');
    }
    const k2 = deriveK2(ssE, ssS);
    const confirmed = open(k2.c2sKeyConfirmation, keyConfirmation);
    if (!confirmed) throw new AslError('decryptionFailure', 'GCM returns FAIL');
    const clientHash = sha256(transcript, aeadCt);
    if (confirmed.length !== clientHash.length || !crypto.timingSafeEqual(confirmed, clientHash)) throw new AslError('transcript', 'transcript error');
    const m4 = encodeM4(seal(k2.s2cKeyConfirmation, sha256(transcript, m3)));
    const session: Established = { keyId: k2.keyId.toString('base64'), c2s: k2.c2sAppData.toString('base64'), s2c: k2.s2cAppData.toString('base64') };
    await this.save(cid, 'established', session, SESSION_TTL_SEC);
    return m4;
  }

  /**
   * A request frame of session `cid`: checked in libasl's order (length and version: 6,
   * environment: 4, mode: 7, KeyID: 8, tag: 3), then its request counter (once per session).
   */
  async openRequest(cid: string, frame: Buffer, tracing: boolean): Promise<OpenedRequest> {
    if (tracing && this.ctx.config.aslEnvironment === 1) throw new AslError('illegalTracing', 'illegal key tracing header');
    const now = this.ctx.now();
    const { s, encCtr } = await this.responseNumber(cid, now);
    if (frame.length < MIN_FRAME_BYTES) throw new AslError('badFormat', 'bad format: extended ciphertext');
    const header = parseFrameHeader(frame);
    if (header.version !== FRAME_VERSION) throw new AslError('badFormat', 'bad format: extended ciphertext');
    if (header.env !== this.ctx.config.aslEnvironment) throw new AslError('wrongEnvironment', 'PU/nonPU failure');
    if (header.mode !== MODE_REQUEST) throw new AslError('notRequest', 'is not a request');
    const { keyId } = s;
    if (!crypto.timingSafeEqual(header.keyId, keyId)) throw new AslError('unknownKeyId', 'unknown KeyID');
    const plaintext = decryptFrame(s.c2s, frame);
    if (!plaintext) throw new AslError('decryptionFailure', 'GCM returns FAIL');
    const fresh = await this.state.firstUse(stateKey('asl-request-counter', `${cid}|${header.requestCounter}`), s.expiresAt, now);
    if (!fresh) throw new AslError('badRequest', `bad request: request counter ${header.requestCounter} was used before in this session`);
    return {
      plaintext,
      sealResponse: (response) => encryptFrame(s.s2c, { version: FRAME_VERSION, env: this.ctx.config.aslEnvironment, mode: MODE_RESPONSE, requestCounter: header.requestCounter, keyId }, encCtr, response),
    };
  }

  /**
   * The session's keys and the number of this response frame (libasl counts every data POST,
   * failed ones too). A fresh block of numbers comes from the store when this replica has none
   * left; the session row answers only while established and unexpired.
   */
  private async responseNumber(cid: string, now: Date): Promise<{ s: Held; encCtr: bigint }> {
    let s = this.held.get(cid);
    if (s && s.expiresAt <= now) {
      this.held.delete(cid);
      s = undefined;
    }
    if (!s || s.next > s.end) {
      const row = await reserveAslResponseNumbers(this.ctx.db, cid, now, COUNTER_BLOCK);
      if (!row) {
        this.held.delete(cid);
        throw new AslError('unknownCid', `unknown CID: ${cid} is no established session (or it has expired)`);
      }
      const end = row.encCtr;
      const keys = s ?? this.opened(row.sealed);
      s = { ...keys, expiresAt: row.expiresAt, next: end - COUNTER_BLOCK + 1n, end };
      if (this.held.size >= SESSION_CACHE_SIZE) this.held.delete(this.held.keys().next().value as string);
      this.held.set(cid, s);
    }
    return { s, encCtr: s.next++ };
  }

  private opened(sealed: string): Pick<Held, 'keyId' | 'c2s' | 's2c'> {
    const e = JSON.parse(this.kek.open(sealed).toString('utf8')) as Established;
    return { keyId: Buffer.from(e.keyId, 'base64'), c2s: Buffer.from(e.c2s, 'base64'), s2c: Buffer.from(e.s2c, 'base64') };
  }

  private async save(cid: string, state: AslSessionState, value: Handshake | Established, ttlSec: number): Promise<void> {
    const now = this.ctx.now();
    // Expired sessions go on the way (1 in 100 writes), as libasl's sweep does.
    if (Math.random() < 0.01) await purgeAslSessions(this.ctx.db, now);
    await saveAslSession(this.ctx.db, cid, state, this.kek.seal(Buffer.from(JSON.stringify(value))), now, new Date(now.getTime() + ttlSec * 1000));
  }
}
