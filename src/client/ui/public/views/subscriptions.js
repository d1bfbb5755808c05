// The repository's subscriptions: where notifications go and how their delivery fares.
import { t } from '../i18n.js';
import { badge, when } from '../format.js';
import { api, h } from '../page.js';

export async function subscriptionsView() {
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
