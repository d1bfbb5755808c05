// One appointment: its facts, participants, slots and history, and what may be done with it.
import { t } from '../i18n.js';
import { askReason } from '../ask-reason.js';
import { badge, fmt, longDay, participationLabel, roleLabel, when } from '../format.js';
import { flash, showError } from '../messages.js';
import { api, h, state, zoneQuery } from '../page.js';

/** `page.render` draws the view again once an action is done. */
export async function appointmentView(r, page) {
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
      await page.render();
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
