/**
 * Writes policies/authz.rego from the rules of the embedded engine (src/guard/policy/rules.ts,
 * checks.ts) and policies/authz_test.rego from the policy cases (test/guard/policy/cases.ts):
 * `npm run policy:rego`. test/guard/policy-rules.test.ts fails while the files differ.
 */
import fs from 'node:fs';
import path from 'node:path';
import { policyRego } from '../src/guard/policy/rego';
import { policyTestRego } from '../test/guard/policy/rego-tests';

const dir = path.join(__dirname, '..', 'policies');
for (const [file, text] of [
  ['authz.rego', policyRego()],
  ['authz_test.rego', policyTestRego()],
] as const) {
  const target = path.join(dir, file);
  const changed = !fs.existsSync(target) || fs.readFileSync(target, 'utf8') !== text;
  if (changed) fs.writeFileSync(target, text);
  console.log(`policies/${file}: ${changed ? 'written' : 'unchanged'}`);
}
