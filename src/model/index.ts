/**
 * The FHIR resource model, free of HTTP and storage: profile validation (ISiK, R4 base) and the
 * JSON and XML formats. The FHIR REST layer, booking and subscription delivery all use it.
 */
export * from './validation';
export * from './formats';
