import { ensureR4Schema } from '../../server-lib/r4-definitions';
import type { OperationOutcomeIssue, Resource } from '@medplum/fhirtypes';
import {
  isResourceType,
  OperationOutcomeError,
  validateResource as medplumValidate,
  type TypedValueWithPath,
} from '../../server-lib/medplum';
import { ruleViolation, syntaxError, type Finding } from './finding';

/** Values medplum met on elements with a required binding, keyed by value set canonical. */
export type BoundValues = Record<string, TypedValueWithPath[]>;

export interface BaseResult {
  readonly findings: Finding[];
  readonly boundValues: BoundValues;
}

/** Base R4 validation (structure, cardinality, primitive formats, invariants) by medplum. */
export function validateBaseR4(resource: Resource): BaseResult {
  ensureR4Schema();
  const boundValues: BoundValues = {};
  let issues: OperationOutcomeIssue[];
  try {
    issues = medplumValidate(resource, { collect: { tokens: boundValues } });
  } catch (err) {
    if (!(err instanceof OperationOutcomeError)) throw err;
    issues = err.outcome.issue ?? [];
  }
  return { findings: issues.flatMap(toFinding), boundValues };
}

interface IssueRule {
  readonly match: RegExp;
  readonly map: (issue: OperationOutcomeIssue, m: RegExpMatchArray) => Finding | undefined;
}

/**
 * medplum reports nearly everything as `structure`; FHIR clients expect the issue type to say what
 * went wrong (R4 valueset-issue-type) and this repository answers 400 only for what is not
 * well-formed. First matching rule wins; the fallback keeps medplum's own classification.
 */
const ISSUE_RULES: IssueRule[] = [
  {
    // medplum's text names no element; its expression does (`Slot.schedule`): a reader of the
    // message alone (an import's log) must learn which one is missing.
    match: /^Missing required property/,
    map: (i) => ruleViolation('required', expr(i), `Missing required property ${expr(i)} (minimum cardinality of the base definition)`),
  },
  {
    match: /^Invalid number of values|^Incorrect number of values/,
    map: (i) => ruleViolation('required', expr(i), text(i)),
  },
  {
    // Two value[x] forms at once cannot be read unambiguously (R4 formats.html#choice).
    match: /^Conflicting choice of type properties/,
    map: (i) => syntaxError(expr(i), text(i)),
  },
  {
    // Only relative "Type/id" references can be judged without resolving them: medplum also
    // warns on absolute URLs and urn:uuid, which are legal.
    match: /^Invalid reference: got "([^"]*)"/,
    map: (i, m) => (isResourceType(m[1]) ? ruleViolation('value', expr(i), text(i)) : undefined),
  },
];

function toFinding(issue: OperationOutcomeIssue): Finding[] {
  const message = text(issue);
  for (const rule of ISSUE_RULES) {
    const m = message.match(rule.match);
    if (m) {
      const f = rule.map(issue, m);
      return f ? [f] : [];
    }
  }
  if (issue.severity !== 'error' && issue.severity !== 'fatal') return [];
  if (issue.code === 'invariant') return [ruleViolation('invariant', expr(issue), invariantText(issue))];
  if (issue.code === 'processing') return [ruleViolation('invariant', expr(issue), message)];
  return [syntaxError(expr(issue), message, 'structure')];
}

function text(issue: OperationOutcomeIssue): string {
  return issue.details?.text ?? issue.diagnostics ?? 'invalid';
}

function expr(issue: OperationOutcomeIssue): string {
  return issue.expression?.[0] ?? '$this';
}

function invariantText(issue: OperationOutcomeIssue): string {
  try {
    const { fhirpath } = JSON.parse(issue.diagnostics ?? '{}') as { fhirpath?: string };
    return fhirpath ? `${text(issue)} (${fhirpath})` : text(issue);
  } catch {
    return text(issue);
  }
}
