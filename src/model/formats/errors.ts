/**
 * The wire vocabulary of this module. Each error carries the HTTP status and the
 * OperationOutcome issue code the caller puts on the wire; the message is written for
 * `OperationOutcome.issue.diagnostics` and `expression` (when known) for `issue.expression`.
 */
export abstract class FhirFormatError extends Error {
  abstract readonly status: number;
  /** http://hl7.org/fhir/issue-type */
  abstract readonly code: string;

  constructor(
    message: string,
    readonly expression?: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** Malformed XML, wrong namespace, unknown root or element, hostile constructs (DTD/entities). */
export class FhirXmlError extends FhirFormatError {
  readonly status = 400;
  readonly code = 'structure';
}

/** A JSON body that is not JSON or not a resource. */
export class FhirJsonError extends FhirFormatError {
  readonly status = 400;
  readonly code = 'structure';
}

/** A body whose bytes are not text in the one encoding FHIR uses (UTF-8). */
export class MalformedBody extends FhirFormatError {
  readonly status = 400;
  readonly code = 'structure';
}

/** A request path that cannot be decoded (broken percent-encoding): names nothing, read nothing. */
export class MalformedUrl extends FhirFormatError {
  readonly status = 400;
  readonly code = 'invalid';
}

/** A request body in a media type the server does not read. */
export class UnsupportedMediaType extends FhirFormatError {
  readonly status = 415;
  readonly code = 'not-supported';
}

/**
 * `toXml` was handed something that is not a valid R4 resource. The resources we serialize come
 * from our own store or handlers, so this is a bug on our side: deliberately not a
 * FhirFormatError, so that the error mapper answers 500 instead of blaming the client.
 */
export class XmlSerializationError extends Error {
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(`${message} (at ${path})`);
    this.name = 'XmlSerializationError';
  }
}
