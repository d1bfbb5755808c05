import type { OperationOutcome, OperationOutcomeIssue } from '@medplum/fhirtypes';
import { representable } from './characters';

/**
 * The one OperationOutcome vocabulary (after Medplum's): every FHIR failure is an
 * OperationOutcomeError carrying its HTTP status and coded issues; one place turns it into a
 * response.
 */
export class OperationOutcomeError extends Error {
  constructor(
    readonly status: number,
    readonly issues: OperationOutcomeIssue[],
    readonly headers: Record<string, string> = {},
  ) {
    super(issues.map((i) => i.diagnostics ?? i.code).join('; '));
  }

  /**
   * The stable cause, for logs and metrics: the first issue's IssueType code (R4
   * valueset-issue-type: `not-found`, `conflict`, `business-rule`, ...), never its free text.
   */
  get code(): OperationOutcomeIssue['code'] {
    return this.issues[0]?.code ?? 'exception';
  }

  get outcome(): OperationOutcome {
    return outcome(this.issues);
  }
}

export function outcome(issues: OperationOutcomeIssue[]): OperationOutcome {
  return { resourceType: 'OperationOutcome', issue: issues };
}

/**
 * One coded issue. Messages often quote what the client sent (an id, a parameter): characters
 * that XML cannot carry are written as `\u0000` so the outcome can be answered in either format.
 */
export function issue(code: OperationOutcomeIssue['code'], diagnostics: string, expression?: string | string[], severity: OperationOutcomeIssue['severity'] = 'error'): OperationOutcomeIssue {
  const text = representable(diagnostics);
  const i: OperationOutcomeIssue = { severity, code, diagnostics: text, details: { text } };
  // An expression names an element: an empty one (a parameter whose name is only blanks) names
  // nothing, and is no FHIR string either (R4 datatype string: at least one character).
  const named = expression === undefined ? [] : (Array.isArray(expression) ? expression : [expression]).filter((e) => e !== '');
  if (named.length > 0) i.expression = named.map(representable);
  return i;
}

export const badRequest = (diagnostics: string, expression?: string | string[], code: OperationOutcomeIssue['code'] = 'invalid') =>
  new OperationOutcomeError(400, [issue(code, diagnostics, expression)]);
export const unprocessable = (diagnostics: string, expression?: string | string[], code: OperationOutcomeIssue['code'] = 'business-rule') =>
  new OperationOutcomeError(422, [issue(code, diagnostics, expression)]);
export const notFound = (type: string, id?: string) =>
  new OperationOutcomeError(404, [issue('not-found', id ? `${type}/${id} not found` : `${type} not found`)]);
export const gone = (type: string, id: string) => new OperationOutcomeError(410, [issue('deleted', `${type}/${id} has been deleted`)]);
export const conflict = (diagnostics: string, expression?: string | string[]) => new OperationOutcomeError(409, [issue('conflict', diagnostics, expression)]);
export const preconditionFailed = (diagnostics: string) => new OperationOutcomeError(412, [issue('conflict', diagnostics)]);
export const notSupported = (diagnostics: string, status = 400) => new OperationOutcomeError(status, [issue('not-supported', diagnostics)]);
export const forbidden = (diagnostics: string) => new OperationOutcomeError(403, [issue('forbidden', diagnostics)]);
