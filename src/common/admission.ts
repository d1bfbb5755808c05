import * as asn1js from 'asn1js';

/** Common PKI / ISIS-MTT AdmissionSyntax extension: carries the Telematik-ID and professionOID (gemSpec_PKI). */
export const ADMISSION_OID = '1.3.36.8.3.3';

export interface Admission {
  /** `registrationNumber` of the first ProfessionInfo: the Telematik-ID. */
  telematikId: string;
  /** First `professionOIDs` entry, e.g. 1.2.276.0.76.4.50 (Betriebsstätte Arzt). */
  professionOid: string;
  professionItem?: string;
}

/**
 * DER of AdmissionSyntax ::= SEQUENCE { contentsOfAdmissions SEQUENCE OF Admissions }
 * Admissions ::= SEQUENCE { professionInfos SEQUENCE OF ProfessionInfo }
 * ProfessionInfo ::= SEQUENCE { professionItems SEQUENCE OF DirectoryString,
 *   professionOIDs SEQUENCE OF OBJECT IDENTIFIER, registrationNumber PrintableString }
 */
export function encodeAdmission(a: Admission): ArrayBuffer {
  const professionInfo = new asn1js.Sequence({
    value: [
      new asn1js.Sequence({ value: [new asn1js.Utf8String({ value: a.professionItem ?? 'Betriebsstätte' })] }),
      new asn1js.Sequence({ value: [new asn1js.ObjectIdentifier({ value: a.professionOid })] }),
      new asn1js.PrintableString({ value: a.telematikId }),
    ],
  });
  const admissions = new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [professionInfo] })] });
  return new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [admissions] })] }).toBER(false);
}

/** Parses the extension value; undefined when it is not an AdmissionSyntax with a Telematik-ID and a professionOID. */
export function parseAdmission(der: ArrayBuffer | Uint8Array): Admission | undefined {
  const parsed = asn1js.fromBER(der instanceof Uint8Array ? der.slice().buffer : der);
  if (parsed.offset === -1) return undefined;
  const syntax = parsed.result;
  if (!(syntax instanceof asn1js.Sequence)) return undefined;
  // admissionAuthority (a context-tagged GeneralName) may come first.
  const contents = syntax.valueBlock.value.find((v) => v instanceof asn1js.Sequence);
  if (!(contents instanceof asn1js.Sequence)) return undefined;
  for (const admissions of contents.valueBlock.value) {
    if (!(admissions instanceof asn1js.Sequence)) continue;
    const infos = admissions.valueBlock.value.find((v) => v instanceof asn1js.Sequence);
    if (!(infos instanceof asn1js.Sequence)) continue;
    for (const info of infos.valueBlock.value) {
      if (!(info instanceof asn1js.Sequence)) continue;
      // skip the optional [0] namingAuthority
      const fields = info.valueBlock.value.filter((v) => v.idBlock.tagClass === 1);
      const items = fields[0];
      const oids = fields.find((f, i) => i > 0 && f instanceof asn1js.Sequence);
      const registration = fields.find((f) => f instanceof asn1js.PrintableString || f instanceof asn1js.Utf8String);
      const oid = oids instanceof asn1js.Sequence ? oids.valueBlock.value.find((o) => o instanceof asn1js.ObjectIdentifier) : undefined;
      const telematikId = registration ? (registration as asn1js.PrintableString).valueBlock.value : undefined;
      const professionOid = oid ? (oid as asn1js.ObjectIdentifier).valueBlock.toString() : undefined;
      const item = items instanceof asn1js.Sequence ? items.valueBlock.value[0] : undefined;
      if (telematikId && professionOid) {
        return {
          telematikId,
          professionOid,
          professionItem: item && 'valueBlock' in item ? String((item as asn1js.Utf8String).valueBlock.value) : undefined,
        };
      }
    }
  }
  return undefined;
}
