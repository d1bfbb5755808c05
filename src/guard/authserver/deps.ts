import type { CardIssuers } from '../pki/card-issuers';
import type { AppContext } from '../../context';
import type { AttestationMethods } from '../attestation';
import type { Grants } from './grants';
import type { SigningKeys } from '../keys/signing-keys';
import type { OcspChecker } from '../pki/ocsp';
import type { PolicyData, PolicyEngine } from '../policy';
import type { endpoints, GuardSettings } from '../settings';
import type { SharedState } from '../state/shared-state';
import type { RevokedSessions } from '../state/revoked-sessions';
import type { AccessTokenVerifier } from './tokens/verify-access-token';
import type { RefreshFamilies } from './tokens/refresh-tokens';
import type { WorkloadIssuers } from './workload/workload-issuers';
import type { UpstreamIdps } from './code-flow/upstream-idps';
import type { ActiveClients } from './clients/client-store';
import type { Es256KeyCache } from '../jose/es256';

/** What the AS's use cases are built from; guard/index.ts composes it once per app. */
export interface GuardDeps {
  ctx: AppContext;
  settings: GuardSettings;
  urls: ReturnType<typeof endpoints>;
  keys: SigningKeys;
  policy: PolicyEngine;
  policyData: PolicyData;
  /** The CAs of institution cards (CARD_TRUST_ANCHORS, CARD_TSL or the dev PKI). */
  cardIssuers: CardIssuers;
  /** Revocation of card certificates (CARD_OCSP). */
  ocsp: OcspChecker;
  /** The attestation methods: registration, client statements and discovery read them here. */
  attestation: AttestationMethods;
  /** The grants of the token endpoint: dispatch, registration and discovery read them here. */
  grants: Grants;
  /** Nonces, replay caches and rate limits shared by the replicas. */
  state: SharedState;
  /** Which sessions are alive (revocation, refresh-token reuse); shared with the enforcement point. */
  sessions: RevokedSessions;
  /** Issuers of WORKLOAD_ISSUERS_FILE and their keys (docs/requirements.md, Workload token exchange). */
  workloadIssuers: WorkloadIssuers;
  /** Identity providers of OIDC_PROVIDERS_FILE: patients log in there (docs/requirements.md, Patients (authorization code flow)). */
  idps: UpstreamIdps;
  /** The one access-token verifier (the enforcement point uses the same class). */
  accessTokens: AccessTokenVerifier;
  /** Imported ES256 keys of DPoP proofs and client assertions, by their coordinates. */
  es256Keys: Es256KeyCache;
  /** Active clients for client authentication (client-store.ts). */
  clients: ActiveClients;
  /** Families of the refresh tokens this process issued (refresh-tokens.ts). */
  families: RefreshFamilies;
}
