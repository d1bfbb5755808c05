/**
 * The reference client library (docs/requirements.md#reference-client-and-sdk): `createClient`
 * gives a session whose `fetch` signs every request; the `terminus-client` CLI and the tests are
 * built on it.
 */
export { GuardClient, GuardClientError, type Discovery, type GuardClientOptions, type TokenSet } from './guard-client';
export { SoftwareCard, createSubjectToken, type SubjectTokenOptions } from './software-card';
export { softwareClientStatement, DEFAULT_PRODUCT, type ProductInfo } from './client-statement';
export { createClientAssertion, createDpopProof, ecKeyFrom, generateEcKey, signCompactJws, type EcKey } from './crypto';
export { fetchTransport, type HttpRequest, type HttpResponse, type HttpTransport } from './transport';
export { helperAttestor, softwareAttestor, canonicalJwk, type Attestor } from './attestor';
export { createClient, ClientSession, LoggedOut, type CreateClientOptions, type HelperSettings } from './session';
export { ClientInputError, loadCard } from './pem-files';
export { Unreachable } from './unreachable';
export { bookParameters, withScheduleCodes, type BookableSlot } from './book-request';
export { KeyStore, KeyStoreError, MIN_NEW_PASSWORD_LENGTH, defaultHome, type StoreData, type ServerState } from './key-store';
export { runStress, SCENARIOS, type StressReport } from './stress';
