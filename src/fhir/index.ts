/**
 * The FHIR layer: REST interactions, operations and search over the store, as an Express router
 * (`fhirRouter`) on an environment composed by app.ts (`fhirEnv`); imports; the answers the
 * enforcement point asks for (`fhirReachPort`).
 */
export { fhirEnv, fhirRouter } from './router';
export type { FhirEnv, FhirRequest, FhirResponse, Caller } from './request';
export { importResources, readResourceFile, toImportTransaction } from './import';
export { fhirReachPort } from './request-reach';
export { route } from './interactions';
export { fhirBodyText } from './body';
export { definitionOf, parseInputParameters, type Operation } from './operations';
