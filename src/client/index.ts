/** The reference client library: the CLI and the tests are built on it. */
export { GuardClient, GuardClientError, type Discovery, type GuardClientOptions, type TokenSet } from './guard-client';
export { SoftwareCard, createSubjectToken, type SubjectTokenOptions } from './software-card';
export { softwareClientStatement, DEFAULT_PRODUCT, type ProductInfo } from './client-statement';
export { createClientAssertion, createDpopProof, ecKeyFrom, generateEcKey, signCompactJws, type EcKey } from './crypto';
export { fetchTransport, type HttpRequest, type HttpResponse, type HttpTransport } from './transport';
export { helperAttestor, softwareAttestor, canonicalJwk, type Attestor } from './attestor';
