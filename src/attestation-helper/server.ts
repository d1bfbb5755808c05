import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import * as grpc from '@grpc/grpc-js';
import { canonicalEcJwk } from '../common/canonical-jwk';
import type { HelperEventLog } from './measurement';
import { services, STATUS, STATUS_TRAILER, type AttestationStatus, type GetAttestationRequest, type GetAttestationResponse, type RegistrationMaterial } from './proto';
import { TpmCommandError, type TpmTools } from './tpm-tools';

/** PCRs a caller may ask for (docs/requirements.md#attestation-helper-grpc). */
export const ALLOWED_PCRS = [4, 5, 7, 10, 11, 22, 23] as const;

export interface HelperTls {
  /** PEM of the server certificate (chain) and its key. */
  cert: Buffer;
  key: Buffer;
  /** PEM of the CAs whose client certificates are trusted. */
  clientCa: Buffer;
}

export interface HelperServiceOptions {
  tpm: TpmTools;
  log: HelperEventLog;
  tls: HelperTls;
  /** Client certificate CNs that may call; empty: any trusted certificate. */
  allowedClientCns: string[];
  /** JSON file PCR index → hex value: BASELINE_MISMATCH when a quoted PCR differs. */
  baselineFile?: string;
}

/** A failure with its gRPC code and the status the trailer names. */
class HelperError extends Error {
  constructor(
    readonly grpcCode: grpc.status,
    readonly status: AttestationStatus | undefined,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The gRPC attestation helper (docs/requirements.md#attestation-helper-grpc): SvcAttestationService
 * and SvcAttestationSetupService over TLS. Client certificates are requested but not required, so the handler can tell a missing
 * or untrusted certificate (16 UNAUTHENTICATED) from a trusted one with a CN that is not allowed
 * (7 PERMISSION_DENIED).
 */
export function createHelperServer(o: HelperServiceOptions): grpc.Server {
  const server = new grpc.Server();
  const { SvcAttestationService, SvcAttestationSetupService } = services();
  server.addService(SvcAttestationService.service, {
    GetAttestation: unary(o, (req: GetAttestationRequest) => getAttestation(o, req)),
  });
  server.addService(SvcAttestationSetupService.service, {
    GetRegistrationMaterial: unary(o, (req: { client_key_jwk: Buffer }) => registrationMaterial(o, req.client_key_jwk)),
    ActivateCredential: unary(o, async (req: { credential_blob: Buffer; encrypted_secret: Buffer }) => ({
      secret: await tpmCall(() => o.tpm.activateCredential(req.credential_blob, req.encrypted_secret)),
    })),
  });
  return server;
}

/** Server credentials that ask for a client certificate without requiring one. */
export function helperCredentials(tls: HelperTls): grpc.ServerCredentials {
  const identity: grpc.experimental.CertificateProvider = staticProvider({ certificate: tls.cert, privateKey: tls.key }, undefined);
  const ca: grpc.experimental.CertificateProvider = staticProvider(undefined, { caCertificate: tls.clientCa });
  // grpc-js 1.14 takes the identity provider first, whatever its typings call the parameter.
  return grpc.experimental.createCertificateProviderServerCredentials(identity, ca, false);
}

function staticProvider(
  identity: grpc.experimental.IdentityCertificateUpdate | undefined,
  ca: grpc.experimental.CaCertificateUpdate | undefined,
): grpc.experimental.CertificateProvider {
  // grpc-js subscribes to the providers before it registers its own watcher: an update delivered
  // synchronously would be lost, so it comes on the next turn of the event loop.
  return {
    addCaCertificateListener: (l) => ca && setImmediate(() => l(ca)),
    removeCaCertificateListener: () => undefined,
    addIdentityCertificateListener: (l) => identity && setImmediate(() => l(identity)),
    removeIdentityCertificateListener: () => undefined,
  };
}

type Handler<Req, Res> = (req: Req) => Promise<Res>;

function unary<Req, Res>(o: HelperServiceOptions, handler: Handler<Req, Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    (async () => {
      callerIsAllowed(call, o.allowedClientCns);
      return handler(call.request);
    })().then(
      (res) => callback(null, res),
      (err: unknown) => {
        const e = err instanceof HelperError ? err : new HelperError(grpc.status.INTERNAL, STATUS.INTERNAL_ERROR, 'internal error');
        const metadata = new grpc.Metadata();
        if (e.status) metadata.set(STATUS_TRAILER, e.status);
        callback({ code: e.grpcCode, details: e.message, metadata });
      },
    );
  };
}

function callerIsAllowed(call: grpc.ServerUnaryCall<unknown, unknown>, allowed: string[]): void {
  const peer = call.getAuthContext().sslPeerCertificate;
  // Node marks the socket authorised only when the certificate chains to the configured CA.
  if (!peer) throw new HelperError(grpc.status.UNAUTHENTICATED, undefined, 'a client certificate from the trusted CA is required');
  const cn = peer.subject?.CN;
  if (allowed.length > 0 && (typeof cn !== 'string' || !allowed.includes(cn))) {
    throw new HelperError(grpc.status.PERMISSION_DENIED, undefined, `client certificate CN ${String(cn)} is not allowed`);
  }
}

async function tpmCall<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    if (err instanceof TpmCommandError) throw new HelperError(grpc.status.UNAVAILABLE, STATUS.TPM_ERROR, err.message);
    throw err;
  }
}

function requestIsValid(req: GetAttestationRequest): number[] {
  const invalid = (m: string) => new HelperError(grpc.status.INVALID_ARGUMENT, STATUS.INVALID_REQUEST, m);
  if (!Buffer.isBuffer(req.attestation_challenge) || req.attestation_challenge.length !== 32) throw invalid('attestation_challenge must be 32 bytes');
  const pcrs = req.pcr_indices ?? [];
  if (pcrs.length === 0) throw invalid('pcr_indices must not be empty');
  if (new Set(pcrs).size !== pcrs.length) throw invalid('pcr_indices must not repeat an index');
  const bad = pcrs.filter((p) => !(ALLOWED_PCRS as readonly number[]).includes(p));
  if (bad.length > 0) throw invalid(`pcr_indices must be among ${ALLOWED_PCRS.join(', ')}`);
  return [...pcrs].sort((a, b) => a - b);
}

async function baseline(file: string | undefined): Promise<Record<string, string> | undefined> {
  if (!file) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(await fs.readFile(file, 'utf8'));
  } catch (err) {
    throw new HelperError(grpc.status.UNAVAILABLE, STATUS.INTERNAL_ERROR, `baseline ${file} cannot be read: ${(err as Error).message}`);
  }
  const ok = typeof parsed === 'object' && parsed !== null && Object.entries(parsed).every(([k, v]) => /^\d{1,2}$/.test(k) && typeof v === 'string' && /^[0-9a-fA-F]{64}$/.test(v));
  if (!ok) throw new HelperError(grpc.status.UNAVAILABLE, STATUS.INTERNAL_ERROR, `baseline ${file} must map PCR indices to 64-digit hex values`);
  return parsed as Record<string, string>;
}

async function getAttestation(o: HelperServiceOptions, req: GetAttestationRequest): Promise<GetAttestationResponse> {
  const pcrs = requestIsValid(req);
  const expected = await baseline(o.baselineFile);
  const quote = await tpmCall(() => o.tpm.quote(pcrs, req.attestation_challenge));
  const values = await tpmCall(() => o.tpm.pcrRead(pcrs));
  const differing = expected ? pcrs.filter((i) => expected[String(i)] !== undefined && expected[String(i)].toLowerCase() !== values.get(i)!.toString('hex')) : [];
  const now = Date.now();
  return {
    attestation_quote: quote,
    current_pcr_values: Object.fromEntries([...values].map(([i, v]) => [String(i), v])),
    status: differing.length > 0 ? STATUS.BASELINE_MISMATCH : STATUS.SUCCESS,
    status_message: differing.length > 0 ? `PCR ${differing.join(', ')} differ from the baseline` : 'quote made',
    timestamp: { seconds: String(Math.floor(now / 1000)), nanos: (now % 1000) * 1_000_000 },
    event_log: o.log.bytes(),
  };
}

async function registrationMaterial(o: HelperServiceOptions, jwkBytes: Buffer): Promise<RegistrationMaterial> {
  canonicalClientJwk(jwkBytes);
  const ekPublic = await tpmCall(() => o.tpm.ekPublic());
  const ekCertificate = await tpmCall(() => o.tpm.ekCertificate());
  const akPublic = await tpmCall(() => o.tpm.ensureAk());
  const signature = await tpmCall(() => o.tpm.akSign(jwkBytes));
  return { ek_public: ekPublic, ek_certificate: ekCertificate, ak_public: akPublic, signed_hash_puk_client_sig: signature };
}

/** The AK signs only an RFC 7638 canonical EC P-256 JWK: never arbitrary data for a caller. */
function canonicalClientJwk(bytes: Buffer): void {
  let jwk: Record<string, unknown>;
  try {
    jwk = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw new HelperError(grpc.status.INVALID_ARGUMENT, STATUS.INVALID_REQUEST, 'client_key_jwk is not JSON');
  }
  const canonical = canonicalEcJwk(jwk).toString('utf8');
  const coordinate = (v: unknown) => typeof v === 'string' && /^[A-Za-z0-9_-]{43}$/.test(v);
  if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || !coordinate(jwk.x) || !coordinate(jwk.y) || canonical !== bytes.toString('utf8')) {
    throw new HelperError(grpc.status.INVALID_ARGUMENT, STATUS.INVALID_REQUEST, 'client_key_jwk must be the canonical JWK (RFC 7638) of an EC P-256 key');
  }
  try {
    crypto.createPublicKey({ key: jwk as crypto.JsonWebKey, format: 'jwk' });
  } catch {
    throw new HelperError(grpc.status.INVALID_ARGUMENT, STATUS.INVALID_REQUEST, 'client_key_jwk is not a P-256 point');
  }
}
