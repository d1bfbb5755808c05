import fs from 'node:fs';
import path from 'node:path';
import { startPracticeUi, type PracticeUi } from '../../src/client/ui/server';

/**
 * The practice page's ES modules without a browser: every module under public/ is served as
 * JavaScript at its own path (a module script of another type does not run), every import between
 * them names a served module, and every view in the menu is listed in views/index.js.
 */

const PUBLIC = path.resolve(__dirname, '../../src/client/ui/public');

function modules(dir = PUBLIC, prefix = ''): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.isDirectory()) return modules(path.join(dir, e.name), `${prefix}${e.name}/`);
    return e.name.endsWith('.js') ? [`${prefix}${e.name}`] : [];
  });
}

let ui: PracticeUi;
let cookie: string;

beforeAll(async () => {
  // No repository behind it: these requests never reach the FHIR side.
  const unused = async () => {
    throw new Error('the module test makes no FHIR call');
  };
  ui = await startPracticeUi({ origin: 'http://127.0.0.1:9', fetch: unused, log: () => undefined });
  const login = await fetch(ui.loginUrl, { redirect: 'manual' });
  expect(login.status).toBe(303);
  cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  expect(cookie).toMatch(/^terminus_ui=/);
});

afterAll(async () => {
  await ui?.close();
});

const get = (p: string) => fetch(`${ui.url}${p}`, { headers: { cookie } });

test('the page has its views in their own modules', () => {
  expect(modules()).toEqual(expect.arrayContaining(['app.js', 'i18n.js', 'page.js', 'views/index.js', 'views/week.js', 'views/pending.js', 'views/appointment.js', 'views/new-calendar.js', 'views/subscriptions.js']));
});

test.each(modules())('%s is served as JavaScript, byte for byte, under the page CSP', async (file) => {
  const res = await get(`/${file}`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
  expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
  expect(await res.text()).toBe(fs.readFileSync(path.join(PUBLIC, file), 'utf8'));
});

test('every import between the modules names a served module', () => {
  const served = new Set(modules());
  let imports = 0;
  for (const file of served) {
    const source = fs.readFileSync(path.join(PUBLIC, file), 'utf8');
    for (const [, spec] of source.matchAll(/^import [^;]*? from '([^']+)';$/gm)) {
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec));
      expect({ file, spec, served: served.has(target) }).toEqual({ file, spec, served: true });
      imports++;
    }
  }
  // app.js alone imports five modules.
  expect(imports).toBeGreaterThan(20);
});

test('index.html loads app.js as a module, and every menu view is listed in views/index.js', () => {
  const html = fs.readFileSync(path.join(PUBLIC, 'index.html'), 'utf8');
  expect(html).toContain('<script type="module" src="/app.js"></script>');
  const registry = fs.readFileSync(path.join(PUBLIC, 'views/index.js'), 'utf8');
  const listed = [...registry.matchAll(/^ {2}'?([a-z-]+)'?: \{ show: /gm)].map((m) => m[1]);
  const menu = [...html.matchAll(/data-view="([a-z-]+)"/g)].map((m) => m[1]);
  expect(menu.length).toBeGreaterThan(0);
  for (const view of menu) expect({ view, listed: listed.includes(view) }).toEqual({ view, listed: true });
});

test('nothing but the modules is served from the folder: the server source and a path out of it are not', async () => {
  expect((await get('/server.ts')).status).toBe(404);
  expect((await get('/views/../../server.ts')).status).toBe(404);
  expect((await get('/views/missing.js')).status).toBe(404);
  // Modules need the login too: without the cookie the page server answers 401.
  expect((await fetch(`${ui.url}/views/week.js`)).status).toBe(401);
});
