// The practice page: plain ES modules, no build step. Every call goes to the page's own server
// (same origin, cookie + anti-CSRF token), which makes it a FHIR call through the client's session.
import { has, language, setLanguage, statusLabel, t } from './i18n.js';

const state = { me: null, tz: null, calendars: null, options: null, busy: false, view: null, hash: '', onZoneChange: null };

/** Builds an element: h('button', {type: 'button', onclick}, 'text', child...). Text is never parsed as HTML. */
function h(tag, attrs = {}, ...children) {
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
class LocalProblem extends Error {
  constructor(text, field) {
    super(text);
    this.text = text;
    this.field = field;
  }
}

async function api(method, path, body) {
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
const zoneQuery = () => (state.tz && state.tz !== state.me?.timeZone ? `&tz=${encodeURIComponent(state.tz)}` : '');

// ---------- formatting (in the practice's time zone) ----------

const locale = () => (language() === 'de' ? 'de-DE' : 'en-GB');
const tz = () => state.tz ?? state.me?.timeZone;
const fmt = (iso, opts) => (iso ? new Intl.DateTimeFormat(locale(), { timeZone: tz(), ...opts }).format(new Date(iso)) : '');
const when = (iso) => fmt(iso, { weekday: 'short', day: '2-digit', month: '2-digit', year: 'numeric', hour: '2-digit', minute: '2-digit' });
const clock = (iso) => fmt(iso, { hour: '2-digit', minute: '2-digit' });
const dayLabel = (date) => new Intl.DateTimeFormat(locale(), { timeZone: 'UTC', weekday: 'short', day: '2-digit', month: '2-digit' }).format(new Date(`${date}T00:00:00Z`));
const longDay = (date) => new Intl.DateTimeFormat(locale(), { timeZone: 'UTC', weekday: 'long', day: 'numeric', month: 'long', year: 'numeric' }).format(new Date(`${date}T00:00:00Z`));
const today = () => new Intl.DateTimeFormat('en-CA', { timeZone: tz() }).format(new Date());
const addDays = (date, n) => new Date(Date.parse(`${date}T00:00:00Z`) + n * 86_400_000).toISOString().slice(0, 10);
const minutes = (hm) => Number(hm.slice(0, 2)) * 60 + Number(hm.slice(3, 5));

/** A participant's or calendar owner's resource type, named for people ("Practitioner" → "Behandler/in"). */
const roleLabel = (type) => (has(`role.${type}`) ? t(`role.${type}`) : type);
/** Appointment.participant.status (FHIR ParticipationStatus). */
const participationLabel = (code) => (has(`participation.${code}`) ? t(`participation.${code}`) : code);

function badge(code) {
  return h('span', { class: `badge s-${code}` }, statusLabel(code));
}

// ---------- messages ----------

function flash(text) {
  const el = document.getElementById('flash');
  el.replaceChildren(h('p', { class: 'ok' }, text));
}

/** The form fields a refusal can name, as the form labels them. */
const FIELDS = { name: 'new.name', actor: 'new.actor', serviceType: 'new.serviceType', specialty: 'new.specialty', slotMinutes: 'new.slotMinutes', from: 'new.from', to: 'new.to', hours: 'new.hours', date: 'week.jump', tz: 'tz.label' };
const fieldLabel = (field) => {
  const day = /^hours\.([1-7])$/.exec(field ?? '');
  if (day) return `${t('new.hours')}, ${t(`day.${day[1]}`)}`;
  return FIELDS[field] ? t(FIELDS[field]) : null;
};

/** What went wrong, in the page's language, times in the chosen zone. */
function problemText(err) {
  if (err instanceof LocalProblem) return err.text;
  const r = err.reason ?? {};
  switch (r.code) {
    case 'calendar-overlap':
      return (
        t('err.calendar-overlap', { start: when(r.start), end: clock(r.end), calendar: r.calendar || '—', existing: `${when(r.existingStart)}–${clock(r.existingEnd)}` }) +
        (r.more ? t(r.atLeast ? 'err.calendar-overlap.atLeast' : 'err.calendar-overlap.more', { more: r.more }) : '')
      );
    case 'appointment-changed':
      return t('err.appointment-changed', { status: statusLabel(r.status) });
    case 'appointment-status':
      return t(`err.appointment-status.${r.action}`, { status: statusLabel(r.status) });
    case 'unreachable':
      return t('err.unreachable', { server: r.server, cause: has(`cause.${r.cause}`) ? t(`cause.${r.cause}`) : t('cause.other', { code: r.cause }) });
    case 'form-field':
      return fieldLabel(r.field) ? t('err.form-field', { field: fieldLabel(r.field) }) : t('err.status.400');
    default:
      if (r.code && has(`err.${r.code}`)) return t(`err.${r.code}`, r);
  }
  const s = err.status;
  if (has(`err.status.${s}`)) return t(`err.status.${s}`);
  return t(s >= 500 ? 'err.status.5xx' : 'err.status.other', { status: s });
}

function errorBox(err) {
  const issues = err instanceof LocalProblem ? [] : (err.outcome?.issue ?? []).map((i) => i.diagnostics || i.details?.text || i.code).filter(Boolean);
  // The repository's own wording and the status stay available for support, folded away.
  const technical = err.status || issues.length ? h('details', { class: 'technical' }, h('summary', {}, t('error.details')), h('ul', {}, err.status ? h('li', {}, `HTTP ${err.status}`) : '', issues.map((d) => h('li', { lang: 'en' }, d)))) : '';
  return h('div', { class: 'error', role: 'alert' }, h('strong', {}, t('error.title')), h('p', {}, problemText(err)), technical);
}

function showError(container, err) {
  container.querySelector(':scope > .error')?.remove();
  container.prepend(errorBox(err));
}

// ---------- routing ----------

function route() {
  const [path, query = ''] = location.hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(query);
  const parts = path.split('/').filter(Boolean);
  return { view: parts[0] || 'week', id: parts[1], params };
}

let renders = 0;

/** Moves the keyboard focus to the current view's content (the skip link's target). */
function focusMain() {
  const main = document.getElementById('main');
  main.focus();
  main.scrollIntoView();
}

async function render() {
  // Only the newest render may fill the page: an older one finishing late would show the wrong view.
  const mine = ++renders;
  const r = route();
  state.view = r.view;
  state.hash = location.hash;
  state.onZoneChange = null;
  for (const a of document.querySelectorAll('#nav a')) {
    a.textContent = t(`nav.${a.dataset.view}`);
    if (a.dataset.view === r.view) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const main = document.getElementById('main');
  main.replaceChildren(h('p', { class: 'loading' }, t('loading')));
  try {
    const views = { week: weekView, pending: pendingView, appointment: detailView, 'new-calendar': newCalendarView, subscriptions: subscriptionsView };
    const content = await (views[r.view] ?? weekView)(r);
    if (mine === renders) main.replaceChildren(content);
  } catch (err) {
    if (mine === renders) main.replaceChildren(errorBox(err));
  }
}

/** A re-render that keeps the page as it is while someone is filling in a form. */
function refresh() {
  if (!state.busy && (state.view === 'week' || state.view === 'pending' || state.view === 'subscriptions')) render();
}

// ---------- week ----------

async function weekView(r) {
  state.calendars = await api('GET', 'calendars');
  if (!state.calendars.length) return h('section', {}, h('h1', {}, t('week.title')), h('p', {}, t('week.noCalendars')));
  const remembered = localStorage.getItem('terminus.calendar');
  const calendarId = r.params.get('calendar') || (state.calendars.some((c) => c.id === remembered) ? remembered : state.calendars[0].id);
  // Without a date the page server opens the week of the calendar's next slot.
  const asked = r.params.get('date');
  const week = await api('GET', `week?calendar=${encodeURIComponent(calendarId)}${asked ? `&date=${encodeURIComponent(asked)}` : ''}${zoneQuery()}`);
  const date = week.date;
  localStorage.setItem('terminus.calendar', week.calendar.id);
  const go = (d, c = week.calendar.id) => {
    location.hash = `#/week?calendar=${encodeURIComponent(c)}&date=${d}`;
  };

  const select = h('select', { id: 'calendar', onchange: (e) => go(week.start, e.target.value) }, state.calendars.map((c) => h('option', { value: c.id, selected: c.id === week.calendar.id }, c.name)));
  const jump = h('input', { id: 'jump', type: 'date', value: date, onchange: (e) => e.target.value && go(e.target.value) });
  const toolbar = h(
    'div',
    { class: 'toolbar' },
    h('label', { for: 'calendar' }, t('week.calendar')),
    select,
    h('button', { type: 'button', onclick: () => go(addDays(week.start, -7)) }, t('week.previous')),
    h('button', { type: 'button', onclick: () => go(today()) }, t('week.today')),
    h('button', { type: 'button', onclick: () => go(addDays(week.start, 7)) }, t('week.next')),
    h('label', { for: 'jump' }, t('week.jump')),
    jump,
  );

  const counts = { free: 0, booked: 0, pending: 0, cancelled: 0 };
  for (const s of week.slots) {
    const active = s.appointments.find((a) => a.status !== 'cancelled');
    if (active) counts[active.status === 'pending' ? 'pending' : 'booked']++;
    else if (s.status === 'free') counts.free++;
    counts.cancelled += s.appointments.filter((a) => a.status === 'cancelled').length;
  }
  const heading = h('h1', {}, `${week.calendar.name}`);
  const sub = h(
    'p',
    { class: 'sub' },
    `${longDay(week.days[0])} – ${longDay(week.days[6])}`,
    week.calendar.manualConfirmation ? h('span', { class: 'tag' }, t('week.manual')) : '',
    h('span', { class: 'tag' }, t('week.zone', { tz: week.timeZone })),
    h('span', { class: 'tag live' }, t('week.live')),
  );
  const summary = h('p', { class: 'summary', id: 'week-summary' }, t('week.summary', counts));
  const legend = h('ul', { class: 'legend', 'aria-label': t('week.legend') }, ['free', 'busy', 'booked', 'pending', 'cancelled'].map((s) => h('li', {}, h('span', { class: `swatch s-${s}`, 'aria-hidden': 'true' }), statusLabel(s))));
  const grid = week.slots.length ? weekGrid(week) : h('p', { class: 'empty' }, t('week.noSlots'));
  return h('section', { class: 'week' }, heading, sub, toolbar, summary, legend, grid);
}

function weekGrid(week) {
  const STEP = 5;
  let first = Math.min(...week.slots.map((s) => minutes(s.from)));
  let last = Math.max(...week.slots.map((s) => (s.to < s.from ? 24 * 60 : minutes(s.to))));
  first = Math.floor(first / 60) * 60;
  last = Math.ceil(last / 60) * 60;
  const rows = (last - first) / STEP;
  const weekend = week.slots.some((s) => week.days.indexOf(s.date) >= 5);
  const days = weekend ? week.days : week.days.slice(0, 5);
  const grid = h('div', { class: 'grid', role: 'region', 'aria-label': t('week.title'), style: `--days:${days.length};--rows:${rows}` });
  days.forEach((d, i) => grid.append(h('div', { class: `day-head${d === today() ? ' today' : ''}`, style: `grid-column:${i + 2};grid-row:1` }, dayLabel(d))));
  for (let m = first; m < last; m += 60) {
    const row = (m - first) / STEP + 2;
    grid.append(h('div', { class: 'hour', style: `grid-column:1;grid-row:${row} / span ${60 / STEP}`, 'aria-hidden': 'true' }, `${String(m / 60).padStart(2, '0')}:00`));
  }
  for (const s of week.slots) {
    const col = days.indexOf(s.date);
    if (col < 0) continue;
    const start = minutes(s.from);
    const end = s.to < s.from ? 24 * 60 : minutes(s.to);
    const row = Math.floor((start - first) / STEP) + 2;
    const span = Math.max(1, Math.round((end - start) / STEP));
    grid.append(slotCell(s, `grid-column:${col + 2};grid-row:${row} / span ${span}`));
  }
  return h('div', { class: 'grid-wrap' }, grid);
}

function slotCell(s, style) {
  const active = s.appointments.find((a) => a.status !== 'cancelled');
  const cancelled = s.appointments.filter((a) => a.status === 'cancelled');
  const time = `${s.from}–${s.to}`;
  const kind = active ? (active.status === 'pending' ? 'pending' : 'booked') : s.status === 'free' ? 'free' : 'busy';
  const label = [longDay(s.date), time, statusLabel(active ? active.status : s.status), active?.patient, active?.service].filter(Boolean).join(', ');
  // An appointment leads with the patient (what staff look for), a free slot with its time.
  const children = active
    ? [h('span', { class: 'what' }, active.patient || statusLabel(active.status)), ' ', h('span', { class: 'time' }, time), active.service ? h('span', { class: 'svc' }, ` · ${active.service}`) : '']
    : [h('span', { class: 'time' }, time), ' ', h('span', { class: 'what' }, statusLabel(s.status))];
  for (const c of cancelled) children.push(h('a', { class: 'cancelled-appt', href: `#/appointment/${c.id}`, title: `${statusLabel('cancelled')}: ${c.patient ?? ''}` }, ` ✕ ${c.patient ?? statusLabel('cancelled')}`));
  if (active) return h('a', { class: `slot s-${kind}`, style, href: `#/appointment/${active.id}`, 'aria-label': label, title: label, 'data-slot': s.id, 'data-status': kind }, children);
  return h('div', { class: `slot s-${kind}`, style, 'aria-label': label, title: label, 'data-slot': s.id, 'data-status': kind, role: 'note' }, children);
}

// ---------- pending ----------

async function pendingView() {
  const list = await api('GET', 'pending');
  const section = h('section', { class: 'pending' }, h('h1', {}, t('pending.title')));
  if (!list.length) {
    section.append(h('p', { class: 'empty' }, t('pending.none')));
    return section;
  }
  const body = h('tbody');
  for (const a of list) body.append(pendingRow(a, section));
  section.append(
    h(
      'table',
      { class: 'list' },
      h('thead', {}, h('tr', {}, ['pending.when', 'pending.patient', 'pending.service', 'pending.calendar', 'pending.actions'].map((k) => h('th', { scope: 'col' }, t(k))))),
      body,
    ),
  );
  return section;
}

function pendingRow(a, section) {
  const actions = h('td', { class: 'actions' });
  const row = h('tr', { 'data-appointment': a.id }, h('td', {}, when(a.start)), h('td', {}, h('a', { href: `#/appointment/${a.id}` }, a.patient ?? '—')), h('td', {}, a.service ?? '—'), h('td', {}, a.calendar ?? '—'), actions);
  const buttons = () =>
    actions.replaceChildren(
      h('button', { type: 'button', class: 'primary', 'data-action': 'confirm', onclick: () => act('confirm') }, t('action.confirm')),
      h('button', { type: 'button', 'data-action': 'decline', onclick: () => askReason(actions, 'decline', (reason) => act('decline', reason), buttons) }, t('action.decline')),
    );
  const act = async (what, reason) => {
    state.busy = true;
    try {
      await api('POST', `appointments/${encodeURIComponent(a.id)}/${what}`, { version: a.version, reason });
      flash(t(what === 'confirm' ? 'done.confirmed' : 'done.declined', { patient: a.patient ?? '—', when: when(a.start) }));
      row.remove();
      if (!section.querySelector('tbody tr')) section.append(h('p', { class: 'empty' }, t('pending.none')));
    } catch (err) {
      showError(section, err);
      buttons();
    } finally {
      state.busy = false;
    }
  };
  buttons();
  return row;
}

/** The cancellation-reason question (ISiKTerminCancelationReason) in place of the buttons. */
function askReason(container, action, onSubmit, onAbort) {
  state.busy = true;
  const id = `reason-${Math.random().toString(36).slice(2)}`;
  const select = h('select', { id, required: true }, h('option', { value: '' }, t('reason.choose')), ['pat', 'prov', 'maint', 'meds-inc', 'other'].map((c) => h('option', { value: c }, t(`reason.${c}`))));
  const form = h(
    'form',
    {
      class: 'reason',
      onsubmit: (e) => {
        e.preventDefault();
        if (!select.value) return select.reportValidity();
        onSubmit(select.value);
      },
    },
    h('label', { for: id }, t('reason.label')),
    select,
    h('button', { type: 'submit', class: 'danger', 'data-action': `do-${action}` }, t(action === 'decline' ? 'action.doDecline' : 'action.doCancel')),
    h(
      'button',
      {
        type: 'button',
        onclick: () => {
          state.busy = false;
          onAbort();
        },
      },
      t('action.abort'),
    ),
  );
  container.replaceChildren(form);
  select.focus();
}

// ---------- appointment detail ----------

async function detailView(r) {
  const d = await api('GET', `appointments/${encodeURIComponent(r.id ?? '')}?${zoneQuery().slice(1)}`);
  const a = d.appointment;
  const section = h('section', { class: 'detail' });
  const actions = h('div', { class: 'actions' });
  const act = async (what, reason) => {
    state.busy = true;
    try {
      await api('POST', `appointments/${encodeURIComponent(a.id)}/${what}`, { version: a.version, reason });
      state.busy = false;
      flash(t({ confirm: 'done.confirmed', decline: 'done.declined', cancel: 'done.cancelled' }[what], { patient: a.patient ?? '—', when: when(a.start) }));
      await render();
    } catch (err) {
      state.busy = false;
      showError(section, err);
      buttons();
    }
  };
  const buttons = () => {
    const list = [];
    if (a.status === 'pending') {
      list.push(h('button', { type: 'button', class: 'primary', 'data-action': 'confirm', onclick: () => act('confirm') }, t('action.confirm')));
      list.push(h('button', { type: 'button', 'data-action': 'decline', onclick: () => askReason(actions, 'decline', (x) => act('decline', x), buttons) }, t('action.decline')));
    } else if (['booked', 'arrived', 'checked-in', 'proposed', 'waitlist'].includes(a.status)) {
      list.push(h('button', { type: 'button', class: 'danger', 'data-action': 'cancel', onclick: () => askReason(actions, 'cancel', (x) => act('cancel', x), buttons) }, t('action.cancel')));
    }
    actions.replaceChildren(...list);
  };
  buttons();
  const dl = h(
    'dl',
    { class: 'facts' },
    h('dt', {}, t('detail.status')),
    h('dd', {}, badge(a.status)),
    h('dt', {}, t('detail.when')),
    h('dd', {}, `${when(a.start)} – ${fmt(a.end, { hour: '2-digit', minute: '2-digit' })}`),
    h('dt', {}, t('detail.calendar')),
    h('dd', {}, a.calendar ?? '—'),
    h('dt', {}, t('detail.service')),
    h('dd', {}, a.service ?? '—'),
    a.cancellationReason ? [h('dt', {}, t('detail.reason')), h('dd', {}, t(`reason.${a.cancellationReason}`))] : [],
  );
  section.append(
    h('p', {}, h('button', { type: 'button', class: 'link', onclick: () => history.back() }, `← ${t('action.back')}`)),
    h('h1', {}, `${t('detail.title')}: ${a.patient ?? a.id}`),
    dl,
    actions,
    h('h2', {}, t('detail.participants')),
    h('ul', {}, d.participants.map((p) => h('li', {}, `${p.display} (${[p.type ? roleLabel(p.type) : '', participationLabel(p.status)].filter(Boolean).join(', ')})`))),
    h('h2', {}, t('detail.slots')),
    h('ul', {}, d.slots.map((s) => h('li', {}, `${longDay(s.date)} ${s.from}–${s.to} `, badge(s.status)))),
    h('h2', {}, t('detail.history')),
    h(
      'table',
      { class: 'list' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, t('detail.version')), h('th', { scope: 'col' }, t('detail.changed')), h('th', { scope: 'col' }, t('detail.status')))),
      h('tbody', {}, d.history.map((v) => h('tr', {}, h('td', {}, v.version), h('td', {}, when(v.lastUpdated)), h('td', {}, badge(v.status))))),
    ),
  );
  return section;
}

// ---------- new calendar ----------

const DAYS = [1, 2, 3, 4, 5, 6, 7];

async function newCalendarView() {
  state.options ??= await api('GET', 'options');
  const o = state.options;
  const zoneName = h('span', { class: 'tz-name' }, tz());
  const section = h('section', { class: 'new-calendar' }, h('h1', {}, t('new.title')), h('p', { class: 'sub' }, t('new.timeZone'), zoneName));
  const field = (id, label, input, hint) => h('div', { class: 'field' }, h('label', { for: id }, label), input, hint ? h('small', { id: `${id}-hint` }, hint) : '');
  const choose = () => h('option', { value: '' }, t('reason.choose'));
  // ISiK binds no value set to Schedule.serviceType: the repository's service types, or free text.
  const FREE_TEXT = 'text';
  const inputs = {
    name: h('input', { id: 'f-name', required: true, maxlength: '200', autocomplete: 'off' }),
    actor: h('select', { id: 'f-actor', required: true }, choose(), o.actors.map((a) => h('option', { value: a.reference }, `${a.display} (${roleLabel(a.type)})`))),
    serviceType: h(
      'select',
      { id: 'f-service', required: true },
      o.serviceTypes.length ? choose() : '',
      o.serviceTypes.map((s, i) => h('option', { value: String(i) }, s.label)),
      h('option', { value: FREE_TEXT, selected: !o.serviceTypes.length }, t('new.serviceOther')),
    ),
    serviceText: h('input', { id: 'f-service-text', maxlength: '200', autocomplete: 'off', 'aria-describedby': 'f-service-text-hint' }),
    specialty: h('select', { id: 'f-specialty', required: true }, choose(), o.specialties.map((s, i) => h('option', { value: String(i) }, s.label))),
    slotMinutes: h('input', { id: 'f-minutes', type: 'number', min: '5', max: '480', step: '5', value: '15', required: true }),
    from: h('input', { id: 'f-from', type: 'date', value: addDays(today(), 1), required: true }),
    to: h('input', { id: 'f-to', type: 'date', value: addDays(today(), 28), required: true }),
    manual: h('input', { id: 'f-manual', type: 'checkbox' }),
  };
  const serviceTextField = field('f-service-text', t('new.serviceText'), inputs.serviceText, t('new.serviceTextHint'));
  const showServiceText = () => {
    const free = inputs.serviceType.value === FREE_TEXT;
    serviceTextField.hidden = !free;
    inputs.serviceText.required = free;
  };
  inputs.serviceType.addEventListener('change', showServiceText);
  showServiceText();
  const hours = Object.fromEntries(DAYS.map((d) => [d, h('input', { id: `f-hours-${d}`, value: d <= 5 ? '08:00-12:00' : '', placeholder: '08:00-12:00, 14:00-18:00', 'aria-describedby': 'hours-hint', autocomplete: 'off' })]));
  const result = h('div', { class: 'preview', 'aria-live': 'polite' });
  const createButton = h('button', { type: 'button', class: 'primary', disabled: true, 'data-action': 'create', 'aria-describedby': 'create-hint', onclick: () => submit(true) }, t('new.create'));
  const createHint = h('small', { id: 'create-hint', class: 'hint' }, t('new.previewFirst'));
  // Creating needs a preview of exactly this form without overlaps.
  const blockCreate = (hint) => {
    createButton.disabled = true;
    createHint.textContent = hint;
  };
  state.onZoneChange = () => {
    zoneName.textContent = tz();
    result.replaceChildren();
    blockCreate(t('new.previewFirst'));
  };

  const read = () => {
    const hoursValue = {};
    for (const d of DAYS) {
      const raw = hours[d].value.trim();
      if (!raw) continue;
      hoursValue[d] = raw.split(/\s*[,;]\s*/).map((range) => {
        const m = /^(\d{1,2}:\d{2})\s*[-–]\s*(\d{1,2}:\d{2})$/.exec(range);
        if (!m) throw new LocalProblem(t('new.badHours', { day: t(`day.${d}`), value: range }), `hours.${d}`);
        return [m[1].padStart(5, '0'), m[2].padStart(5, '0')];
      });
    }
    const actor = o.actors.find((a) => a.reference === inputs.actor.value);
    const free = inputs.serviceType.value === FREE_TEXT;
    return {
      name: inputs.name.value,
      actor: inputs.actor.value,
      actorDisplay: actor?.display,
      serviceType: free ? { text: inputs.serviceText.value.trim() } : (o.serviceTypes[Number(inputs.serviceType.value)]?.concept ?? null),
      specialty: o.specialties[Number(inputs.specialty.value)]?.coding ?? null,
      hours: hoursValue,
      slotMinutes: Number(inputs.slotMinutes.value),
      from: inputs.from.value,
      to: inputs.to.value,
      manualConfirmation: inputs.manual.checked,
      timeZone: tz(),
    };
  };
  const markField = (err) => {
    for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
    const name = err?.field ?? err?.reason?.field;
    const el = name && (name === 'serviceType' && inputs.serviceType.value === FREE_TEXT ? inputs.serviceText : (inputs[name] ?? hours[/^hours\.([1-7])$/.exec(name)?.[1]]));
    if (el) {
      el.setAttribute('aria-invalid', 'true');
      el.focus();
    }
  };
  const submit = async (create) => {
    state.busy = true;
    if (!create) result.replaceChildren();
    section.querySelector(':scope > .error')?.remove();
    markField(undefined);
    try {
      if (!form.reportValidity()) return;
      const body = read();
      if (!create) {
        const p = await api('POST', 'calendars/preview', body);
        const conflicts = p.conflicts.length;
        result.replaceChildren(
          h('p', {}, t('new.previewResult', { slots: p.slots, first: when(p.first?.start), last: when(p.last?.start) })),
          h('ul', { class: 'per-day' }, DAYS.filter((d) => p.perWeekday[d]).map((d) => h('li', {}, `${t(`day.${d}`)}: ${p.perWeekday[d]}`))),
          conflicts
            ? h(
                'div',
                { class: 'error', role: 'alert', 'data-conflicts': String(conflicts) },
                h('strong', {}, t('new.conflicts')),
                h('p', {}, t('new.conflictsBlock')),
                h('ul', {}, p.conflicts.slice(0, 10).map((c) => h('li', {}, t('new.conflictItem', { start: `${when(c.start)}–${clock(c.end)}`, calendar: c.calendar || '—', existing: `${when(c.existingStart)}–${clock(c.existingEnd)}` })))),
                conflicts > 10 ? h('p', {}, t('new.moreConflicts', { n: conflicts - 10 })) : '',
              )
            : h('p', { class: 'ok' }, t('new.noConflicts')),
        );
        if (conflicts) blockCreate(t('new.createBlocked'));
        else {
          createButton.disabled = false;
          createHint.textContent = '';
        }
      } else {
        const c = await api('POST', 'calendars', body);
        state.calendars = null;
        state.options = null;
        result.replaceChildren(h('p', { class: 'ok', role: 'status' }, t('new.created', { name: body.name, slots: c.slots }), ' ', h('a', { href: `#/week?calendar=${encodeURIComponent(c.schedule)}&date=${body.from}` }, t('new.open'))));
        blockCreate('');
      }
    } catch (err) {
      showError(section, err);
      markField(err);
      // A refused calendar: its preview no longer holds.
      if (create) {
        result.replaceChildren();
        blockCreate(t('new.previewFirst'));
      }
    } finally {
      state.busy = false;
    }
  };
  const form = h(
    'form',
    {
      class: 'calendar-form',
      oninput: () => blockCreate(t('new.previewFirst')),
      onchange: () => blockCreate(t('new.previewFirst')),
      onsubmit: (e) => {
        e.preventDefault();
        submit(false);
      },
    },
    field('f-name', t('new.name'), inputs.name),
    field('f-actor', t('new.actor'), inputs.actor),
    field('f-service', t('new.serviceType'), inputs.serviceType),
    serviceTextField,
    field('f-specialty', t('new.specialty'), inputs.specialty),
    field('f-minutes', t('new.slotMinutes'), inputs.slotMinutes),
    h('div', { class: 'row' }, field('f-from', t('new.from'), inputs.from), field('f-to', t('new.to'), inputs.to)),
    h('div', { class: 'field check' }, inputs.manual, h('label', { for: 'f-manual' }, t('new.manual'))),
    h('fieldset', {}, h('legend', {}, t('new.hours')), h('small', { id: 'hours-hint' }, t('new.hoursHint')), DAYS.map((d) => field(`f-hours-${d}`, t(`day.${d}`), hours[d]))),
    h('div', { class: 'buttons' }, h('button', { type: 'submit', 'data-action': 'preview' }, t('new.preview')), createButton, createHint),
  );
  section.append(form, result);
  return section;
}

// ---------- subscriptions ----------

async function subscriptionsView() {
  const subs = await api('GET', 'subscriptions');
  const section = h('section', { class: 'subscriptions' }, h('h1', {}, t('subs.title')));
  if (!subs.length) {
    section.append(h('p', { class: 'empty' }, t('subs.none')));
    return section;
  }
  const topic = (url) => url.split('/').pop();
  section.append(
    h(
      'table',
      { class: 'list' },
      h('thead', {}, h('tr', {}, ['subs.topic', 'subs.endpoint', 'subs.headers', 'subs.status', 'subs.events', 'subs.lastDelivery', 'subs.lastError'].map((k) => h('th', { scope: 'col' }, t(k))))),
      h(
        'tbody',
        {},
        subs.map((s) =>
          h(
            'tr',
            { 'data-subscription': s.id, 'data-status': s.status },
            h('td', { title: s.topic }, topic(s.topic)),
            h('td', { class: 'mono' }, s.endpoint ?? '—'),
            h('td', { class: 'mono' }, s.headers.join(', ') || '—'),
            h('td', {}, badge(s.status)),
            h('td', { class: 'num' }, s.eventsSinceStart ?? '—'),
            h('td', {}, s.lastDelivery ? when(s.lastDelivery) : t('subs.never')),
            h('td', {}, [s.errorCode, s.lastError].filter(Boolean).join(': ') || '—'),
          ),
        ),
      ),
    ),
  );
  return section;
}

// ---------- start ----------

function applyLanguage() {
  document.documentElement.lang = language();
  document.getElementById('skip').textContent = t('skip');
  document.getElementById('nav').setAttribute('aria-label', t('nav.label'));
  document.getElementById('tz-label').textContent = t('tz.label');
  fillZones();
  const button = document.getElementById('lang');
  button.textContent = t('lang.switch');
  button.setAttribute('aria-label', t('lang.switchLabel'));
}

// ---------- time zone ----------

/** The zone the page shows times in: this machine's (the page server's), unless the person chose another. */
function chosenZone() {
  const stored = localStorage.getItem('terminus.tz');
  if (stored && stored !== state.me.timeZone) {
    try {
      new Intl.DateTimeFormat('en', { timeZone: stored });
      return stored;
    } catch {
      localStorage.removeItem('terminus.tz');
    }
  }
  return state.me.timeZone;
}

function fillZones() {
  const select = document.getElementById('tz');
  if (!state.me) return;
  const machine = state.me.timeZone;
  const zones = new Set(typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : []);
  zones.add(machine);
  zones.add(tz());
  select.replaceChildren(...[...zones].sort().map((z) => h('option', { value: z, selected: z === tz() }, z === machine ? t('tz.machine', { tz: z }) : z)));
}

function changeZone(zone) {
  state.tz = zone;
  if (zone === state.me.timeZone) localStorage.removeItem('terminus.tz');
  else localStorage.setItem('terminus.tz', zone);
  // A form being filled in keeps what was typed; its preview no longer holds.
  if (state.onZoneChange) state.onZoneChange();
  else render();
}

async function start() {
  applyLanguage();
  document.getElementById('lang').addEventListener('click', () => {
    setLanguage(language() === 'de' ? 'en' : 'de');
    applyLanguage();
    render();
  });
  // The skip link goes to the content of the view on screen, without leaving it.
  document.getElementById('skip').addEventListener('click', (e) => {
    e.preventDefault();
    focusMain();
  });
  try {
    state.me = await api('GET', 'me');
    state.tz = chosenZone();
    document.getElementById('server').textContent = state.me.server;
    fillZones();
    document.getElementById('tz').addEventListener('change', (e) => changeZone(e.target.value));
  } catch (err) {
    document.getElementById('main').replaceChildren(errorBox(err));
    return;
  }
  window.addEventListener('hashchange', () => {
    // A fragment that names no view (an in-page target such as #main) keeps the view on screen.
    if (!location.hash.startsWith('#/') && location.hash !== '') {
      history.replaceState(null, '', state.hash || '#/week');
      focusMain();
      return;
    }
    document.getElementById('flash').replaceChildren();
    render();
  });
  const events = new EventSource('/api/events');
  events.addEventListener('change', refresh);
  await render();
  document.body.dataset.ready = 'true';
}

start();
