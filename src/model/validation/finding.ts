import type { OperationOutcomeIssue } from '@medplum/fhirtypes';
import { representable } from '../../server-lib/characters';

/**
 * One problem found in a resource, with the HTTP status class it belongs to. ISiK Terminplanung
 * 6.0.0 ($book `return`): syntactically broken input answers 400, semantically invalid input
 * (coding, cardinality) SOLL answer 422. The status travels with the issue so that the caller does
 * not have to guess it from the issue code.
 */
export interface Finding {
  readonly status: 400 | 422;
  readonly issue: OperationOutcomeIssue;
}

type IssueCode = OperationOutcomeIssue['code'];

function finding(
  status: 400 | 422,
  code: IssueCode,
  expression: string,
  diagnostics: string,
  severity: OperationOutcomeIssue['severity'] = 'error',
): Finding {
  // Expressions and messages may quote a client's key or value: kept representable in XML.
  return { status, issue: { severity, code, diagnostics: representable(diagnostics), expression: [representable(expression)] } };
}

/** Not well-formed FHIR: wrong JSON type, unknown element, bad primitive format (400). */
export function syntaxError(expression: string, diagnostics: string, code: IssueCode = 'structure'): Finding {
  return finding(400, code, expression, diagnostics);
}

/** Well-formed but breaking a rule: cardinality, invariant, binding, profile (422). */
export function ruleViolation(
  code: IssueCode,
  expression: string,
  diagnostics: string,
  severity: OperationOutcomeIssue['severity'] = 'error',
): Finding {
  return finding(422, code, expression, diagnostics, severity);
}

export function isError(f: Finding): boolean {
  return f.issue.severity === 'error' || f.issue.severity === 'fatal';
}
