import type { VerifiedDpopProof } from '../../dpop/verify-dpop-proof';
import type { AuthenticatedClient } from '../client-auth/verify-client-assertion';
import type { GuardDeps } from '../deps';
import type { TokenResponse } from '../tokens/token-response';
import type { WorkloadTokenResponse } from './workload-exchange';

/**
 * The client authentication a grant needs (private_key_jwt, RFC 7523 §2.2): `fresh` reads the
 * client from the store, `cached` may take an active client this process knows (it reads only the
 * client's id, key and grant types), `none` authenticates no registered client (a workload).
 */
export type ClientAuthentication = 'fresh' | 'cached' | 'none';

/** The DPoP proof's nonce (RFC 9449 §8): `required` fresh from the nonce endpoint; `optional` checked when sent. */
export type NonceNeed = 'required' | 'optional';

/** What the token endpoint hands a grant once the proof, its nonce and the client are checked. */
export interface GrantRequest<C extends ClientAuthentication = ClientAuthentication, N extends NonceNeed = NonceNeed> {
  /** The form parameters the grant declares, and only those. */
  params: Map<string, string>;
  proof: VerifiedDpopProof;
  /** The proof's nonce, already consumed. */
  nonce: N extends 'required' ? string : string | undefined;
  auth: C extends 'none' ? undefined : AuthenticatedClient;
  ip: string;
}

/** A request at the token endpoint before any check: its form and its Authorization header. */
export interface GrantForm {
  params: Map<string, string>;
  authorization?: string | readonly string[];
}

export type TokenAnswer = TokenResponse | WorkloadTokenResponse;

/**
 * One grant of the token endpoint, whole in one entry (as node-oidc-provider's
 * `registerGrantType(name, handler, parameters)`): its `grant_type`, the form parameters it reads,
 * whether its proof needs a nonce, how its client authenticates, and its handler.
 */
export interface Grant<C extends ClientAuthentication = ClientAuthentication, N extends NonceNeed = NonceNeed> {
  type: string;
  parameters: readonly string[];
  nonce: N;
  clientAuthentication: C;
  /** Set when the entry takes only some requests of its grant type; the next entry of the type takes the rest. */
  takes?(deps: GuardDeps, form: GrantForm): boolean;
  handle(deps: GuardDeps, request: GrantRequest<C, N>): Promise<TokenAnswer>;
}

/** A grant entry, its handler typed by what it declares (a nonce it requires is a string, a client it authenticates is there). */
export function defineGrant<C extends ClientAuthentication, N extends NonceNeed>(grant: Grant<C, N>): Grant {
  return grant;
}

/** The grants of one application in the order they are tried (composed once, grants/index.ts). */
export class Grants {
  constructor(private readonly grants: readonly Grant[]) {
    for (const [i, g] of grants.entries()) {
      const shadow = grants.slice(0, i).find((earlier) => earlier.type === g.type && !earlier.takes);
      if (shadow) throw new Error(`the grant ${g.type} is registered twice: the first entry takes every request of the type`);
    }
  }

  /** The entry that takes this request; undefined: the grant type is not supported. */
  find(deps: GuardDeps, type: string, form: GrantForm): Grant | undefined {
    return this.grants.find((g) => g.type === type && (!g.takes || g.takes(deps, form)));
  }

  /** Every grant type, each once (discovery's `grant_types_supported`, the `grant_types` a client may register). */
  types(): string[] {
    return [...new Set(this.grants.map((g) => g.type))];
  }
}
