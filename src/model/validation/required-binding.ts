import type { CodeableConcept, Coding } from '@medplum/fhirtypes';
import type { TypedValue } from '../../server-lib/medplum';
import { ruleViolation, type Finding } from './finding';
import { admitsCode, admitsCoding, valueSetContent } from './value-sets';

/**
 * R4 terminologies.html#required: "To be conformant, the concept in this element SHALL be from
 * the specified value set." For a CodeableConcept at least one coding has to be from it.
 */
export function checkRequiredBinding(valueSet: string, value: TypedValue, expression: string): Finding | undefined {
  const content = valueSetContent(valueSet);
  if (!content) return undefined;
  let ok: boolean;
  let shown: string;
  switch (value.type) {
    case 'code':
    case 'string':
    case 'uri': {
      // A primitive carrying extensions (`_payload.extension`) reaches us as a String object.
      const code = value.value instanceof String ? value.value.valueOf() : value.value;
      ok = typeof code === 'string' && admitsCode(content, code);
      shown = JSON.stringify(code);
      break;
    }
    case 'Coding':
      ok = admitsCoding(content, value.value as Coding);
      shown = codingText(value.value as Coding);
      break;
    case 'CodeableConcept': {
      const codings = (value.value as CodeableConcept).coding ?? [];
      ok = codings.some((c) => admitsCoding(content, c));
      shown = codings.length ? codings.map(codingText).join(', ') : 'a CodeableConcept without coding';
      break;
    }
    default:
      return undefined;
  }
  if (ok) return undefined;
  return ruleViolation('code-invalid', expression, `${shown} is not in the required value set ${valueSet}`);
}

function codingText(c: Coding): string {
  return `${c.system ?? '(no system)'}|${c.code ?? '(no code)'}`;
}
