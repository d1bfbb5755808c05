/**
 * The Konnektor did not answer, answered something other than SOAP, refused the client or the
 * card, or answered a fault (with gematik's error code when it carries one). Its own module: the
 * CLI tells it apart without loading the SOAP layer.
 */
export class KonnektorError extends Error {
  constructor(
    readonly kind: 'unreachable' | 'protocol' | 'fault' | 'refused',
    message: string,
    readonly code?: number,
  ) {
    super(message);
  }
}
