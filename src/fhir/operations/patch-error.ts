import type { OperationOutcomeIssue } from '@medplum/fhirtypes';

/**
 * A patch that cannot be applied. `status` follows the request's fault: 400 for a malformed
 * patch document, 422 for a patch that does not fit the resource (no or several matches, wrong
 * value type), 409 for a failed JSON Patch `test` (RFC 5789 section 2.2, conflicting state).
 */
export class PatchError extends Error {
  constructor(
    readonly status: 400 | 409 | 422,
    readonly code: OperationOutcomeIssue['code'],
    message: string,
    readonly expression?: string,
  ) {
    super(message);
  }
}

export const malformed = (message: string, expression?: string, code: OperationOutcomeIssue['code'] = 'invalid') => new PatchError(400, code, message, expression);
export const unappliable = (message: string, expression?: string, code: OperationOutcomeIssue['code'] = 'processing') => new PatchError(422, code, message, expression);
