import { OpeningHoursError, slotWindows, wallTimeToUtc, type SlotPlan } from '../../src/common/opening-hours';

/** Opening hours to slot windows (the demo practice and the practice page's "new calendar"). */
const plan = (o: Partial<SlotPlan> = {}): SlotPlan => ({ hours: { 1: [['08:00', '10:00']] }, slotMinutes: 30, from: '2031-03-03', to: '2031-03-09', timeZone: 'Europe/Berlin', ...o });

test('one week of Monday mornings in Berlin winter time: four 30-minute slots from 07:00 UTC', () => {
  const w = slotWindows(plan());
  expect(w.map((x) => [x.date, x.time, x.start.toISOString(), x.end.toISOString()])).toEqual([
    ['2031-03-03', '08:00', '2031-03-03T07:00:00.000Z', '2031-03-03T07:30:00.000Z'],
    ['2031-03-03', '08:30', '2031-03-03T07:30:00.000Z', '2031-03-03T08:00:00.000Z'],
    ['2031-03-03', '09:00', '2031-03-03T08:00:00.000Z', '2031-03-03T08:30:00.000Z'],
    ['2031-03-03', '09:30', '2031-03-03T08:30:00.000Z', '2031-03-03T09:00:00.000Z'],
  ]);
});

test('across the spring DST switch the wall-clock times stay and the UTC times move by an hour', () => {
  // 2031-03-30 is the last Sunday of March: Berlin goes from UTC+1 to UTC+2.
  const w = slotWindows(plan({ hours: { 1: [['08:00', '08:30']], 6: [['08:00', '08:30']] }, from: '2031-03-29', to: '2031-03-31' }));
  expect(w.map((x) => x.start.toISOString())).toEqual(['2031-03-29T07:00:00.000Z', '2031-03-31T06:00:00.000Z']);
});

test('a wall time that does not exist (02:30 on the spring switch) gives no slot; the hour after does', () => {
  const w = slotWindows(plan({ hours: { 7: [['02:00', '04:00']] }, slotMinutes: 60, from: '2031-03-30', to: '2031-03-30' }));
  expect(w.map((x) => x.time)).toEqual(['03:00']);
  expect(wallTimeToUtc('2031-03-30', 3 * 60, 'Europe/Berlin').toISOString()).toBe('2031-03-30T01:00:00.000Z');
});

test('a range shorter than one slot gives nothing; a remainder at the end of a range is dropped', () => {
  expect(slotWindows(plan({ hours: { 1: [['08:00', '08:20']] } }))).toEqual([]);
  expect(slotWindows(plan({ hours: { 1: [['08:00', '09:10']] } })).map((x) => x.time)).toEqual(['08:00', '08:30']);
});

test.each([
  ['slot length 0', { slotMinutes: 0 }, 'slotMinutes'],
  ['slot length 7.5', { slotMinutes: 7.5 }, 'slotMinutes'],
  ['a date that is not a date', { from: '2031-02-30x' }, 'from'],
  ['a range ending before it starts', { from: '2031-03-10', to: '2031-03-01' }, 'to'],
  ['a range over 400 days', { from: '2031-01-01', to: '2032-12-31' }, 'to'],
  ['an unknown time zone', { timeZone: 'Mars/Olympus' }, 'timeZone'],
  ['a time like 8:00', { hours: { 1: [['8:00', '10:00']] } }, 'hours.1'],
  ['hours ending before they start', { hours: { 2: [['12:00', '08:00']] } }, 'hours.2'],
  ['overlapping hours', { hours: { 3: [['08:00', '12:00'], ['11:00', '13:00']] } }, 'hours.3'],
  ['weekday 8', { hours: { 8: [['08:00', '09:00']] } as never }, 'hours'],
])('refused, naming the field: %s', (_name, o, field) => {
  let err: unknown;
  try {
    slotWindows(plan(o as Partial<SlotPlan>));
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(OpeningHoursError);
  expect((err as OpeningHoursError).field).toBe(field);
});

test('more slots than allowed is refused before they are all made', () => {
  expect(() => slotWindows(plan({ hours: { 1: [['00:00', '23:55']], 2: [['00:00', '23:55']] }, slotMinutes: 5, from: '2031-01-01', to: '2031-12-31' }), 1000)).toThrow(/more than 1000 slots/);
});
