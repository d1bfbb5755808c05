import { type FhirFormat, formatOfFormatParam, mimeTypesOf } from './media-types';

interface MediaRange {
  readonly type: string;
  readonly subtype: string;
  readonly q: number;
  readonly position: number;
}

interface Preference {
  readonly q: number;
  /** 2 = exact type/subtype, 1 = type/*, 0 = *\/* (RFC 9110 §12.5.1: the most specific range wins). */
  readonly specificity: number;
  readonly position: number;
}

const FORMATS: readonly FhirFormat[] = ['json', 'xml'];

/**
 * FHIR R4 http.html §3.1.0.1.7: `_format` overrides `Accept`. No preference (missing header,
 * `*\/*`) means JSON. `undefined` means nothing acceptable is offered: the caller answers 406.
 */
export function negotiateFormat(
  accept: string | undefined,
  formatParam: string | undefined,
): FhirFormat | undefined {
  if (formatParam !== undefined && formatParam.trim() !== '') {
    return formatOfFormatParam(formatParam);
  }
  if (accept === undefined || accept.trim() === '') return 'json';

  const ranges = parseAccept(accept);
  let best: { format: FhirFormat; pref: Preference } | undefined;
  for (const format of FORMATS) {
    const pref = preferenceFor(format, ranges);
    if (pref === undefined || pref.q <= 0) continue;
    if (best === undefined || isBetter(pref, best.pref)) best = { format, pref };
  }
  return best?.format;
}

function isBetter(a: Preference, b: Preference): boolean {
  if (a.q !== b.q) return a.q > b.q;
  if (a.specificity !== b.specificity) return a.specificity > b.specificity;
  // Equal in every respect (e.g. `application/*`): the earlier range, else JSON (checked first).
  return a.position < b.position;
}

/**
 * A format's standing is that of its most specifically named media type, so an explicit
 * `application/fhir+json;q=0` refuses JSON even when `*\/*` would admit `application/json`.
 */
function preferenceFor(format: FhirFormat, ranges: readonly MediaRange[]): Preference | undefined {
  let best: Preference | undefined;
  for (const mimeType of mimeTypesOf(format)) {
    const pref = preferenceForMimeType(mimeType, ranges);
    if (pref === undefined) continue;
    const better =
      best === undefined ||
      pref.specificity > best.specificity ||
      (pref.specificity === best.specificity && isBetter(pref, best));
    if (better) best = pref;
  }
  return best;
}

function preferenceForMimeType(mimeType: string, ranges: readonly MediaRange[]): Preference | undefined {
  const [type, subtype] = mimeType.split('/');
  let match: Preference | undefined;
  for (const range of ranges) {
    const specificity =
      range.type === type && range.subtype === subtype
        ? 2
        : range.type === type && range.subtype === '*'
          ? 1
          : range.type === '*' && range.subtype === '*'
            ? 0
            : -1;
    if (specificity < 0) continue;
    if (match === undefined || specificity > match.specificity) {
      match = { q: range.q, specificity, position: range.position };
    }
  }
  return match;
}

function parseAccept(accept: string): MediaRange[] {
  const ranges: MediaRange[] = [];
  accept.split(',').forEach((part, position) => {
    const [essence = '', ...params] = part.split(';');
    const [type, subtype, extra] = essence.trim().toLowerCase().split('/');
    if (!type || !subtype || extra !== undefined) return;
    let q = 1;
    for (const param of params) {
      const [name = '', value = ''] = param.split('=').map((s) => s.trim());
      if (name.toLowerCase() !== 'q') continue;
      // RFC 9110 §12.4.2 qvalue: 0..1 with at most three decimals; anything else is ignored.
      q = /^(0(\.\d{0,3})?|1(\.0{0,3})?)$/.test(value) ? Number(value) : 0;
    }
    ranges.push({ type, subtype, q, position });
  });
  return ranges;
}
