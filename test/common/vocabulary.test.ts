import fs from 'node:fs';
import path from 'node:path';
import { ATTESTATION_TYPE, TPM_ACTIVATION } from '../../src/common/attestation-types';
import { RETRY_AFTER_SECONDS } from '../../src/common/retry-after';
import * as vocabulary from '../../src/common/vocabulary';

/**
 * The wire vocabulary client and server share is written once, in src/common/: a second
 * spelling of an extension URL, a system or a profile elsewhere in src/ would let client and
 * server drift apart unnoticed.
 */
const SRC = path.join(__dirname, '../../src');
const PROTOCOL = path.join(SRC, 'common');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return full === PROTOCOL ? [] : sourceFiles(full);
    return /\.(ts|js)$/.test(e.name) ? [full] : [];
  });
}

/** The lines of a file that are code, not comments (a comment may name a value it explains). */
const codeLines = (f: string): string[] => fs.readFileSync(f, 'utf8').split('\n').filter((l) => !/^\s*(\*|\/\/|\/\*)/.test(l));

/** Where `value` stands as a whole quoted string literal in code outside src/common/. */
function quotedElsewhere(value: string): string[] {
  const quoted = ["'", '"', '`'].map((q) => `${q}${value}${q}`);
  return sourceFiles(SRC)
    .filter((f) => codeLines(f).some((l) => quoted.some((q) => l.includes(q))))
    .map((f) => path.relative(SRC, f));
}

const urls = Object.values(vocabulary).flatMap((v) => (typeof v === 'string' ? [v] : Object.values(v)));

test('the vocabulary holds the extension URLs, systems and ISiK profiles client and server both use', () => {
  expect(urls).toEqual(expect.arrayContaining([
    'http://terminus.local/fhir/StructureDefinition/booking-confirmation',
    'http://terminus.local/fhir/StructureDefinition/subscription-last-delivery',
    'http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name',
    'http://fhir.de/sid/gkv/kvid-10',
    'http://terminology.hl7.org/CodeSystem/service-type',
    'https://gematik.de/fhir/isik/StructureDefinition/ISiKKalender',
  ]));
  for (const url of urls) expect(url).toMatch(/^https?:\/\/\S+$/);
});

test.each(urls)('%s is spelled out in src/common/ only', (url) => {
  expect(quotedElsewhere(url)).toEqual([]);
});

// `software` and `tpm` are ordinary words elsewhere (the CLI's --attestation, PCR banks); the others are not.
test.each([ATTESTATION_TYPE.platformA, ATTESTATION_TYPE.platformB, ATTESTATION_TYPE.svcAttestationToken, TPM_ACTIVATION])('the attestation name %s is spelled out in src/common/ only', (name) => {
  // `svc_attestation_token` is also the name of the registration member that carries the token.
  const allowed = name === ATTESTATION_TYPE.svcAttestationToken ? ['guard/attestation/svc-token/svc-token-method.ts'] : [];
  expect(quotedElsewhere(name).filter((f) => !allowed.includes(f))).toEqual([]);
});

test('a 503 for the database gives the same Retry-After at the FHIR API and at the guard: no second literal', () => {
  expect(RETRY_AFTER_SECONDS).toEqual({ storeUnavailable: '5', storeBusy: '2' });
  const literal = /'Retry-After':\s*'[25]'/;
  expect(sourceFiles(SRC).filter((f) => codeLines(f).some((l) => literal.test(l))).map((f) => path.relative(SRC, f))).toEqual([]);
});
