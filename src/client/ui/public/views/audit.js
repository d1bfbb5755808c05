// The audit log ("Protokoll"): who saw or changed which patient's appointments, when, with which
// system, from where; per patient or appointment, by date and user, newest first.
import { t } from '../i18n.js';
import { when } from '../format.js';
import { api, h } from '../page.js';

const FIELDS = ['patient', 'appointment', 'user', 'from', 'to'];

export async function auditView(r) {
  const params = new URLSearchParams();
  for (const name of [...FIELDS, 'cursor']) if (r.params.get(name)) params.set(name, r.params.get(name));
  const log = await api('GET', `audit?${params}`);
  const go = (p) => {
    location.hash = `#/audit?${p}`;
  };
  const form = h(
    'form',
    {
      class: 'toolbar filter',
      onsubmit: (e) => {
        e.preventDefault();
        const next = new URLSearchParams();
        for (const name of FIELDS) {
          const value = e.target.elements[name].value.trim();
          if (value) next.set(name, value);
        }
        go(next);
      },
    },
    FIELDS.map((name) => [
      h('label', { for: `audit-${name}` }, t(`audit.${name}`)),
      h('input', { id: `audit-${name}`, name, type: name === 'from' || name === 'to' ? 'date' : 'text', value: r.params.get(name) ?? '' }),
    ]),
    h('button', { type: 'submit', class: 'primary' }, t('audit.show')),
  );
  const section = h('section', { class: 'audit' }, h('h1', {}, t('audit.title')), h('p', { class: 'sub' }, t('audit.about')), form);
  if (!log.lines.length) {
    section.append(h('p', { class: 'empty' }, t('audit.none')));
    return section;
  }
  section.append(
    h(
      'table',
      { class: 'list' },
      h('thead', {}, h('tr', {}, ['audit.when', 'audit.what', 'audit.outcome', 'audit.user', 'audit.client', 'audit.address', 'audit.patient', 'audit.data'].map((k) => h('th', { scope: 'col' }, t(k))))),
      h(
        'tbody',
        {},
        log.lines.map((l) =>
          h(
            'tr',
            { 'data-audit-event': l.id, 'data-outcome': l.outcome },
            h('td', {}, when(l.recorded)),
            h('td', { class: 'mono' }, l.what),
            h('td', {}, l.outcome === '0' ? t('audit.ok') : l.failure ?? t('audit.failed')),
            h('td', { title: l.userId ?? '' }, l.user ?? '—'),
            h('td', {}, l.client ?? '—'),
            h('td', { class: 'mono' }, l.address ?? '—'),
            h('td', { class: 'mono' }, l.patient ? h('a', { href: `#/audit?patient=${encodeURIComponent(l.patient)}` }, l.patient.replace(/^Patient\//, '')) : '—'),
            h('td', { class: 'mono' }, l.entities.join(', ') || '—'),
          ),
        ),
      ),
    ),
  );
  if (log.next) {
    const more = new URLSearchParams(params);
    more.set('cursor', log.next);
    section.append(h('p', {}, h('a', { href: `#/audit?${more}`, class: 'more' }, t('audit.older'))));
  }
  return section;
}
