import fs from 'node:fs';
import path from 'node:path';
import { CALLER_KINDS } from '../../src/guard/policy/callers';
import { embeddedPolicyEngine, loadPolicyData } from '../../src/guard/policy/embedded';
import { policyRego } from '../../src/guard/policy/rego';
import { RULES } from '../../src/guard/policy/rules';
import { CASES, inputOf, type PolicyCase } from './policy/cases';
import { policyTestRego, testName } from './policy/rego-tests';

/**
 * The policy lives once, in src/guard/policy/rules.ts: the embedded engine evaluates it and
 * policies/authz.rego is generated from it. These tests hold the two in step: the case table
 * against the embedded engine, and both Rego files equal to what the rules and the cases generate
 * (`opa test policies/` then checks OPA against the same table where an OPA binary exists).
 */
const policies = path.join(__dirname, '..', '..', 'policies');
const defaults = loadPolicyData(path.join(policies, 'default.json'));

describe('the embedded engine decides every policy case', () => {
  test.each(CASES.map((c) => [c.name, c] as const))('%s', async (_name, c: PolicyCase) => {
    const decision = await embeddedPolicyEngine({ ...defaults, ...c.data }).decide(inputOf(c));
    expect(decision).toEqual(c.expect.allow ? { allow: true, ttl: c.expect.ttl, reasons: [] } : { allow: false, reasons: c.expect.reasons });
  });
});

test('policies/authz.rego is the Rego the rules generate (npm run policy:rego)', () => {
  expect(fs.readFileSync(path.join(policies, 'authz.rego'), 'utf8')).toBe(policyRego());
});

test('policies/authz_test.rego is the Rego the policy cases generate (npm run policy:rego)', () => {
  expect(fs.readFileSync(path.join(policies, 'authz_test.rego'), 'utf8')).toBe(policyTestRego());
});

test('every rule denies in some case for every caller it applies to, so OPA is tested on it too', () => {
  const missing = RULES.flatMap((r) =>
    r.callers.filter((caller) => !CASES.some((c) => c.caller === caller && !c.expect.allow && c.expect.reasons.includes(r.reason))).map((caller) => `${r.reason} (${caller})`),
  );
  expect(missing).toEqual([]);
});

test('every caller has an allowed case, and no two cases share a Rego test name', () => {
  expect(CALLER_KINDS.filter((caller) => !CASES.some((c) => c.caller === caller && c.expect.allow))).toEqual([]);
  const names = CASES.map(testName);
  expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
});
