import crypto from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { nodeCryptoEngine } from './node-crypto-engine';

/**
 * One OCSP exchange (RFC 6960) and the checks of its answer, for whoever asks: the guard about an
 * institution card, the server about its own TLS certificate (to staple it, RFC 6066 §8), the
 * client about the answer a server stapled. The request, the response's signature and the
 * responder's authorisation go through pkijs with node:crypto signatures (brainpool included).
 */

export type OcspStatus = 'good' | 'revoked' | 'unknown';

/** A checked answer: the certificate's status, its validity window and the DER as received. */
export interface OcspAnswer {
  status: OcspStatus;
  thisUpdate: Date;
  nextUpdate?: Date;
  der: Buffer;
}

const ID_AD_OCSP = '1.3.6.1.5.5.7.48.1';
const ID_PKIX_OCSP_BASIC = '1.3.6.1.5.5.7.48.1.1';
const ID_PKIX_OCSP_NONCE = '1.3.6.1.5.5.7.48.1.2';
const FETCH_TIMEOUT_MS = 5_000;
/** thisUpdate may lie this far in the future (responder clock), nextUpdate this far in the past. */
const SKEW_MS = 300_000;

/** The OCSP responder a certificate names in its authorityInfoAccess (http or https), if any. */
export function ocspResponderOf(cert: pkijs.Certificate): string | undefined {
  const aia = cert.extensions?.find((e) => e.extnID === '1.3.6.1.5.5.7.1.1')?.parsedValue as pkijs.InfoAccess | undefined;
  const ocsp = aia?.accessDescriptions.find((d) => d.accessMethod === ID_AD_OCSP && d.accessLocation.type === 6);
  const url = ocsp?.accessLocation.value as string | undefined;
  return url && /^https?:\/\//.test(url) ? url : undefined;
}

/** One OCSP exchange: request with a nonce, POST, then the response checked step by step. */
export async function askOcsp(url: string, leaf: pkijs.Certificate, issuer: pkijs.Certificate, now: Date): Promise<OcspAnswer> {
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
  return checkOcspAnswer(Buffer.from(await res.arrayBuffer()), leaf, issuer, now, nonce);
}

/**
 * The checks of an OCSP answer about `leaf`: a successful basic response, signed by a responder
 * authorised for `issuer`, naming `leaf`, current at `now`, echoing `nonce` when it was asked with one.
 */
export async function checkOcspAnswer(der: Buffer, leaf: pkijs.Certificate, issuer: pkijs.Certificate, now: Date, nonce?: Buffer): Promise<OcspAnswer> {
  let response: pkijs.OCSPResponse;
  try {
    response = pkijs.OCSPResponse.fromBER(new Uint8Array(der));
  } catch {
    throw new Error('the answer is not an OCSP response');
  }
  const basic = basicResponseOf(response);
  await signedByAnAuthorisedResponder(basic, issuer);
  if (nonce) nonceIsEchoed(basic, nonce);
  const single = await singleResponseFor(basic, leaf, issuer);
  answerIsFresh(single, now);
  return { ...single, der };
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

async function singleResponseFor(basic: pkijs.BasicOCSPResponse, leaf: pkijs.Certificate, issuer: pkijs.Certificate): Promise<{ status: OcspStatus; thisUpdate: Date; nextUpdate?: Date }> {
  const result = await basic.getCertificateStatus(leaf, issuer);
  if (!result.isForCertificate) throw new Error('the response is not about this certificate');
  const id = await pkijs.CertID.create(leaf, { hashAlgorithm: 'SHA-1', issuerCertificate: issuer });
  const single = basic.tbsResponseData.responses.find((r) => r.certID.isEqual(id)) ?? basic.tbsResponseData.responses[0];
  const status: OcspStatus = result.status === 0 ? 'good' : result.status === 1 ? 'revoked' : 'unknown';
  return { status, thisUpdate: single.thisUpdate, nextUpdate: single.nextUpdate };
}

function answerIsFresh(single: { thisUpdate: Date; nextUpdate?: Date }, now: Date): void {
  if (single.thisUpdate.getTime() > now.getTime() + SKEW_MS) throw new Error('the answer is from the future (thisUpdate)');
  if (single.nextUpdate && single.nextUpdate.getTime() < now.getTime() - SKEW_MS) throw new Error('the answer is stale (nextUpdate passed)');
  if (!single.nextUpdate && single.thisUpdate.getTime() < now.getTime() - 3_600_000) throw new Error('the answer is older than an hour and names no nextUpdate');
}
