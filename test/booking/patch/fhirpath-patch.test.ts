import fs from 'node:fs';
import path from 'node:path';
import type { Parameters, Resource } from '@medplum/fhirtypes';
import { fromXml } from '../../../src/model/formats';
import { applyFhirPathPatch } from '../../../src/fhir/operations/fhirpath-patch';
import { PatchError } from '../../../src/fhir/operations/patch-error';

interface Case {
  name: string;
  input: Resource;
  diff: Parameters;
  output?: Resource;
  error?: string;
}

/** The official FHIR Patch cases (data/README.md), parsed from their XML with our converter. */
function officialCases(): Case[] {
  const xml = fs.readFileSync(path.join(__dirname, 'data/fhir-patch-tests.xml'), 'utf8');
  const inner = (body: string, tag: string) => new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`).exec(body)?.[1]?.trim();
  return [...xml.matchAll(/<case name="([^"]+)"[^>]*>([\s\S]*?)<\/case>/g)].map(([, name, body]) => {
    const output = inner(body, 'output');
    return {
      name,
      input: fromXml(inner(body, 'input')!),
      diff: fromXml(inner(body, 'diff')!) as Parameters,
      output: output ? fromXml(output) : undefined,
      error: /<error msg="([^"]*)"/.exec(body)?.[1],
    };
  });
}

const cases = officialCases();

describe('FHIRPath Patch: the official FHIR test cases', () => {
  test('all cases of the file are read', () => {
    expect(cases.length).toBe(33);
  });

  test.each(cases.filter((c) => c.output).map((c) => [c.name, c] as const))('%s', (_name, c) => {
    expect(applyFhirPathPatch(c.input, c.diff)).toEqual(c.output);
  });

  test.each(cases.filter((c) => c.error).map((c) => [c.name, c] as const))('%s is refused', (_name, c) => {
    let thrown: unknown;
    try {
      applyFhirPathPatch(c.input, c.diff);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(PatchError);
    expect((thrown as PatchError).status).toBe(422);
    expect((thrown as PatchError).code).toBe('processing');
  });
});
