import net from 'node:net';
import nodeTls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { services, STATUS_TRAILER, type GetAttestationResponse, type RegistrationMaterial } from './proto';

/** A helper call that failed: the gRPC code and the status of the trailer. */
export class HelperCallError extends Error {
  constructor(
    readonly code: grpc.status,
    readonly status: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** The client side of the attestation helper over mutual TLS. */
export class AttestationHelperClient {
  private readonly attestation: grpc.Client & Record<string, grpc.requestCallback<unknown> | unknown>;
  private readonly setup: grpc.Client & Record<string, unknown>;

  constructor(address: string, tls: { ca: Buffer; cert?: Buffer; key?: Buffer }, o: { serverName?: string } = {}) {
    const host = hostOf(address);
    // grpc-js sends the target host as TLS server name; Node 26 refuses an IP address there (RFC
    // 6066 §3). For an IP target: a placeholder name in SNI, the certificate still checked against the IP.
    const ipTarget = !o.serverName && net.isIP(host) !== 0;
    // TLS 1.3 at least, as towards the server (gemSpec_ZETA: TLS 1.3 or higher); only the helper's CA is trusted.
    const context = nodeTls.createSecureContext({ ca: tls.ca, cert: tls.cert, key: tls.key, minVersion: 'TLSv1.3' });
    const creds = grpc.credentials.createFromSecureContext(context, ipTarget ? { checkServerIdentity: (_name, cert) => nodeTls.checkServerIdentity(host, cert) } : undefined);
    const serverName = o.serverName ?? (ipTarget ? IP_TARGET_SNI : undefined);
    const options = serverName ? { 'grpc.ssl_target_name_override': serverName } : {};
    const { SvcAttestationService, SvcAttestationSetupService } = services();
    this.attestation = new SvcAttestationService(address, creds, options) as never;
    this.setup = new SvcAttestationSetupService(address, creds, options) as never;
  }

  private call<T>(client: grpc.Client & Record<string, unknown>, method: string, request: unknown): Promise<T> {
    return new Promise((resolve, reject) => {
      const fn = client[method] as (req: unknown, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: T) => void) => void;
      fn.call(client, request, { deadline: Date.now() + 60_000 }, (err, res) => {
        if (!err) return resolve(res);
        const status = err.metadata?.get(STATUS_TRAILER)[0];
        reject(new HelperCallError(err.code, typeof status === 'string' ? status : undefined, err.details || err.message));
      });
    });
  }

  getAttestation(challenge: Buffer, pcrIndices: number[]): Promise<GetAttestationResponse> {
    return this.call(this.attestation, 'GetAttestation', { attestation_challenge: challenge, pcr_indices: pcrIndices });
  }

  getRegistrationMaterial(canonicalJwk: Buffer): Promise<RegistrationMaterial> {
    return this.call(this.setup, 'GetRegistrationMaterial', { client_key_jwk: canonicalJwk });
  }

  async activateCredential(credentialBlob: Buffer, encryptedSecret: Buffer): Promise<Buffer> {
    const res = await this.call<{ secret: Buffer }>(this.setup, 'ActivateCredential', { credential_blob: credentialBlob, encrypted_secret: encryptedSecret });
    return res.secret;
  }

  close(): void {
    this.attestation.close();
    this.setup.close();
  }
}

/** The SNI name sent to a helper addressed by IP (never resolved; the certificate is checked against the IP). */
const IP_TARGET_SNI = 'attestation-helper.invalid';

/** The host of `host:port`, `[v6]:port` or a bare host. */
function hostOf(address: string): string {
  const v6 = /^\[([^\]]+)\](?::\d+)?$/.exec(address);
  if (v6) return v6[1];
  const i = address.lastIndexOf(':');
  return i > 0 && address.indexOf(':') === i ? address.slice(0, i) : address;
}
