// The practice page: plain ES modules, no build step. This module is its frame (navigation,
// language, time zone, live updates) and draws the view the address names (views/index.js).
import { language, setLanguage, t } from './i18n.js';
import { tz } from './format.js';
import { errorBox } from './messages.js';
import { api, h, state } from './page.js';
import { views } from './views/index.js';

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
    const view = Object.hasOwn(views, r.view) ? views[r.view] : Object.values(views)[0];
    const content = await view.show(r, { render });
    if (mine === renders) main.replaceChildren(content);
  } catch (err) {
    if (mine === renders) main.replaceChildren(errorBox(err));
  }
}

/** A re-render that keeps the page as it is while someone is filling in a form. */
function refresh() {
  if (!state.busy && Object.hasOwn(views, state.view) && views[state.view].live) render();
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
