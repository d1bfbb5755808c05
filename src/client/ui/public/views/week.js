// The week grid: one calendar's slots and appointments, a week at a time.
import { statusLabel, t } from '../i18n.js';
import { addDays, dayLabel, longDay, minutes, today } from '../format.js';
import { api, h, state, zoneQuery } from '../page.js';

export async function weekView(r) {
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
