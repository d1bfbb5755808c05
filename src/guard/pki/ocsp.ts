import crypto from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import type { Logger } from 'pino';
import { nodeCryptoEngine } from './path-validation';

export type OcspMode = 'required' | 'if-present' | 'off';

/** The card is revoked, its status is unknown under `required`, or `required` finds no responder: 403. */
export class CardRevoked extends Error {}
/** The responder could not be asked or gave no usable answer under `required`: 503. */
export class OcspUnavailable extends Error {}

const ID_AD_OCSP = '1.3.6.1.5.5.7.48.1';
const ID_PKIX_OCSP_BASIC = '1.3.6.1.5.5.7.48.1.1';
const ID_PKIX_OCSP_NONCE = '1.3.6.1.5.5.7.48.1.2';
const FETCH_TIMEOUT_MS = 5_000;
/** thisUpdate may lie this far in the future (responder clock), nextUpdate this far in the past. */
const SKEW_MS = 300_000;

type Status = 'good' | 'revoked' | 'unknown';

/**
 * Revocation of institution card certificates by OCSP (RFC 6960), CARD_OCSP: `required` (a card
 * without a responder, a responder that does not answer or an unknown status deny), `if-present`
 * (default: a card that names a responder is checked; revoked denies; no answer admits with a
 * warning) or `off`. The request, the response's signature and the responder's authorisation go
 * through pkijs; answers are cached until `nextUpdate` and at most `maxCacheSec`.
 */
export class OcspChecker {
  private readonly cache = new Map<string, { status: Status; until: number }>();
  /** The responder each (issuer, card) pair names, null for none: a certificate never changes, so it is parsed once. */
  private readonly responders = new Map<string, string | null>();

  constructor(
    readonly mode: OcspMode,
    private readonly maxCacheSec: number,
    private readonly logger: Logger,
    private readonly now: () => Date,
  ) {}

  async check(leafDer: Buffer, issuerDer: Buffer): Promise<void> {
    if (this.mode === 'off') return;
    const key = crypto.createHash('sha256').update(issuerDer).update(leafDer).digest('base64url');
    // Parsing the two certificates costs more than the rest of a token exchange's checks: only
    // the first check of a pair and a stale answer need them.
    let parsed: { leaf: pkijs.Certificate; issuer: pkijs.Certificate } | undefined;
    const parse = () => (parsed ??= { leaf: pkijs.Certificate.fromBER(new Uint8Array(leafDer)), issuer: pkijs.Certificate.fromBER(new Uint8Array(issuerDer)) });
    let url = this.responders.get(key);
    if (url === undefined) {
      url = responderOf(parse().leaf) ?? null;
      if (this.responders.size >= 10_000) this.responders.clear();
      this.responders.set(key, url);
    }
    if (!url) {
      if (this.mode === 'required') throw new CardRevoked('the card certificate names no OCSP responder (CARD_OCSP=required)');
      return;
    }
    const hit = this.cache.get(key);
    const status = hit && hit.until > this.now().getTime() ? hit.status : await this.ask(url, parse().leaf, parse().issuer, key);
    if (status === 'revoked') throw new CardRevoked('the card certificate is revoked (OCSP)');
    if (status === 'unknown') {
      if (this.mode === 'required') throw new CardRevoked('the OCSP responder does not know the card certificate');
      this.logger.warn({ responder: url }, 'OCSP: card certificate status unknown, admitted (CARD_OCSP=if-present)');
    }
  }

  private async ask(url: string, leaf: pkijs.Certificate, issuer: pkijs.Certificate, key: string): Promise<Status | 'unknown'> {
    try {
      const { status, nextUpdate } = await query(url, leaf, issuer, this.now());
      const cap = this.now().getTime() + this.maxCacheSec * 1000;
      const until = Math.min(nextUpdate?.getTime() ?? this.now().getTime(), cap);
      if (until > this.now().getTime()) {
        if (this.cache.size >= 10_000) this.cache.clear();
        this.cache.set(key, { status, until });
      }
      return status;
    } catch (err) {
      if (this.mode === 'required') throw new OcspUnavailable(`OCSP responder ${url}: ${(err as Error).message}`);
      this.logger.warn({ responder: url, err: (err as Error).message }, 'OCSP: no usable answer, card admitted (CARD_OCSP=if-present)');
      return 'good';
    }
  }
}

function responderOf(cert: pkijs.Certificate): string | undefined {
  const aia = cert.extensions?.find((e) => e.extnID === '1.3.6.1.5.5.7.1.1')?.parsedValue as pkijs.InfoAccess | undefined;
  const ocsp = aia?.accessDescriptions.find((d) => d.accessMethod === ID_AD_OCSP && d.accessLocation.type === 6);
  const url = ocsp?.accessLocation.value as string | undefined;
  return url && /^https?:\/\//.test(url) ? url : undefined;
}

/** One OCSP exchange: request with a nonce, POST, then the response checked step by step. */
async function query(url: string, leaf: pkijs.Certificate, issuer: pkijs.Certificate, now: Date): Promise<{ status: Status; nextUpdate?: Date }> {
  const request = new pkijs.OCSPRequest();
  await request.createForCertificate(leaf, { hashAlgorithm: 'SHA-1', issuerCertificate: issuer });
  const nonce = crypto.randomBytes(16);
  request.tbsRequest.requestExtensions = [
    new pkijs.Extension({ extnID: ID_PKIX_OCSP_NONCE, extnValue: new asn1js.OctetString({ valueHex: Uint8Array.from(nonce).buffer }).toBER(false) }),
  ];
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/ocsp-request', accept: 'application/ocsp-response' },
    body: Buffer.from(request.toSchema(true).toBER(false)),
    signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    redirect: 'error',
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  const body = new Uint8Array(await res.arrayBuffer());
  const response = pkijs.OCSPResponse.fromBER(body);
  const basic = basicResponseOf(response);
  await signedByAnAuthorisedResponder(basic, issuer);
  nonceIsEchoed(basic, nonce);
  const single = await singleResponseFor(basic, leaf, issuer);
  answerIsFresh(single, now);
  return { status: single.status, nextUpdate: single.nextUpdate };
}

function basicResponseOf(response: pkijs.OCSPResponse): pkijs.BasicOCSPResponse {
  const status = response.responseStatus.valueBlock.valueDec;
  if (status !== 0) throw new Error(`responder status ${status}`);
  if (!response.responseBytes || response.responseBytes.responseType !== ID_PKIX_OCSP_BASIC) throw new Error('no basic OCSP response');
  return pkijs.BasicOCSPResponse.fromBER(response.responseBytes.response.valueBlock.valueHexView);
}

async function signedByAnAuthorisedResponder(basic: pkijs.BasicOCSPResponse, issuer: pkijs.Certificate): Promise<void> {
  // pkijs checks the signature, the responder's chain to the card CA and that it may answer for it
  // (the CA itself, or a certificate it issued with id-kp-OCSPSigning, RFC 6960 §4.2.2.2).
  let ok = false;
  try {
    ok = await basic.verify({ trustedCerts: [issuer] }, nodeCryptoEngine);
  } catch (err) {
    throw new Error(`response signature: ${(err as Error).message}`);
  }
  if (!ok) throw new Error('the response is not signed by a responder authorised for the card CA');
}

function nonceIsEchoed(basic: pkijs.BasicOCSPResponse, nonce: Buffer): void {
  const ext = basic.tbsResponseData.responseExtensions?.find((e) => e.extnID === ID_PKIX_OCSP_NONCE);
  // Responders may leave the nonce out (RFC 8954) and rely on thisUpdate; a wrong one is a replay.
  if (!ext) return;
  const value = Buffer.from(ext.extnValue.valueBlock.valueHexView);
  const echoed = value.length === nonce.length ? value : Buffer.from((asn1js.fromBER(value).result as asn1js.OctetString).valueBlock.valueHexView ?? []);
  if (!echoed.equals(nonce)) throw new Error('the response carries another nonce');
}

async function singleResponseFor(basic: pkijs.BasicOCSPResponse, leaf: pkijs.Certificate, issuer: pkijs.Certificate): Promise<{ status: Status; thisUpdate: Date; nextUpdate?: Date }> {
  const result = await basic.getCertificateStatus(leaf, issuer);
  if (!result.isForCertificate) throw new Error('the response is not about the card certificate');
  const id = await pkijs.CertID.create(leaf, { hashAlgorithm: 'SHA-1', issuerCertificate: issuer });
  const single = basic.tbsResponseData.responses.find((r) => r.certID.isEqual(id)) ?? basic.tbsResponseData.responses[0];
  const status: Status = result.status === 0 ? 'good' : result.status === 1 ? 'revoked' : 'unknown';
  return { status, thisUpdate: single.thisUpdate, nextUpdate: single.nextUpdate };
}

function answerIsFresh(single: { thisUpdate: Date; nextUpdate?: Date }, now: Date): void {
  if (single.thisUpdate.getTime() > now.getTime() + SKEW_MS) throw new Error('the answer is from the future (thisUpdate)');
  if (single.nextUpdate && single.nextUpdate.getTime() < now.getTime() - SKEW_MS) throw new Error('the answer is stale (nextUpdate passed)');
  if (!single.nextUpdate && single.thisUpdate.getTime() < now.getTime() - 3_600_000) throw new Error('the answer is older than an hour and names no nextUpdate');
}
