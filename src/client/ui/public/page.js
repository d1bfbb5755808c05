// What every view of the practice page shares: its state, building elements, and the call to the
// page's own server (same origin, cookie + anti-CSRF token), which makes it a FHIR call through
// the client's session.

/** The page's state: the session (me), the chosen zone, what was loaded, and whether a form is being filled in. */
export const state = { me: null, tz: null, calendars: null, options: null, busy: false, view: null, hash: '', onZoneChange: null };

/** Builds an element: h('button', {type: 'button', onclick}, 'text', child...). Text is never parsed as HTML. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    // Through the CSSOM: the page's Content-Security-Policy forbids inline style attributes.
    else if (k === 'style') for (const decl of v.split(';')) {
      const i = decl.indexOf(':');
      if (i > 0) el.style.setProperty(decl.slice(0, i).trim(), decl.slice(i + 1).trim());
    }
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

/**
 * A refusal: the HTTP status, the OperationOutcome (technical wording, shown under "details"),
 * and the page server's reason code with its values, which the page words in the chosen language.
 */
class ApiError extends Error {
  constructor(status, outcome, reason) {
    super((outcome?.issue ?? []).map((i) => i.diagnostics || i.details?.text || i.code).join('; ') || `HTTP ${status}`);
    this.status = status;
    this.outcome = outcome;
    this.reason = reason;
  }
}

/** A problem the page finds itself, already worded for the person. */
export class LocalProblem extends Error {
  constructor(text, field) {
    super(text);
    this.text = text;
    this.field = field;
  }
}

export async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  if (method !== 'GET') {
    headers['content-type'] = 'application/json';
    headers['x-csrf-token'] = state.me?.csrf ?? '';
  }
  let res;
  try {
    res = await fetch(`/api/${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  } catch {
    throw new ApiError(0, undefined, { code: 'page-unreachable' });
  }
  const json = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(res.status, json.outcome, json.reason);
  return json;
}

/** The chosen time zone as a query parameter (the page server's own zone needs none). */
export const zoneQuery = () => (state.tz && state.tz !== state.me?.timeZone ? `&tz=${encodeURIComponent(state.tz)}` : '');
