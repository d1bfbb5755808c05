import fs from 'node:fs';
import path from 'node:path';
import { applyJsonPatch } from '../../../src/fhir/operations/json-patch';
import { PatchError } from '../../../src/fhir/operations/patch-error';

interface Case {
  comment: string;
  doc: unknown;
  patch: unknown[];
  expected?: unknown;
  error?: string;
}

/** The official JSON Patch cases shipped with the FHIR test cases (data/README.md). */
const cases = JSON.parse(fs.readFileSync(path.join(__dirname, 'data/json-patch-tests.json'), 'utf8')) as Case[];

describe('JSON Patch: the official test cases', () => {
  test.each(cases.filter((c) => 'expected' in c).map((c) => [c.comment, c] as const))('%s', (_name, c) => {
    expect(applyJsonPatch(c.doc, c.patch)).toEqual(c.expected);
  });

  test.each(cases.filter((c) => c.error).map((c) => [c.comment, c] as const))('%s is refused', (_name, c) => {
    expect(() => applyJsonPatch(c.doc, c.patch)).toThrow(PatchError);
  });
});
