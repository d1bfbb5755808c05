import crypto from 'node:crypto';
import fs from 'node:fs';
import type { AppContext } from '../../context';
import { keyEncryptionFor, type KeyEncryption } from '../keys/key-encryption';
import { buildCertificate, pemCertificates } from '../pki/certificate-builder';
import { generateHybridKeyPair, type HybridKeyPair, type HybridPrivateKeys } from '../../common/asl/asl-crypto';
import { encodeCbor } from '../../common/asl/asl-messages';
import { aslCertData, aslServerKeyById, insertAslServerKey, newestAslServerKey, type AslServerKeyRow as Row } from './asl-server-key-store';

/** The SDK refuses keys that live longer than 30 days; a new set signs in well before. */
const KEY_LIFETIME_SEC = 30 * 86400;
const ROTATE_AFTER_SEC = 25 * 86400;
/** Version of the certificate data (`cdv`): the path of CertData is `<cert hash hex>-<cdv>`. */
const CDV = 1;

/** A signed set of the server's static ASL keys (libasl SignedAslKeys) with its private half. */
export interface AslServerKeySet {
  /** hex SHA-256 of `signedPubKeys`: what a handshake remembers to finish with the same keys. */
  id: string;
  /** The exact CBOR bytes of `{ECDH_PK, ML-KEM-768_PK, iat, exp, comment}` that were signed. */
  signedPubKeys: Buffer;
  /** ES256 over `signedPubKeys`, raw r‖s (64 bytes) as libasl signs. */
  signature: Buffer;
  /** SHA-256 of the signer certificate (DER). */
  certHash: Buffer;
  cdv: number;
  privateKeys: HybridPrivateKeys;
  /** CBOR CertData `{cert, ca, rca_chain}` served at `/CertData.<certHash hex>-<cdv>`. */
  certData: Buffer;
  expiresAt: Date;
}

/** The signer of the server keys: ASL_SIGNER_CERT + ASL_SIGNER_KEY, or (outside production) a generated self-signed one. */
interface Signer {
  cert: Buffer;
  ca: Buffer;
  key: crypto.KeyObject;
}

/**
 * The server's static ASL keys: ECDH P-256 and ML-KEM-768, signed by the signer certificate,
 * shared by every replica through the store (private halves sealed with GUARD_KEY_SECRET), a new
 * set after 25 days (each lives 30). Handshakes finish with the set they began with.
 */
export class AslServerKeys {
  private current?: { set: AslServerKeySet; rotateAt: number };
  private readonly byId = new Map<string, AslServerKeySet>();
  private readonly kek: KeyEncryption;
  private signer?: Signer;

  constructor(private readonly ctx: AppContext) {
    this.kek = keyEncryptionFor(ctx);
  }

  async currentSet(): Promise<AslServerKeySet> {
    const now = this.ctx.now();
    if (this.current && this.current.rotateAt > now.getTime()) return this.current.set;
    const row = (await newestAslServerKey(this.ctx.db, this.kek.id, now)) ?? (await this.generate(now));
    const set = this.fromRow(row);
    this.current = { set, rotateAt: new Date(row.rotate_at).getTime() };
    return set;
  }

  /** A set by id (a handshake that began with it), while it lives. */
  async find(id: string): Promise<AslServerKeySet | undefined> {
    const hit = this.byId.get(id);
    if (hit) return hit.expiresAt > this.ctx.now() ? hit : undefined;
    const row = await aslServerKeyById(this.ctx.db, id, this.kek.id, this.ctx.now());
    return row ? this.fromRow(row) : undefined;
  }

  /** The CertData of `/CertData.<version>`, where version is `<cert hash hex>-<cdv>` of a living set. */
  async certData(version: string): Promise<Buffer | undefined> {
    const m = /^([0-9a-f]{64})-(\d{1,9})$/.exec(version);
    if (!m) return undefined;
    return aslCertData(this.ctx.db, Buffer.from(m[1], 'hex'), Number(m[2]), this.ctx.now());
  }

  private fromRow(row: Row): AslServerKeySet {
    const cached = this.byId.get(row.id);
    if (cached) return cached;
    const priv = JSON.parse(this.kek.open(row.private_keys).toString('utf8')) as { ecdh: string; mlkem: string };
    const set: AslServerKeySet = {
      id: row.id,
      signedPubKeys: Buffer.from(row.signed_pub_keys),
      signature: Buffer.from(row.signature),
      certHash: Buffer.from(row.cert_hash),
      cdv: row.cdv,
      privateKeys: { ecdh: Buffer.from(priv.ecdh, 'base64'), mlkem: new Uint8Array(Buffer.from(priv.mlkem, 'base64')) },
      certData: Buffer.from(row.cert_data),
      expiresAt: new Date(row.expires_at),
    };
    this.byId.set(row.id, set);
    return set;
  }

  private async generate(now: Date): Promise<Row> {
    const signer = this.signerOf();
    const keys: HybridKeyPair = generateHybridKeyPair();
    const iat = Math.floor(now.getTime() / 1000);
    const signedPubKeys = encodeCbor({ ECDH_PK: keys.publicKeys.ecdh, 'ML-KEM-768_PK': Buffer.from(keys.publicKeys.mlkem), iat, exp: iat + KEY_LIFETIME_SEC, comment: 'terminus' });
    const signature = crypto.sign('sha256', signedPubKeys, { key: signer.key, dsaEncoding: 'ieee-p1363' });
    const certHash = crypto.createHash('sha256').update(signer.cert).digest();
    const row: Row = {
      id: crypto.createHash('sha256').update(signedPubKeys).digest('hex'),
      signed_pub_keys: signedPubKeys,
      signature,
      cert_hash: certHash,
      cdv: CDV,
      private_keys: this.kek.seal(Buffer.from(JSON.stringify({ ecdh: keys.privateKeys.ecdh.toString('base64'), mlkem: Buffer.from(keys.privateKeys.mlkem).toString('base64') }))),
      cert_data: encodeCbor({ cert: signer.cert, ca: signer.ca, rca_chain: [] }),
      rotate_at: new Date(now.getTime() + ROTATE_AFTER_SEC * 1000),
      expires_at: new Date((iat + KEY_LIFETIME_SEC) * 1000),
    };
    await insertAslServerKey(this.ctx.db, row, this.kek.id, now);
    return row;
  }

  private signerOf(): Signer {
    if (this.signer) return this.signer;
    const { aslSignerCert, aslSignerKey } = this.ctx.config;
    if (aslSignerCert && aslSignerKey) {
      const [cert, ca] = pemCertificates(fs.readFileSync(aslSignerCert, 'utf8'));
      this.signer = { cert, ca: ca ?? cert, key: crypto.createPrivateKey(fs.readFileSync(aslSignerKey)) };
    } else {
      // Outside production (config.ts refuses production without a signer): a self-signed P-256 certificate.
      const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const now = this.ctx.now();
      const cert = buildCertificate({
        subject: { commonName: `${new URL(this.ctx.config.publicUrl).hostname} ASL (development)`, organizationName: 'Terminus' },
        subjectPublicKey: publicKey,
        issuerKey: privateKey,
        notBefore: new Date(now.getTime() - 60_000),
        notAfter: new Date(now.getTime() + 365 * 86400_000),
      });
      this.signer = { cert, ca: cert, key: privateKey };
    }
    return this.signer;
  }
}
