// What the page tells the person: a confirmation, or what went wrong in their language.
import { has, statusLabel, t } from './i18n.js';
import { clock, when } from './format.js';
import { h, LocalProblem } from './page.js';

export function flash(text) {
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

export function errorBox(err) {
  const issues = err instanceof LocalProblem ? [] : (err.outcome?.issue ?? []).map((i) => i.diagnostics || i.details?.text || i.code).filter(Boolean);
  // The repository's own wording and the status stay available for support, folded away.
  const technical = err.status || issues.length ? h('details', { class: 'technical' }, h('summary', {}, t('error.details')), h('ul', {}, err.status ? h('li', {}, `HTTP ${err.status}`) : '', issues.map((d) => h('li', { lang: 'en' }, d)))) : '';
  return h('div', { class: 'error', role: 'alert' }, h('strong', {}, t('error.title')), h('p', {}, problemText(err)), technical);
}

export function showError(container, err) {
  container.querySelector(':scope > .error')?.remove();
  container.prepend(errorBox(err));
}
