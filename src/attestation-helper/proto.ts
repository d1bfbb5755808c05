import fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** proto/svc_attestation.proto, found from src/ (ts) and dist/src/ (js). */
function protoFile(): string {
  let dir = __dirname;
  for (;;) {
    const candidate = path.join(dir, 'proto', 'svc_attestation.proto');
    if (fs.existsSync(candidate)) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('proto/svc_attestation.proto not found beside the package');
    dir = parent;
  }
}

/** The AttestationStatus enum by name (proto `enums: String`). */
export const STATUS = {
  SUCCESS: 'ATTESTATION_STATUS_SUCCESS',
  BASELINE_MISMATCH: 'ATTESTATION_STATUS_BASELINE_MISMATCH',
  TPM_ERROR: 'ATTESTATION_STATUS_TPM_ERROR',
  INVALID_REQUEST: 'ATTESTATION_STATUS_INVALID_REQUEST',
  INTERNAL_ERROR: 'ATTESTATION_STATUS_INTERNAL_ERROR',
} as const;
export type AttestationStatus = (typeof STATUS)[keyof typeof STATUS];

/** Trailer that names the status on a non-OK code (docs/requirements.md#attestation-helper-grpc). */
export const STATUS_TRAILER = 'svc-attestation-status';

export interface GetAttestationRequest {
  attestation_challenge: Buffer;
  pcr_indices: number[];
}

export interface GetAttestationResponse {
  attestation_quote: Buffer;
  current_pcr_values: Record<string, Buffer>;
  status: AttestationStatus;
  status_message: string;
  timestamp: { seconds: string; nanos: number } | null;
  event_log: Buffer;
}

export interface RegistrationMaterial {
  ek_public: Buffer;
  ek_certificate: Buffer;
  ak_public: Buffer;
  signed_hash_puk_client_sig: Buffer;
}

interface Services {
  SvcAttestationService: grpc.ServiceClientConstructor;
  SvcAttestationSetupService: grpc.ServiceClientConstructor;
}

let loaded: Services | undefined;

/** The two services, loaded once: snake_case fields, enum names, 64-bit integers as strings. */
export function services(): Services {
  if (!loaded) {
    const definition = protoLoader.loadSync(protoFile(), { keepCase: true, enums: String, longs: String, defaults: true, oneofs: true });
    const pkg = (grpc.loadPackageDefinition(definition) as unknown as { svc: { attestation: { service: { v1: Services } } } }).svc.attestation.service.v1;
    loaded = { SvcAttestationService: pkg.SvcAttestationService, SvcAttestationSetupService: pkg.SvcAttestationSetupService };
  }
  return loaded;
}
