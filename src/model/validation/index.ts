import type { OperationOutcomeIssue, Resource } from '@medplum/fhirtypes';
import { ensureR4Schema } from '../../server-lib/r4-definitions';
import { validateBaseR4 } from './base-r4';
import { evaluateDifferential } from './differential';
import { isError, type Finding } from './finding';
import { checkElementShapes } from './element-shapes';
import { checkJsonRules, checkPropertyNames, checkResourceShape } from './json-syntax';
import { withComparableInstants } from './comparable-instants';
import { allProfiles, profile } from './profile-registry';
import { checkRequiredBinding } from './required-binding';
import { profilesToApply, type ProfileSelection } from './profile-selection';
import { valueSetContent } from './value-sets';

export type ValidationResult =
  | { ok: true }
  | { ok: false; status: 400 | 422; issues: OperationOutcomeIssue[] };

export interface ValidateOptions {
  /**
   * `claimed`: the ISiK profiles named in `meta.profile` that this repository knows.
   * `type-default` (default): those plus the profile the repository requires for the type
   * (Appointment → ISiKTermin, Schedule → ISiKKalender, Slot → ISiKTerminblock,
   * HealthcareService → ISiKMedizinischeBehandlungseinheit).
   */
  profiles?: ProfileSelection;
}

/**
 * Validates a write: base R4 first (structure, cardinality, primitive formats, invariants,
 * required code bindings), then the ISiK profiles. Not well-formed input (400) is reported
 * without the rule checks, which would only repeat the damage in other words; otherwise every
 * rule violation is reported (422), one issue per problem.
 */
export function validateResource(resource: unknown, opts: ValidateOptions = {}): ValidationResult {
  ensureR4Schema();
  const shape = checkResourceShape(resource);
  if (shape.length) return failed(shape);

  const original = resource as Resource;
  const names = checkPropertyNames(original as unknown as Record<string, unknown>);
  if (names.length) return failed(names);
  // Before medplum: it stores some wrong shapes and throws on others.
  const shapes = checkElementShapes(original as unknown as Record<string, unknown>);
  if (shapes.length) return failed(shapes);
  const syntax = checkJsonRules(original as unknown as Record<string, unknown>);
  const comparable = withComparableInstants(original);
  const base = validateBaseR4(comparable);
  const findings: Finding[] = [...syntax, ...base.findings];
  if (findings.some((f) => isError(f) && f.status === 400)) return failed(findings);

  for (const [valueSet, values] of Object.entries(base.boundValues)) {
    for (const value of values) {
      const f = checkRequiredBinding(valueSet, value, value.path);
      if (f) findings.push(f);
    }
  }
  for (const url of profilesToApply(original, opts.profiles ?? 'type-default')) {
    const sd = profile(url);
    if (sd) findings.push(...evaluateDifferential(sd, comparable));
  }
  return findings.some(isError) ? failed(findings) : { ok: true };
}

/** Canonicals of the profiles this repository validates (CapabilityStatement `supportedProfile`). */
export function knownProfiles(): string[] {
  return allProfiles()
    .map((sd) => sd.url)
    .sort();
}

/** An answer names at most this many issues: past that, more say nothing new and cost megabytes. */
export const MAX_ISSUES = 100;

function failed(findings: Finding[]): ValidationResult {
  const errors = findings.filter(isError);
  const status = errors.some((f) => f.status === 400) ? 400 : 422;
  const ordered = [...errors, ...findings.filter((f) => !isError(f))].map((f) => f.issue);
  if (ordered.length <= MAX_ISSUES) return { ok: false, status, issues: ordered };
  const more: OperationOutcomeIssue = { severity: 'error', code: 'too-costly', diagnostics: `${ordered.length - MAX_ISSUES} more issues not shown` };
  return { ok: false, status, issues: [...ordered.slice(0, MAX_ISSUES), more] };
}

/**
 * Loads the R4 definitions, our profiles and the R4 terminology now (about 1 s) instead of on
 * the first write; call it at start-up.
 */
export function preloadValidation(): void {
  ensureR4Schema();
  knownProfiles();
  valueSetContent('http://hl7.org/fhir/ValueSet/appointmentstatus');
}

/**
 * The JSON shape of an operation's or patch's `Parameters` body, checked before anything reads
 * it (a `valueUri` array or a `part` that is an object would otherwise reach the handler): the
 * first finding, or undefined.
 */
export function parametersShapeError(body: Record<string, unknown>): { diagnostics: string; expression?: string } | undefined {
  ensureR4Schema();
  const first = checkElementShapes(body)[0];
  return first && { diagnostics: first.issue.diagnostics ?? 'malformed Parameters', expression: first.issue.expression?.[0] };
}

export type { ProfileSelection } from './profile-selection';
export { requiredProfile } from './profile-selection';
