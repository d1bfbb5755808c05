import crypto from 'node:crypto';
import { calculateJwkThumbprint, type JWK } from 'jose';
import type { PlatformAAppId } from '../../../config';
import type { AppContext } from '../../../context';
import { attestationChallenge } from '../../../common/attestation-challenge';
import { PathValidationError, validatePath } from '../../pki/path-validation';
import type { AnchorSource } from '../../pki/anchor-source';
import type { AttestationContext, AttestationResult, ClientStatement, PostureVerifier } from '../index';
import { attestationResult, printableMembers, PRODUCT_MEMBERS, registrationFor } from '../posture-result';
import type { RegisteringClient, RegistrationProof, RegistrationVerifier } from '../registration';
import { ATTESTATION_TYPE } from '../../../common/attestation-types';
import { raiseAssertionCounter } from './platform-a-store';
import {
  AAGUID_DEVELOPMENT,
  AAGUID_PRODUCTION,
  canonicalJwk,
  certificateNonce,
  decodeAssertion,
  decodeAttestationObject,
  decodeBase64,
  parseAuthenticatorData,
  refused,
  sha256,
  uncompressedPoint,
  verifiesEs256,
} from './app-attest';

/** What a platform_a registration keeps for later assertions (`guard_client.attestation.platform_a`). */
export interface PlatformARegistration {
  app_id: string;
  kind: 'desktop' | 'phone';
  environment: 'production' | 'development';
  /** The App Attest key (SPKI DER, base64) and its JWK thumbprint. */
  key: string;
  key_jkt: string;
  /** Highest assertion counter seen; 0 after attestation. */
  counter: number;
  receipt: string;
}

/**
 * `attestation_type: "platform_a"` (Apple App Attest; docs/requirements.md, Mobile clients and e-mail codes), one named step each, each
 * failure 400 `invalid_request` with its token: the attestation object's format, the chain to
 * PLATFORM_A_TRUST_ANCHORS (RFC 5280 by pkijs), the client key's self-signature, the nonce
 * SHA-256(authData ‖ SHA-256(canonical client JWK)) in the certificate, key id = SHA-256(key),
 * an App ID of PLATFORM_A_APP_IDS, counter 0, and the exact production AAGUID unless that App ID
 * admits development keys. Desktop App IDs register (201); phones go on to the e-mail code.
 */
export function platformARegistrationVerifier(anchors: AnchorSource, appIds: readonly PlatformAAppId[]): RegistrationVerifier {
  return {
    async verify(body: Record<string, unknown>, client: RegisteringClient, ctx: AppContext): Promise<RegistrationProof> {
      const object = decodeAttestationObject(decodeBase64(body.platform_a_attestation_object, 'platform_a_attestation_object'));
      await chainIsTrusted(object.credentialCertificate, object.intermediates, await anchors(), ctx.now());
      clientKeySignedItself(body.signed_hash_puk_client_sig, client.jwk);
      const auth = parseAuthenticatorData(object.authData, true);
      if (!certificateNonce(object.credentialCertificate).equals(sha256(object.authData, sha256(canonicalJwk(client.jwk))))) {
        throw refused('attestation_nonce_mismatch', 'the certificate nonce is not SHA-256(authData ‖ SHA-256(client key)): attested for another key or data');
      }
      const key = new crypto.X509Certificate(object.credentialCertificate).publicKey;
      if (!auth.credentialId!.equals(sha256(uncompressedPoint(key)))) throw refused('key_id_mismatch', 'the credential id is not the SHA-256 of the attested key');
      await akIsTheAttestedKey(body.puk_ak_sig, key);
      const app = appIds.find((a) => sha256(Buffer.from(a.appId, 'utf8')).equals(auth.rpIdHash));
      if (!app) throw refused('app_id_not_allowed', 'the key was attested for an App ID not in PLATFORM_A_APP_IDS');
      if (auth.signCount !== 0) throw refused('counter_not_zero', 'a fresh attestation has counter 0');
      const environment = auth.aaguid!.equals(AAGUID_PRODUCTION) ? 'production' : auth.aaguid!.equals(AAGUID_DEVELOPMENT) ? 'development' : undefined;
      if (!environment) throw refused('aaguid_not_allowed', 'the AAGUID is neither App Attest production nor development');
      if (environment === 'development' && !app.development) throw refused('aaguid_not_allowed', `a development key, but ${app.appId} admits production keys only`);
      const spki = key.export({ format: 'der', type: 'spki' });
      const registration: PlatformARegistration = {
        app_id: app.appId,
        kind: app.kind,
        environment,
        key: spki.toString('base64'),
        key_jkt: await calculateJwkThumbprint(key.export({ format: 'jwk' }) as JWK),
        counter: 0,
        receipt: object.receipt.toString('base64'),
      };
      return { attestation: { platform_a: registration }, ...(app.kind === 'phone' ? { userEmail: 'required' as const } : {}) };
    },
  };
}

async function chainIsTrusted(leaf: Buffer, intermediates: Buffer[], anchors: Buffer[], at: Date): Promise<void> {
  try {
    await validatePath(leaf, intermediates, anchors, at);
  } catch (err) {
    if (err instanceof PathValidationError) throw refused('attestation_chain_untrusted', err.message);
    throw err;
  }
}

/** `signed_hash_puk_client_sig`: the client instance key's signature over SHA-256 of its canonical JWK (proof of possession). */
function clientKeySignedItself(sig: unknown, jwk: JWK): void {
  const signature = decodeBase64(sig, 'signed_hash_puk_client_sig');
  const key = crypto.createPublicKey({ key: jwk as crypto.JsonWebKey, format: 'jwk' });
  if (!verifiesEs256(key, canonicalJwk(jwk), signature)) throw refused('client_key_binding', 'signed_hash_puk_client_sig is not the client key\'s signature over its canonical JWK');
}

/** `puk_ak_sig` is optional; sent, it must be the attested key. */
async function akIsTheAttestedKey(ak: unknown, key: crypto.KeyObject): Promise<void> {
  if (ak === undefined) return;
  let given: crypto.KeyObject;
  try {
    given = crypto.createPublicKey({ key: ak as crypto.JsonWebKey, format: 'jwk' });
  } catch {
    throw refused('key_id_mismatch', 'puk_ak_sig is not a public JWK');
  }
  if (!given.equals(key)) throw refused('key_id_mismatch', 'puk_ak_sig is not the attested key');
}

/**
 * `posture_type: "platform_a"` at token exchange: an App Attest assertion by the registered key,
 * client data = the attestation challenge of this nonce, over the App ID registered, with a counter
 * above every earlier one (stored in the same statement that checks it, so a replay on another
 * replica loses too).
 */
export const platformAPostureVerifier: PostureVerifier = {
  async verify(statement: ClientStatement, actx: AttestationContext): Promise<AttestationResult> {
    const registered = registrationFor<PlatformARegistration>(actx, ATTESTATION_TYPE.platformA);
    const p = printableMembers(statement.posture, PRODUCT_MEMBERS);
    const assertion = decodeAssertion(decodeBase64(statement.posture.platform_a_assertion, 'client_statement.posture.platform_a_assertion'));
    const auth = parseAuthenticatorData(assertion.authenticatorData, false);
    if (!auth.rpIdHash.equals(sha256(Buffer.from(registered.app_id, 'utf8')))) throw refused('app_id_not_allowed', 'the assertion is for another App ID');
    const challenge = Buffer.from(attestationChallenge(actx.clientJkt, actx.nonce), 'base64url');
    const key = crypto.createPublicKey({ key: Buffer.from(registered.key, 'base64'), format: 'der', type: 'spki' });
    if (!verifiesEs256(key, sha256(assertion.authenticatorData, sha256(challenge)), assertion.signature)) {
      throw refused('assertion_signature', 'the assertion is not by the registered App Attest key over this attestation challenge');
    }
    if (!(await raiseAssertionCounter(actx.ctx.db, actx.clientId, auth.signCount))) throw refused('counter_replayed', 'the assertion counter is not above the last one seen');
    return attestationResult(statement, p, {
      postureType: ATTESTATION_TYPE.platformA,
      result: { platform_a: { app_id: registered.app_id, environment: registered.environment, counter: auth.signCount } },
      hardware: { attestationKeyJkt: registered.key_jkt },
    });
  },
};
