import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { Appointment, Bundle, Schedule, Slot, Subscription } from '@medplum/fhirtypes';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { composeParts } from '../../src/app';
import { ClientSession, createClient } from '../../src/client';
import { bookParameters } from '../../src/client/stress';
import { importResources, readResourceFile } from '../../src/fhir';
import { createDevPki, writeDevPki } from '../../src/guard/pki/dev-pki';
import { addCalendarDays, isoWeekday, wallDate, wallTimeToUtc } from '../../src/common/opening-hours';
import { startServer, type RunningServer } from '../../src/server';
import { projectPath } from '../../src/server-lib/paths';
import { Receiver, sleep, subscription } from '../subscriptions/helpers';
import { createTestContext } from '../helpers/context';
import { freePort } from '../helpers/swtpm';
import { entryArgs } from '../helpers/entry';

/**
 * The practice's page in a real Chromium: `terminus-client ui` as a child process in front of a
 * real server on loopback, everything it does checked through the API. Two repositories: the demo
 * practice, and one holding only fixtures/isik-stufe5.json (no demo data, as a hospital's
 * repository filled by others is). One browser for both. Screenshots of every view go to
 * test/artifacts/ (not committed).
 */
const PASSWORD = 'practice page passphrase';
const ARTIFACTS = path.join(__dirname, '..', 'artifacts');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

let dir: string;
let server: RunningServer;
let origin: string;
let api: ClientSession;
let loginUrl: string;
let uiUrl: string;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const subscriber = new Receiver();
const failing = new Receiver();

async function fhirAt<T = any>(session: ClientSession, at: string, method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: T }> {
  const res = await session.fetch(`${at}/fhir/${p}`, { method, headers: { accept: 'application/fhir+json', 'content-type': 'application/fhir+json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : undefined) as T };
}
const fhir = <T = any>(method: string, p: string, body?: unknown, headers: Record<string, string> = {}) => fhirAt<T>(api, origin, method, p, body, headers);

/** `terminus-client ui`, started the way a practice starts it; every one is stopped after the file. */
interface UiProcess {
  child: ChildProcess;
  output: () => string;
  url: string;
  loginUrl: string;
}
const uis: UiProcess[] = [];

async function startUi(at: string, home: string, args: string[] = [], env: Record<string, string> = {}): Promise<UiProcess> {
  const child = spawn(process.execPath, [...entryArgs('src/client/cli.ts'), 'ui', '--server', at, '--card', path.join(dir, 'pki', 'card-p256.pem'), '--key', path.join(dir, 'pki', 'card-p256.key.pem'), ...args], {
    env: { ...process.env, NODE_OPTIONS: '', TERMINUS_CLIENT_HOME: home, TERMINUS_CLIENT_PASSWORD: PASSWORD, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const ui = { child, output: () => out, url: '', loginUrl: '' };
  uis.push(ui);
  const printed = await until('the printed login link', async () => {
    if (child.exitCode !== null) throw new Error(`terminus-client ui exited ${child.exitCode}: ${out}`);
    return /\{[^{}]*"login_url"[^{}]*\}/.exec(out)?.[0];
  }, 90_000).catch((err: Error) => {
    throw new Error(`${err.message}\n${out}`);
  });
  ({ login_url: ui.loginUrl, listening: ui.url } = JSON.parse(printed));
  return ui;
}

async function stopUi(ui: UiProcess): Promise<void> {
  if (ui.child.exitCode !== null || ui.child.signalCode !== null) return;
  const exited = new Promise((r) => ui.child.once('exit', r));
  ui.child.kill('SIGTERM');
  const kill = setTimeout(() => ui.child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(kill);
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

async function shot(name: string, on: Page = page): Promise<void> {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await on.screenshot({ path: path.join(ARTIFACTS, `practice-page-${name}.png`), fullPage: true });
}

/** What a person sees of an element (a closed <details> and hidden parts left out). */
const visibleText = (on: Page, selector: string) => on.locator(selector).first().innerText();

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

  // The page, started the way a practice starts it (the zone given: this machine's may be UTC).
  ({ loginUrl, url: uiUrl } = await startUi(origin, path.join(dir, 'ui-home'), ['--time-zone', 'Europe/Berlin']));

  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'de-DE' });
  page = await context.newPage();
}, 180_000);

afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await Promise.all(uis.map(stopUi));
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
  // The skip link leads into this view's content, not to the week.
  await page.locator('#skip').focus();
  await expect(page.locator('#skip').isVisible()).resolves.toBe(true);
  await page.keyboard.press('Enter');
  await expect(page.evaluate(() => (globalThis as any).document.activeElement?.id)).resolves.toBe('main');
  expect(new URL(page.url()).hash).toBe('#/pending');
  await expect(page.locator('main h1').textContent()).resolves.toBe('Offene Termine');
  expect(await page.locator(`tr[data-appointment="${pendingA.id}"]`).count()).toBe(1);
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
  await expect(alert.innerText()).resolves.toContain('Der Termin wurde inzwischen anderswo geändert (jetzt: abgesagt)');
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
  // Participants by role and answer in German, not as FHIR codes ("(Patient, accepted)").
  const participants = await page.locator('.detail ul').first().innerText();
  expect(participants).toMatch(/Erika Musterfrau \(Patient\/in, (zugesagt|vorläufig|Rückmeldung offen|abgelehnt)\)/);
  expect(participants).not.toMatch(/Patient,|Practitioner|accepted|needs-action/);
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

test('create a calendar from opening hours (preview, then the Slots exist); overlaps block "create", and a refusal reads in German with local times', async () => {
  const doctor = await fhir('POST', 'Practitioner', { resourceType: 'Practitioner', active: true, name: [{ family: 'Neumann', given: ['Clara'], prefix: ['Dr.'] }] });
  expect(doctor.status).toBe(201);
  await page.goto(`${uiUrl}/#/new-calendar`);
  await page.waitForSelector('form.calendar-form');
  // Codes read as names: the calendars' service types, people by role, no "(124)" or "(Practitioner)".
  const services = await page.locator('#f-service option').allTextContents();
  expect(services).toEqual(expect.arrayContaining(['Hausärztliche Sprechstunde', 'Neurologische Sprechstunde', 'Andere Leistung (Freitext) …']));
  expect(services.join('|')).not.toMatch(/\(\d+\)|General Practice/);
  await expect(page.locator('#f-specialty').innerText()).resolves.not.toMatch(/\(ALLG\)|\(NEUR\)/);
  await expect(page.locator('#f-actor').innerText()).resolves.toContain('Dr. Clara Neumann (Behandler/in)');
  await expect(page.locator('#f-actor').innerText()).resolves.not.toMatch(/Practitioner|HealthcareService/);

  // At 1280×800 the confirmation checkbox and its label keep clear of the date fields.
  const box = async (selector: string) => (await page.locator(selector).boundingBox())!;
  const [to, check, checkLabel] = [await box('#f-to'), await box('#f-manual'), await box('label[for="f-manual"]')];
  for (const b of [check, checkLabel]) expect(b.x >= to.x + to.width || b.y >= to.y + to.height || b.x + b.width <= to.x || b.y + b.height <= to.y).toBe(true);
  await expect(page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth - (globalThis as any).document.documentElement.clientWidth)).resolves.toBeLessThanOrEqual(0);
  await shot('new-calendar-form');

  const fill = async (name: string, from: string, to: string) => {
    await page.getByLabel('Name des Kalenders').fill(name);
    await page.getByLabel('Für wen').selectOption(`Practitioner/${doctor.json.id}`);
    await page.getByLabel('Leistung', { exact: true }).selectOption({ label: 'Hausärztliche Sprechstunde' });
    await page.getByLabel('Fachrichtung').selectOption({ index: 1 });
    await page.getByLabel('Länge eines Termins').fill('30');
    await page.getByLabel('Erster Tag').fill(from);
    await page.getByLabel('Letzter Tag').fill(to);
    for (const day of ['Montag', 'Dienstag', 'Mittwoch', 'Donnerstag', 'Freitag']) await page.getByLabel(day, { exact: true }).fill('');
    await page.getByLabel('Montag', { exact: true }).fill('09:00-12:00, 14:00-16:00');
    await page.getByLabel('Mittwoch', { exact: true }).fill('08:00-10:00');
    await page.getByLabel('Buchungen von der Praxis bestätigen lassen').check();
  };
  const create = page.locator('[data-action="create"]');
  // Two weeks in March 2031: Mondays 10 slots, Wednesdays 4.
  await fill('Sprechstunde Dr. Neumann', '2031-03-03', '2031-03-14');
  expect(await create.isDisabled()).toBe(true);
  await page.locator('[data-action="preview"]').click();
  await page.waitForSelector('text=28 Termine');
  await expect(page.locator('.preview').textContent()).resolves.toContain('Keine Überschneidungen');
  expect(await create.isDisabled()).toBe(false);
  await shot('new-calendar');
  await create.click();
  await page.waitForSelector('text=mit 28 Terminen angelegt');

  const schedules = (await fhir<Bundle>('GET', `Schedule?actor=Practitioner/${doctor.json.id}`)).json.entry!.map((e) => e.resource as Schedule);
  expect(schedules).toHaveLength(1);
  expect(schedules[0].extension).toEqual(expect.arrayContaining([{ url: 'http://terminus.local/fhir/StructureDefinition/booking-confirmation', valueCode: 'manual' }]));
  // The calendar takes the service type as the practice's calendars have it: codings and text.
  expect(schedules[0].serviceType).toEqual([expect.objectContaining({ text: 'Hausärztliche Sprechstunde', coding: expect.arrayContaining([expect.objectContaining({ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '124' })]) })]);
  const slots = (await fhir<Bundle>('GET', `Slot?schedule=Schedule/${schedules[0].id}&_count=100&_sort=start`)).json.entry!.map((e) => e.resource as Slot);
  expect(slots).toHaveLength(28);
  // 09:00 in Berlin in March 2031 (CET) is 08:00 UTC.
  expect(slots[0].status).toBe('free');
  expect([Date.parse(slots[0].start), Date.parse(slots[0].end)]).toEqual([Date.parse('2031-03-03T08:00:00Z'), Date.parse('2031-03-03T08:30:00Z')]);

  // The same doctor again over an overlapping range: the preview lists the overlaps in local time,
  // and "create" stays off until a preview shows none.
  await page.goto(`${uiUrl}/#/week`);
  await page.goto(`${uiUrl}/#/new-calendar`);
  await page.waitForSelector('form.calendar-form');
  await fill('Zweiter Kalender Dr. Neumann', '2031-03-10', '2031-03-21');
  await page.locator('[data-action="preview"]').click();
  await page.waitForSelector('text=Überschneidungen mit bestehenden Zeiten');
  expect(await create.isDisabled()).toBe(true);
  const overlaps = await visibleText(page, '.preview .error');
  expect(overlaps).toContain('Mo., 10.03.2031, 09:00–09:30 überschneidet sich mit „Sprechstunde Dr. Neumann“ (Mo., 10.03.2031, 09:00–09:30)');
  expect(overlaps).not.toMatch(/\d{2}:\d{2}:\d{2}Z|overlap/);
  await shot('new-calendar-overlap');
  await create.click({ force: true }).catch(() => undefined);
  expect((await fhir<Bundle>('GET', `Schedule?actor=Practitioner/${doctor.json.id}&_summary=count`)).json.total).toBe(1);

  // Dates after the first calendar: no overlap, "create" is on. Before the click someone else
  // gives the doctor a slot on the first Monday: the page server refuses, and the page says so in
  // German, in Berlin time, naming the other calendar.
  await page.getByLabel('Erster Tag').fill('2031-03-17');
  await page.locator('[data-action="preview"]').click();
  await page.waitForSelector('text=Keine Überschneidungen');
  expect(await create.isDisabled()).toBe(false);
  const other = await fhir<Bundle>('POST', '', {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: [
      {
        fullUrl: 'urn:uuid:4c7e0f3a-1d2b-4a5c-9e8f-000000000001',
        resource: { resourceType: 'Schedule', active: true, extension: [{ url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name', valueString: 'Vertretung Dr. Neumann' }], serviceType: [{ text: 'Vertretung' }], specialty: [{ coding: [{ system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'ALLG' }] }], actor: [{ reference: `Practitioner/${doctor.json.id}`, display: 'Dr. Clara Neumann' }] },
        request: { method: 'POST', url: 'Schedule' },
      },
      {
        fullUrl: 'urn:uuid:4c7e0f3a-1d2b-4a5c-9e8f-000000000002',
        resource: { resourceType: 'Slot', schedule: { reference: 'urn:uuid:4c7e0f3a-1d2b-4a5c-9e8f-000000000001' }, status: 'free', start: '2031-03-17T08:00:00Z', end: '2031-03-17T08:30:00Z' },
        request: { method: 'POST', url: 'Slot' },
      },
    ],
  });
  expect(other.status).toBe(200);
  await create.click();
  const alert = page.locator('section > .error[role="alert"]');
  await alert.waitFor();
  const refusal = await alert.innerText();
  expect(refusal).toContain('Nichts wurde angelegt: Der neue Termin Mo., 17.03.2031, 09:00–09:30 überschneidet sich mit einem bestehenden im Kalender „Vertretung Dr. Neumann“ (Mo., 17.03.2031, 09:00–09:30).');
  // No English, no UTC instants, no field path ("hours") in what the person reads.
  expect(refusal).not.toMatch(/overlaps|nothing was written|hours|\d{2}:\d{2}:\d{2}|409/);
  expect(await create.isDisabled()).toBe(true);
  await shot('new-calendar-refused');
  expect((await fhir<Bundle>('GET', `Schedule?actor=Practitioner/${doctor.json.id}&_summary=count`)).json.total).toBe(2);
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

test('audit log ("Protokoll"): the page\'s own accesses, one patient\'s at a click, none from tomorrow on', async () => {
  await page.goto(`${uiUrl}/#/audit`);
  await page.waitForSelector('tr[data-audit-event]');
  const rows = page.locator('tr[data-audit-event]');
  expect(await rows.count()).toBeGreaterThan(3);
  // The calendar the earlier test created: each Slot's create, by this owner's card through terminus-client.
  const table = (await page.locator('table.list').textContent())!;
  expect(table).toMatch(/create.*Slot\//);
  expect(table).toContain('terminus-client');
  const patientLink = page.locator('tr[data-audit-event] td a').first();
  const patient = (await patientLink.textContent())!;
  await patientLink.click();
  await page.waitForFunction((p) => (globalThis as unknown as { location: { hash: string } }).location.hash.includes(encodeURIComponent(`Patient/${p}`)), patient);
  await page.waitForSelector('tr[data-audit-event]');
  const shown = await page.locator('tr[data-audit-event] td:nth-child(7)').allTextContents();
  expect(new Set(shown)).toEqual(new Set([patient]));
  await shot('audit-log');
  const tomorrow = new Date(Date.now() + 2 * 86_400_000).toISOString().slice(0, 10);
  await page.goto(`${uiUrl}/#/audit?from=${tomorrow}`);
  await page.waitForSelector('text=Keine Einträge.');
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

describe('a repository holding only the ISiK fixture, no demo data (PostgreSQL where DATABASE_URL is set)', () => {
  const OWNER = '1-2-DEV-PRAXIS-P256';
  let isik: RunningServer;
  let isikOrigin: string;
  let owner: ClientSession;
  let stale: UiProcess;
  let isikUi: UiProcess;
  let isikContext: BrowserContext;
  let tab: Page;
  const home = () => path.join(dir, 'isik-ui-home');
  const session = () => createClient({ server: isikOrigin, card: path.join(dir, 'pki', 'card-p256.pem'), key: path.join(dir, 'pki', 'card-p256.key.pem'), home: home(), password: PASSWORD });
  const isikFhir = <T = any>(method: string, p: string, body?: unknown) => fhirAt<T>(owner, isikOrigin, method, p, body);
  let nextMonday: string;
  let mondaySlot: Slot;

  beforeAll(async () => {
    const port = await freePort();
    isikOrigin = `http://127.0.0.1:${port}`;
    // No REPOSITORY_OWNERS yet: the practice logs in before the server lists its card.
    const ctx = await createTestContext({ env: { PUBLIC_URL: isikOrigin, GUARD_ENFORCEMENT: 'on', DEMO_DATA: 'false', CARD_TRUST_ANCHORS: path.join(dir, 'pki', 'card-ca.pem') } });
    // What `terminus import fixtures/isik-stufe5.json` does.
    expect(await importResources(composeParts(ctx).fhir, readResourceFile(projectPath('fixtures', 'isik-stufe5.json')))).toBe(12);
    isik = await startServer({ ...ctx.config, port, host: '127.0.0.1' }, ctx);
    const early = await session();
    expect((await early.login()).scope.split(' ')).not.toContain('system/*.cruds');
    early.close();
    // The operator adds the card to REPOSITORY_OWNERS: the live configuration of the running server
    // stands for a restart with the variable set (same store, same signing keys, same sessions).
    ctx.config.repositoryOwners.push(OWNER);
    stale = await startUi(isikOrigin, home());
    await stopUi(stale);
    // Logging in again, as the warning says, gives the owner scopes.
    owner = await session();
    expect((await owner.login()).scope.split(' ')).toContain('system/*.cruds');

    // A slot on the next Monday (Berlin) in the fixture's calendar: the first week with slots.
    const today = wallDate(new Date(), 'Europe/Berlin');
    nextMonday = addCalendarDays(today, 8 - isoWeekday(today));
    const created = await isikFhir<Slot>('POST', 'Slot', { resourceType: 'Slot', schedule: { reference: 'Schedule/Schedule-Read-Example' }, status: 'free', start: wallTimeToUtc(nextMonday, 10 * 60, 'Europe/Berlin').toISOString(), end: wallTimeToUtc(nextMonday, 10 * 60 + 30, 'Europe/Berlin').toISOString() });
    expect(created.status).toBe(201);
    mondaySlot = created.json;

    // The page as a practice starts it, without --time-zone, on a machine whose TZ names a zone
    // file (as `TZ=:/etc/localtime` does): the page shows that zone, not UTC.
    isikUi = await startUi(isikOrigin, home(), [], { TZ: ':/usr/share/zoneinfo/Europe/Berlin' });
    isikContext = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'de-DE', timezoneId: 'Asia/Tokyo' });
    tab = await isikContext.newPage();
    expect((await tab.goto(isikUi.loginUrl))?.status()).toBe(200);
    await tab.waitForSelector('body[data-ready="true"]');
  }, 240_000);

  afterAll(async () => {
    await isikContext?.close().catch(() => undefined);
    owner?.close();
    await isik?.close();
  }, 60_000);

  test('terminus-client ui says to log in again when the session began before REPOSITORY_OWNERS listed the card', () => {
    const warning = stale.output().split('\n').find((l) => l.includes('warning'));
    expect(warning).toContain('it began before the server listed this card in REPOSITORY_OWNERS');
    expect(warning).toContain(`Log in again to get them: terminus-client login --server ${isikOrigin} --card ${path.join(dir, 'pki', 'card-p256.pem')} --key ${path.join(dir, 'pki', 'card-p256.key.pem')}`);
    expect(warning).not.toContain("put its Telematik-ID into the server's REPOSITORY_OWNERS");
    // With a session from after that, no warning.
    expect(isikUi.output()).not.toContain('warning');
  });

  test("the first screen opens on the week of the next slot; the fixture's slots show in their week, in this machine's zone, which the page can change", async () => {
    await tab.goto(`${isikUi.url}/#/week`);
    await tab.waitForSelector(`[data-slot="${mondaySlot.id}"][data-status="free"]`);
    await expect(visibleText(tab, '.week .sub')).resolves.toContain(new Intl.DateTimeFormat('de-DE', { timeZone: 'UTC', weekday: 'long', day: 'numeric', month: 'long', year: 'numeric' }).format(new Date(`${nextMonday}T00:00:00Z`)));
    await expect(tab.locator('#jump').inputValue()).resolves.toBe(nextMonday);
    await shot('isik-first-week', tab);

    // The machine's zone (from TZ), though the browser's is Tokyo.
    await expect(tab.locator('#tz option:checked').textContent()).resolves.toBe('Europe/Berlin (Rechner)');
    await tab.goto(`${isikUi.url}/#/week?calendar=Schedule-Read-Example&date=2027-01-01`);
    await tab.waitForSelector('[data-slot="Slot-Free-Example"][data-status="free"]');
    await expect(tab.locator('[data-slot="Slot-Free-Example"]').textContent()).resolves.toMatch(/^10:00–/);
    await expect(tab.locator('[data-slot="Slot-Read-Example"]').textContent()).resolves.toMatch(/^14:00–15:00 belegt/);
    await expect(visibleText(tab, '.week .sub')).resolves.toContain('Zeiten in Europe/Berlin');
    await shot('isik-week', tab);

    await tab.locator('#tz').selectOption('America/New_York');
    await tab.waitForSelector('text=Zeiten in America/New_York');
    await expect(tab.locator('[data-slot="Slot-Free-Example"]').textContent()).resolves.toMatch(/^04:00–/);
    await tab.reload();
    await tab.waitForSelector('[data-slot="Slot-Free-Example"]');
    await expect(tab.locator('#tz').inputValue()).resolves.toBe('America/New_York');
    await tab.locator('#tz').selectOption('Europe/Berlin');
    await tab.waitForSelector('text=Zeiten in Europe/Berlin');
  });

  test('participants, statuses and services read in German', async () => {
    await tab.goto(`${isikUi.url}/#/appointment/Appointment-Read-Example`);
    await tab.waitForSelector('.detail h1');
    const detail = await visibleText(tab, '.detail');
    expect(detail).toMatch(/Max Graf von und zu Mustermann \(Patient\/in, /);
    expect(detail).toMatch(/Dr\. Walter Musterarzt \(Behandler\/in, /);
    expect(detail).not.toMatch(/\((Patient|Practitioner), (accepted|declined|tentative|needs-action)\)|Neurology/);
    // Service type 177 without a text: its German name.
    expect(detail).toMatch(/Leistung\s+Neurologie/);
    await shot('isik-detail', tab);
  });

  test('a calendar with a free-text service type; the fixture\'s service types offered; overlaps with its slots block "create"', async () => {
    await tab.goto(`${isikUi.url}/#/new-calendar`);
    await tab.waitForSelector('form.calendar-form');
    await expect(tab.locator('.new-calendar .sub').innerText()).resolves.toMatch(/Zeiten in Zeitzone\s+Europe\/Berlin/);
    const services = await tab.locator('#f-service option').allTextContents();
    expect(services).toEqual(['Bitte wählen …', 'Neurologische Sprechstunde', 'Andere Leistung (Freitext) …']);
    await expect(tab.locator('#f-specialty option').allTextContents()).resolves.toEqual(['Bitte wählen …', 'Neurologie']);
    expect(await tab.locator('#f-service-text').isVisible()).toBe(false);

    const fill = async (from: string, to: string, hours: Record<string, string>) => {
      await tab.getByLabel('Name des Kalenders').fill('Akutsprechstunde Dr. Musterarzt');
      await tab.getByLabel('Für wen').selectOption('Practitioner/Practitioner-Read-Example');
      await tab.getByLabel('Leistung', { exact: true }).selectOption({ label: 'Andere Leistung (Freitext) …' });
      await tab.getByLabel('Leistung als Freitext').fill('Akutsprechstunde');
      await tab.getByLabel('Fachrichtung').selectOption({ label: 'Neurologie' });
      await tab.getByLabel('Länge eines Termins').fill('30');
      await tab.getByLabel('Erster Tag').fill(from);
      await tab.getByLabel('Letzter Tag').fill(to);
      for (const day of ['Montag', 'Dienstag', 'Mittwoch', 'Donnerstag', 'Freitag', 'Samstag', 'Sonntag']) await tab.getByLabel(day, { exact: true }).fill(hours[day] ?? '');
    };
    const create = tab.locator('[data-action="create"]');

    // Over the fixture's Friday, 1 January 2027: its slots overlap.
    await fill('2027-01-01', '2027-01-01', { Freitag: '09:00-12:00' });
    await tab.locator('[data-action="preview"]').click();
    await tab.waitForSelector('text=Überschneidungen mit bestehenden Zeiten');
    expect(await create.isDisabled()).toBe(true);
    await expect(visibleText(tab, '.preview .error')).resolves.toContain('Fr., 01.01.2027, 10:00–10:30 überschneidet sich mit „Neurologische Sprechstunde Dr. Musterarzt“ (Fr., 01.01.2027, 10:00–');
    await shot('isik-overlap', tab);

    // Mondays in May 2031 (5th to 9th: one Monday), 08:00-09:00 Berlin: two slots.
    await fill('2031-05-05', '2031-05-09', { Montag: '08:00-09:00' });
    await tab.locator('[data-action="preview"]').click();
    await tab.waitForSelector('text=2 Termine');
    await create.click();
    await tab.waitForSelector('text=mit 2 Terminen angelegt');
    await shot('isik-created', tab);
    const schedules = (await isikFhir<Bundle>('GET', 'Schedule?actor=Practitioner/Practitioner-Read-Example&_count=10')).json.entry!.map((e) => e.resource as Schedule);
    const made = schedules.find((x) => x.id !== 'Schedule-Read-Example')!;
    expect(made.serviceType).toEqual([{ text: 'Akutsprechstunde' }]);
    expect(made.specialty).toEqual([{ coding: [{ system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'NEUR', display: 'Neurologie' }] }]);
    const slots = (await isikFhir<Bundle>('GET', `Slot?schedule=Schedule/${made.id}&_sort=start`)).json.entry!.map((e) => e.resource as Slot);
    expect(slots.map((x) => [Date.parse(x.start), x.serviceType])).toEqual([
      [Date.parse('2031-05-05T06:00:00Z'), [{ text: 'Akutsprechstunde' }]],
      [Date.parse('2031-05-05T06:30:00Z'), [{ text: 'Akutsprechstunde' }]],
    ]);
    // Its week shows the new calendar with its free-text name.
    await tab.getByRole('link', { name: 'Wochenansicht öffnen' }).click();
    await tab.waitForSelector(`[data-slot="${slots[0].id}"][data-status="free"]`);
    await expect(tab.locator('h1').textContent()).resolves.toBe('Akutsprechstunde Dr. Musterarzt');
  });

  test('a repository that cannot be reached is reported in German', async () => {
    await isik.close();
    await tab.goto(`${isikUi.url}/#/week?calendar=Schedule-Read-Example&date=2027-01-01`);
    await tab.reload();
    const alert = tab.locator('main .error[role="alert"]');
    await alert.waitFor();
    const text = await alert.innerText();
    expect(text).toContain(`Das Repository unter ${isikOrigin} ist nicht erreichbar (Verbindung abgelehnt).`);
    expect(text).not.toMatch(/cannot be reached|ECONNREFUSED/);
    await shot('isik-unreachable', tab);
  });
});
