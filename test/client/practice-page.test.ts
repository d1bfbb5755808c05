import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { Appointment, Bundle, Schedule, Slot, Subscription } from '@medplum/fhirtypes';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { ClientSession, createClient } from '../../src/client';
import { bookParameters } from '../../src/client/stress';
import { createDevPki, writeDevPki } from '../../src/guard/pki/dev-pki';
import { startServer, type RunningServer } from '../../src/server';
import { Receiver, sleep, subscription } from '../subscriptions/helpers';
import { createTestContext } from '../helpers/context';
import { freePort } from '../helpers/swtpm';

/**
 * The practice's page (issue 12, CONTRACT 13) in a real Chromium: `terminus-client ui` as a child
 * process in front of a real server on loopback, everything it does checked through the API.
 * Screenshots of every view go to test/artifacts/ (not committed).
 */
const PASSWORD = 'practice page passphrase';
const ARTIFACTS = path.join(__dirname, '..', 'artifacts');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

let dir: string;
let server: RunningServer;
let origin: string;
let api: ClientSession;
let ui: ChildProcess | undefined;
let uiOut = '';
let loginUrl: string;
let uiUrl: string;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const subscriber = new Receiver();
const failing = new Receiver();

async function fhir<T = any>(method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: T }> {
  const res = await api.fetch(`${origin}/fhir/${p}`, { method, headers: { accept: 'application/fhir+json', 'content-type': 'application/fhir+json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : undefined) as T };
}

async function until<T>(what: string, f: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

async function patient(family: string, given: string): Promise<string> {
  const r = await fhir('POST', 'Patient', { resourceType: 'Patient', active: true, name: [{ family, given: [given] }] });
  expect(r.status).toBe(201);
  return `Patient/${r.json.id}`;
}

async function book(slot: Slot, patientRef: string): Promise<Appointment> {
  const r = await fhir('POST', 'Appointment/$book', bookParameters(slot as any, patientRef));
  expect([201, 202]).toContain(r.status);
  return (r.json.resourceType === 'Bundle' ? r.json.entry.find((e: any) => e.resource.resourceType === 'Appointment').resource : r.json) as Appointment;
}

async function freeSlots(schedule: string, count: number): Promise<Slot[]> {
  const r = await fhir<Bundle>('GET', `Slot?schedule=Schedule/${schedule}&status=free&_sort=start&_count=${count}`);
  return (r.json.entry ?? []).map((e) => e.resource as Slot);
}

async function shot(name: string): Promise<void> {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `practice-page-${name}.png`), fullPage: true });
}

const berlinDate = (iso: string) => new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Berlin' }).format(new Date(iso));

let pendingA: Appointment;
let pendingB: Appointment;
let booked: Appointment;
let manualSlots: Slot[];

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'practice-page-'));
  writeDevPki(path.join(dir, 'pki'), createDevPki());
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  const ctx = await createTestContext({
    env: { PUBLIC_URL: origin, GUARD_ENFORCEMENT: 'on', DEMO_DATA: 'true', CARD_TRUST_ANCHORS: path.join(dir, 'pki', 'card-ca.pem'), REPOSITORY_OWNERS: '1-2-DEV-PRAXIS-P256' },
  });
  server = await startServer({ ...ctx.config, port, host: '127.0.0.1' }, ctx);
  await subscriber.start();
  failing.status = 500;
  await failing.start();

  api = await createClient({ server: origin, card: path.join(dir, 'pki', 'card-p256.pem'), key: path.join(dir, 'pki', 'card-p256.key.pem'), home: path.join(dir, 'api-home'), password: PASSWORD });

  // Before the page opens: two pending bookings in the neurology calendar (manual confirmation),
  // one booked in a general-practice calendar, and two subscriptions (one endpoint failing).
  manualSlots = await freeSlots('demo-schedule-schneider', 3);
  pendingA = await book(manualSlots[0], await patient('Musterfrau', 'Erika'));
  pendingB = await book(manualSlots[1], await patient('Beispiel', 'Bernd'));
  expect([pendingA.status, pendingB.status]).toEqual(['pending', 'pending']);
  booked = await book((await freeSlots('demo-schedule-weber', 1))[0], await patient('Schmidt', 'Hanna'));
  expect(booked.status).toBe('booked');
  const good = await fhir<Subscription>('POST', 'Subscription', subscription(`http://127.0.0.1:${subscriber.port}/hook`, { header: ['Authorization: Bearer portal-secret'] }));
  expect(good.status).toBe(201);
  const bad = await fhir<Subscription>('POST', 'Subscription', subscription(`http://127.0.0.1:${failing.port}/down`));
  expect(bad.status).toBe(201);
  await until('the failing subscription in error', async () => (await fhir<Subscription>('GET', `Subscription/${bad.json.id}`)).json.status === 'error');
  await until('the good subscription active', async () => (await fhir<Subscription>('GET', `Subscription/${good.json.id}`)).json.status === 'active');

  // The page, started the way a practice starts it.
  ui = spawn(process.execPath, ['--import', 'tsx', 'src/client/cli.ts', 'ui', '--server', origin, '--card', path.join(dir, 'pki', 'card-p256.pem'), '--key', path.join(dir, 'pki', 'card-p256.key.pem'), '--time-zone', 'Europe/Berlin'], {
    env: { ...process.env, NODE_OPTIONS: '', TERMINUS_CLIENT_HOME: path.join(dir, 'ui-home'), TERMINUS_CLIENT_PASSWORD: PASSWORD },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  ui.stdout!.on('data', (d) => (uiOut += d));
  ui.stderr!.on('data', (d) => (uiOut += d));
  const printed = await until('the printed login link', async () => {
    if (ui!.exitCode !== null) throw new Error(`terminus-client ui exited ${ui!.exitCode}: ${uiOut}`);
    return /\{[^{}]*"login_url"[^{}]*\}/.exec(uiOut)?.[0];
  }, 90_000).catch((err: Error) => {
    throw new Error(`${err.message}\n${uiOut}`);
  });
  ({ login_url: loginUrl, listening: uiUrl } = JSON.parse(printed));

  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'de-DE' });
  page = await context.newPage();
}, 180_000);

afterAll(async () => {
  await browser?.close().catch(() => undefined);
  if (ui && ui.exitCode === null) {
    const exited = new Promise((r) => ui!.once('exit', r));
    ui.kill('SIGTERM');
    const kill = setTimeout(() => ui!.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(kill);
  }
  api?.close();
  await subscriber.stop?.();
  await failing.stop?.();
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
}, 60_000);

test('the page listens on 127.0.0.1 only and prints a one-time login link', () => {
  expect(uiUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  expect(loginUrl).toMatch(new RegExp(`^${uiUrl}/login\\?token=[A-Za-z0-9_-]{40,}$`));
});

test('a wrong login token and a request without the cookie are refused', async () => {
  const wrong = await page.goto(`${uiUrl}/login?token=${'x'.repeat(43)}`);
  expect(wrong?.status()).toBe(401);
  await expect(page.locator('h1').textContent()).resolves.toMatch(/not valid/);
  const noCookie = await page.goto(`${uiUrl}/`);
  expect(noCookie?.status()).toBe(401);
  const apiNoCookie = await fetch(`${uiUrl}/api/calendars`);
  expect(apiNoCookie.status).toBe(401);
  // Another Host name (a rebinding DNS name pointing at loopback) is not this server.
  const rebound = await new Promise<number>((resolve, reject) => {
    http.get(`${uiUrl}/api/calendars`, { headers: { host: 'evil.example' } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    }).on('error', reject);
  });
  expect(rebound).toBe(421);
});

test('logging in through the printed link shows the week with booked and pending appointments', async () => {
  const res = await page.goto(loginUrl);
  expect(res?.status()).toBe(200);
  const cookies = await context.cookies();
  expect(cookies.find((c) => c.name === 'terminus_ui')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
  await page.waitForSelector('body[data-ready="true"]');
  // The link was used up: a second use is refused.
  const again = await fetch(loginUrl);
  expect(again.status).toBe(401);

  await page.goto(`${uiUrl}/#/week?calendar=demo-schedule-schneider&date=${berlinDate(manualSlots[0].start)}`);
  await page.waitForSelector(`[data-slot="${manualSlots[0].id}"][data-status="pending"]`);
  await expect(page.locator(`[data-slot="${manualSlots[0].id}"]`).textContent()).resolves.toContain('Erika Musterfrau');
  await expect(page.locator(`[data-slot="${manualSlots[1].id}"]`).textContent()).resolves.toContain('Bernd Beispiel');
  await expect(page.locator('h1').textContent()).resolves.toContain('Schneider');
  expect(await page.locator('[data-status="free"]').count()).toBeGreaterThan(0);
  await expect(page.locator('#week-summary').textContent()).resolves.toMatch(/2 offen/);
  await shot('week');

  // The general-practice calendar shows the booked appointment; next/previous week move the grid.
  await page.selectOption('#calendar', 'demo-schedule-weber');
  const bookedSlot = booked.slot![0].reference!.slice(5);
  await page.goto(`${uiUrl}/#/week?calendar=demo-schedule-weber&date=${berlinDate(booked.start!)}`);
  await page.waitForSelector(`[data-slot="${bookedSlot}"][data-status="booked"]`);
  await expect(page.locator(`[data-slot="${bookedSlot}"]`).textContent()).resolves.toContain('Hanna Schmidt');
  const heading = await page.locator('.sub').first().textContent();
  await page.getByRole('button', { name: 'Nächste Woche →' }).click();
  await page.waitForFunction((h) => (globalThis as any).document.querySelector('.sub')?.textContent !== h, heading);
  await page.getByRole('button', { name: '← Vorherige Woche' }).click();
  await page.waitForSelector(`[data-slot="${bookedSlot}"]`);

  // At a tablet's width the grid still fits its frame (it scrolls inside, the page does not).
  await page.setViewportSize({ width: 768, height: 1024 });
  await shot('week-tablet');
  const overflow = await page.evaluate(() => {
    const root = (globalThis as any).document.documentElement;
    return root.scrollWidth - root.clientWidth;
  });
  expect(overflow).toBeLessThanOrEqual(0);
  await page.setViewportSize({ width: 1280, height: 800 });
});

test('confirm one pending appointment (booked, the subscriber is notified) and decline another with a reason', async () => {
  await page.goto(`${uiUrl}/#/pending`);
  await page.waitForSelector(`tr[data-appointment="${pendingA.id}"]`);
  expect(await page.locator('tbody tr').count()).toBe(2);
  await shot('pending');
  const before = subscriber.received.length;

  await page.locator(`tr[data-appointment="${pendingA.id}"] [data-action="confirm"]`).click();
  await page.waitForSelector(`tr[data-appointment="${pendingA.id}"]`, { state: 'detached' });
  await expect(page.locator('#flash').textContent()).resolves.toContain('bestätigt');
  expect((await fhir<Appointment>('GET', `Appointment/${pendingA.id}`)).json.status).toBe('booked');
  await until('the notification of the confirmation', async () =>
    subscriber.received.slice(before).some((r) => JSON.stringify(r.bundle ?? r.text).includes(`Appointment/${pendingA.id}`)),
  );

  await page.locator(`tr[data-appointment="${pendingB.id}"] [data-action="decline"]`).click();
  // Declining without a reason is not possible: the form asks for one from the ISiK value set.
  await page.locator(`tr[data-appointment="${pendingB.id}"] [data-action="do-decline"]`).click();
  expect((await fhir<Appointment>('GET', `Appointment/${pendingB.id}`)).json.status).toBe('pending');
  await page.getByLabel('Absagegrund').selectOption('prov');
  await page.locator(`tr[data-appointment="${pendingB.id}"] [data-action="do-decline"]`).click();
  await page.waitForSelector(`tr[data-appointment="${pendingB.id}"]`, { state: 'detached' });
  const declined = (await fhir<Appointment>('GET', `Appointment/${pendingB.id}`)).json;
  expect(declined.status).toBe('cancelled');
  expect(declined.cancelationReason?.coding?.[0]).toMatchObject({ system: 'http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason', code: 'prov' });
  await page.waitForSelector('text=Keine offenen Termine.');
});

test('a change made elsewhere is refused with the OperationOutcome shown (If-Match), and the week updates by itself', async () => {
  const third = await book(manualSlots[2], await patient('Neu', 'Nora'));
  await page.goto(`${uiUrl}/#/pending`);
  await page.waitForSelector(`tr[data-appointment="${third.id}"]`);
  // Someone else cancels it after the page showed it.
  const patch = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] }] };
  expect((await fhir('PATCH', `Appointment/${third.id}`, patch)).status).toBe(200);
  await page.locator(`tr[data-appointment="${third.id}"] [data-action="confirm"]`).click();
  const alert = page.getByRole('alert');
  await alert.waitFor();
  await expect(alert.textContent()).resolves.toMatch(/changed since the page showed it.*cancelled/);
  expect((await fhir<Appointment>('GET', `Appointment/${third.id}`)).json.status).toBe('cancelled');

  // The week grid picks up a booking made through the API without a reload.
  const slot = (await freeSlots('demo-schedule-schneider', 1))[0];
  await page.goto(`${uiUrl}/#/week?calendar=demo-schedule-schneider&date=${berlinDate(slot.start)}`);
  await page.waitForSelector(`[data-slot="${slot.id}"][data-status="free"]`);
  await book(slot, await patient('Live', 'Lena'));
  await page.waitForSelector(`[data-slot="${slot.id}"][data-status="pending"]`, { timeout: 30_000 });
});

test('appointment detail: participants, slots, history, and cancel with a reason', async () => {
  await page.goto(`${uiUrl}/#/appointment/${pendingA.id}`);
  await page.waitForSelector('.detail h1');
  await expect(page.locator('.detail h1').textContent()).resolves.toContain('Erika Musterfrau');
  expect(await page.locator('.detail tbody tr').count()).toBeGreaterThanOrEqual(2);
  await expect(page.locator('.detail').textContent()).resolves.toMatch(/gebucht/);
  await shot('detail');
  await page.locator('[data-action="cancel"]').click();
  await page.getByLabel('Absagegrund').selectOption('pat');
  await page.locator('[data-action="do-cancel"]').click();
  await page.waitForSelector('text=abgesagt');
  const a = (await fhir<Appointment>('GET', `Appointment/${pendingA.id}`)).json;
  expect(a.status).toBe('cancelled');
  expect(a.cancelationReason?.coding?.[0]?.code).toBe('pat');
  // The slot is free again.
  expect((await fhir<Slot>('GET', `Slot/${manualSlots[0].id}`)).json.status).toBe('free');
});

test('create a calendar from opening hours (preview, then the Slots exist); an overlapping one is refused and writes nothing', async () => {
  const doctor = await fhir('POST', 'Practitioner', { resourceType: 'Practitioner', active: true, name: [{ family: 'Neumann', given: ['Clara'], prefix: ['Dr.'] }] });
  expect(doctor.status).toBe(201);
  await page.goto(`${uiUrl}/#/new-calendar`);
  await page.waitForSelector('form.calendar-form');
  const fill = async (name: string, from: string, to: string) => {
    await page.getByLabel('Name des Kalenders').fill(name);
    await page.getByLabel('Für wen').selectOption(`Practitioner/${doctor.json.id}`);
    await page.getByLabel('Leistung', { exact: true }).selectOption({ index: 1 });
    await page.getByLabel('Fachrichtung').selectOption({ index: 1 });
    await page.getByLabel('Länge eines Termins').fill('30');
    await page.getByLabel('Erster Tag').fill(from);
    await page.getByLabel('Letzter Tag').fill(to);
    for (const day of ['Montag', 'Dienstag', 'Mittwoch', 'Donnerstag', 'Freitag']) await page.getByLabel(day, { exact: true }).fill('');
    await page.getByLabel('Montag', { exact: true }).fill('09:00-12:00, 14:00-16:00');
    await page.getByLabel('Mittwoch', { exact: true }).fill('08:00-10:00');
    await page.getByLabel('Buchungen von der Praxis bestätigen lassen').check();
  };
  // Two weeks in March 2031: Mondays 10 slots, Wednesdays 4.
  await fill('Sprechstunde Dr. Neumann', '2031-03-03', '2031-03-14');
  await page.locator('[data-action="preview"]').click();
  await page.waitForSelector('text=28 Termine');
  await expect(page.locator('.preview').textContent()).resolves.toContain('Keine Überschneidungen');
  await shot('new-calendar');
  await page.locator('[data-action="create"]').click();
  await page.waitForSelector('text=mit 28 Terminen angelegt');

  const schedules = (await fhir<Bundle>('GET', `Schedule?actor=Practitioner/${doctor.json.id}`)).json.entry!.map((e) => e.resource as Schedule);
  expect(schedules).toHaveLength(1);
  expect(schedules[0].extension).toEqual(expect.arrayContaining([{ url: 'http://terminus.local/fhir/StructureDefinition/booking-confirmation', valueCode: 'manual' }]));
  const slots = (await fhir<Bundle>('GET', `Slot?schedule=Schedule/${schedules[0].id}&_count=100&_sort=start`)).json.entry!.map((e) => e.resource as Slot);
  expect(slots).toHaveLength(28);
  // 09:00 in Berlin in March 2031 (CET) is 08:00 UTC.
  expect(slots[0].status).toBe('free');
  expect([Date.parse(slots[0].start), Date.parse(slots[0].end)]).toEqual([Date.parse('2031-03-03T08:00:00Z'), Date.parse('2031-03-03T08:30:00Z')]);

  // The same doctor again over an overlapping range: preview lists the overlaps, create refuses.
  await page.goto(`${uiUrl}/#/week`);
  await page.goto(`${uiUrl}/#/new-calendar`);
  await page.waitForSelector('form.calendar-form');
  await fill('Zweiter Kalender Dr. Neumann', '2031-03-10', '2031-03-21');
  await page.locator('[data-action="preview"]').click();
  await page.waitForSelector('text=Überschneidungen mit bestehenden Zeiten');
  await page.locator('[data-action="create"]').click();
  const alert = page.getByRole('alert').filter({ hasText: 'nothing was written' });
  await alert.waitFor();
  await expect(alert.textContent()).resolves.toMatch(/409.*overlaps Slot\/.*Sprechstunde Dr\. Neumann/s);
  await shot('new-calendar-overlap');
  expect((await fhir<Bundle>('GET', `Schedule?actor=Practitioner/${doctor.json.id}&_summary=count`)).json.total).toBe(1);
  expect((await fhir<Bundle>('GET', `Slot?schedule=Schedule/${schedules[0].id}&_summary=count`)).json.total).toBe(28);
});

test('subscriptions: topic, masked headers, status; the failing endpoint shows as error', async () => {
  await page.goto(`${uiUrl}/#/subscriptions`);
  await page.waitForSelector('tr[data-subscription]');
  await expect(page.locator('tr[data-status="error"]').textContent()).resolves.toContain(`127.0.0.1:${failing.port}/down`);
  await expect(page.locator('tr[data-status="error"] .badge').textContent()).resolves.toBe('Fehler');
  const active = page.locator('tr[data-status="active"]');
  await expect(active.textContent()).resolves.toContain('Authorization: ••••');
  await expect(page.content()).resolves.not.toContain('portal-secret');
  await shot('subscriptions');
});

test('state-changing calls need the anti-CSRF token and this origin; the page switches to English', async () => {
  const status = await page.evaluate(async () => (await fetch('/api/appointments/x/confirm', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status);
  expect(status).toBe(403);
  const cookie = (await context.cookies()).find((c) => c.name === 'terminus_ui')!;
  const me = (await (await fetch(`${uiUrl}/api/me`, { headers: { cookie: `terminus_ui=${cookie.value}` } })).json()) as { csrf: string };
  const foreign = await fetch(`${uiUrl}/api/appointments/x/confirm`, { method: 'POST', headers: { cookie: `terminus_ui=${cookie.value}`, 'x-csrf-token': me.csrf, origin: 'http://evil.example', 'content-type': 'application/json' }, body: '{}' });
  expect(foreign.status).toBe(403);
  const same = await fetch(`${uiUrl}/api/appointments/x/confirm`, { method: 'POST', headers: { cookie: `terminus_ui=${cookie.value}`, 'x-csrf-token': me.csrf, origin: uiUrl, 'content-type': 'application/json' }, body: '{}' });
  expect(same.status).toBe(404);
  expect(((await same.json()) as any).outcome.resourceType).toBe('OperationOutcome');

  await page.goto(`${uiUrl}/#/pending`);
  await page.getByRole('button', { name: 'Switch to English' }).click();
  await page.waitForSelector('text=Pending appointments');
  await expect(page.locator('html').getAttribute('lang')).resolves.toBe('en');
});
