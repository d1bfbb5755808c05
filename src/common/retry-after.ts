/**
 * `Retry-After` seconds (RFC 9110 section 10.2.3) of the 503 answers every part gives when the
 * database cannot serve a request: the FHIR API's OperationOutcome and the guard's error object
 * tell a client the same wait for the same cause.
 */
export const RETRY_AFTER_SECONDS = {
  /** The database is away: reconnecting takes a few seconds. */
  storeUnavailable: '5',
  /** Every pooled connection is busy: a burst passes in about this long. */
  storeBusy: '2',
} as const;
