/**
 * The guard's error vocabulary: one class per wire error, each
 * carrying its HTTP status and the `error` code that goes on the wire. Handlers throw these; one
 * place (http/respond.ts) turns them into `{error, error_description, error_uri}`.
 */
export class GuardError extends Error {
  /** Extra members of the error object (for example `reasons` of a policy deny). */
  readonly extra: Record<string, unknown>;
  readonly headers: Record<string, string>;
  constructor(
    readonly code: string,
    readonly status: number,
    description: string,
    opts: { extra?: Record<string, unknown>; headers?: Record<string, string> } = {},
  ) {
    super(description);
    this.name = new.target.name;
    this.extra = opts.extra ?? {};
    this.headers = opts.headers ?? {};
  }
  get description(): string {
    return this.message;
  }
}

type WireErrorClass = new (description: string, opts?: ConstructorParameters<typeof GuardError>[3] & { status?: number }) => GuardError;

/** Builds the class for one wire error; `status` may be overridden per throw (PEP answers 401 where the AS answers 400). */
function wireError(code: string, status: number, className: string): WireErrorClass {
  const cls = class extends GuardError {
    constructor(description: string, opts: ConstructorParameters<typeof GuardError>[3] & { status?: number } = {}) {
      super(code, opts.status ?? status, description, opts);
    }
  };
  Object.defineProperty(cls, 'name', { value: className });
  return cls;
}

export const InvalidRequest = wireError('invalid_request', 400, 'InvalidRequest');
export const InvalidClient = wireError('invalid_client', 401, 'InvalidClient');
export const InvalidGrant = wireError('invalid_grant', 400, 'InvalidGrant');
export const UnauthorizedClient = wireError('unauthorized_client', 400, 'UnauthorizedClient');
export const UnsupportedGrantType = wireError('unsupported_grant_type', 400, 'UnsupportedGrantType');
export const UnsupportedResponseType = wireError('unsupported_response_type', 400, 'UnsupportedResponseType');
export const InvalidScope = wireError('invalid_scope', 400, 'InvalidScope');
export const InvalidTarget = wireError('invalid_target', 400, 'InvalidTarget');
export const InvalidDpopProof = wireError('invalid_dpop_proof', 400, 'InvalidDpopProof');
export const UseDpopNonce = wireError('use_dpop_nonce', 400, 'UseDpopNonce');
export const InvalidToken = wireError('invalid_token', 401, 'InvalidToken');
export const AccessDenied = wireError('access_denied', 403, 'AccessDenied');
export const ResourceNotFound = wireError('resource_not_found', 404, 'ResourceNotFound');
export const Conflict = wireError('conflict', 409, 'Conflict');
export const ApiVersionGone = wireError('api_version_gone', 410, 'ApiVersionGone');
export const RateLimitExceeded = wireError('rate_limit_exceeded', 429, 'RateLimitExceeded');
export const TemporarilyUnavailable = wireError('temporarily_unavailable', 503, 'TemporarilyUnavailable');
export const ServerError = wireError('server_error', 500, 'ServerError');
export const AslRequired = wireError('asl_required', 403, 'AslRequired');

export function isGuardError(err: unknown): err is GuardError {
  return err instanceof GuardError;
}

/** The registry behind `error_uri` (GET /svc/v1/errors): each code with when the guard answers it. */
export const ERROR_REGISTRY: Record<string, { status: number; meaning: string }> = {
  invalid_request: { status: 400, meaning: 'missing, repeated or malformed parameters; a statement that does not bind the client' },
  invalid_client: { status: 401, meaning: 'client authentication (private_key_jwt) failed' },
  invalid_grant: { status: 400, meaning: 'refresh token or authorization code unknown, expired, used, revoked, of another client, another DPoP key or another PKCE verifier' },
  unauthorized_client: { status: 400, meaning: 'the client is not registered for this grant type' },
  unsupported_grant_type: { status: 400, meaning: 'grant_type is not token exchange, authorization_code or refresh_token' },
  unsupported_response_type: { status: 400, meaning: 'a pushed authorization request asks for another response_type than code' },
  invalid_scope: { status: 400, meaning: 'scope is malformed or exceeds the session' },
  invalid_target: { status: 400, meaning: 'resource is not served by this authorization server' },
  invalid_dpop_proof: { status: 400, meaning: 'the DPoP proof fails a check of RFC 9449 section 4.3' },
  use_dpop_nonce: { status: 400, meaning: 'the DPoP proof needs a fresh nonce from the nonce endpoint (see DPoP-Nonce)' },
  invalid_token: { status: 401, meaning: 'the access token is not valid here' },
  asl_required: { status: 403, meaning: 'ASL_MODE is required: /fhir requests must come through the additional security layer (POST /ASL)' },
  access_denied: { status: 403, meaning: 'subject token or card rejected, or the policy denied (see reasons)' },
  resource_not_found: { status: 404, meaning: 'no such endpoint or API version' },
  conflict: { status: 409, meaning: 'the client instance key is registered already' },
  api_version_gone: { status: 410, meaning: 'this API major version has been shut down' },
  rate_limit_exceeded: { status: 429, meaning: 'too many requests; retry after Retry-After seconds' },
  temporarily_unavailable: { status: 503, meaning: 'the policy engine is unavailable (fail closed)' },
  server_error: { status: 500, meaning: 'unexpected error; the body names a correlation id' },
};
