// Dates, times and codes as the page shows them (in the chosen time zone and language).
import { has, language, statusLabel, t } from './i18n.js';
import { h, state } from './page.js';

const locale = () => (language() === 'de' ? 'de-DE' : 'en-GB');
export const tz = () => state.tz ?? state.me?.timeZone;
export const fmt = (iso, opts) => (iso ? new Intl.DateTimeFormat(locale(), { timeZone: tz(), ...opts }).format(new Date(iso)) : '');
export const when = (iso) => fmt(iso, { weekday: 'short', day: '2-digit', month: '2-digit', year: 'numeric', hour: '2-digit', minute: '2-digit' });
export const clock = (iso) => fmt(iso, { hour: '2-digit', minute: '2-digit' });
export const dayLabel = (date) => new Intl.DateTimeFormat(locale(), { timeZone: 'UTC', weekday: 'short', day: '2-digit', month: '2-digit' }).format(new Date(`${date}T00:00:00Z`));
export const longDay = (date) => new Intl.DateTimeFormat(locale(), { timeZone: 'UTC', weekday: 'long', day: 'numeric', month: 'long', year: 'numeric' }).format(new Date(`${date}T00:00:00Z`));
export const today = () => new Intl.DateTimeFormat('en-CA', { timeZone: tz() }).format(new Date());
export const addDays = (date, n) => new Date(Date.parse(`${date}T00:00:00Z`) + n * 86_400_000).toISOString().slice(0, 10);
export const minutes = (hm) => Number(hm.slice(0, 2)) * 60 + Number(hm.slice(3, 5));

/** A participant's or calendar owner's resource type, named for people ("Practitioner" → "Behandler/in"). */
export const roleLabel = (type) => (has(`role.${type}`) ? t(`role.${type}`) : type);
/** Appointment.participant.status (FHIR ParticipationStatus). */
export const participationLabel = (code) => (has(`participation.${code}`) ? t(`participation.${code}`) : code);

export function badge(code) {
  return h('span', { class: `badge s-${code}` }, statusLabel(code));
}
