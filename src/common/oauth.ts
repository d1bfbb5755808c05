/** OAuth 2.0 identifiers the authorization server and its clients share (RFC 8693, RFC 7523, RFC 6749). */
export const GRANT_TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const GRANT_REFRESH_TOKEN = 'refresh_token';
export const GRANT_AUTHORIZATION_CODE = 'authorization_code';
export const CLIENT_ASSERTION_TYPE_JWT = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
export const TOKEN_TYPE_JWT = 'urn:ietf:params:oauth:token-type:jwt';
export const TOKEN_TYPE_ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
export const TOKEN_TYPE_ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
/** JWS `typ` of the service attestation token (`svc_att_token`, docs/requirements.md, Hardware attestation): never an access token. */
export const SVC_ATT_TOKEN_TYP = 'svc-att+jwt';
