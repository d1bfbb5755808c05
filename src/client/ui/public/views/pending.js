// The pending list: appointments waiting for the practice to confirm or decline them.
import { t } from '../i18n.js';
import { askReason } from '../ask-reason.js';
import { when } from '../format.js';
import { flash, showError } from '../messages.js';
import { api, h, state } from '../page.js';

export async function pendingView() {
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
