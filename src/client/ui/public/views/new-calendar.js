// A new calendar: a Schedule with its Slots from opening hours, previewed for overlaps before it is created.
import { t } from '../i18n.js';
import { addDays, clock, roleLabel, today, tz, when } from '../format.js';
import { showError } from '../messages.js';
import { api, h, LocalProblem, state } from '../page.js';

const DAYS = [1, 2, 3, 4, 5, 6, 7];

export async function newCalendarView() {
  state.options ??= await api('GET', 'options');
  const o = state.options;
  const zoneName = h('span', { class: 'tz-name' }, tz());
  const section = h('section', { class: 'new-calendar' }, h('h1', {}, t('new.title')), h('p', { class: 'sub' }, t('new.timeZone'), zoneName));
  const field = (id, label, input, hint) => h('div', { class: 'field' }, h('label', { for: id }, label), input, hint ? h('small', { id: `${id}-hint` }, hint) : '');
  const choose = () => h('option', { value: '' }, t('reason.choose'));
  // ISiK binds no value set to Schedule.serviceType: the repository's service types, or free text.
  const FREE_TEXT = 'text';
  const inputs = {
    name: h('input', { id: 'f-name', required: true, maxlength: '200', autocomplete: 'off' }),
    actor: h('select', { id: 'f-actor', required: true }, choose(), o.actors.map((a) => h('option', { value: a.reference }, `${a.display} (${roleLabel(a.type)})`))),
    serviceType: h(
      'select',
      { id: 'f-service', required: true },
      o.serviceTypes.length ? choose() : '',
      o.serviceTypes.map((s, i) => h('option', { value: String(i) }, s.label)),
      h('option', { value: FREE_TEXT, selected: !o.serviceTypes.length }, t('new.serviceOther')),
    ),
    serviceText: h('input', { id: 'f-service-text', maxlength: '200', autocomplete: 'off', 'aria-describedby': 'f-service-text-hint' }),
    specialty: h('select', { id: 'f-specialty', required: true }, choose(), o.specialties.map((s, i) => h('option', { value: String(i) }, s.label))),
    slotMinutes: h('input', { id: 'f-minutes', type: 'number', min: '5', max: '480', step: '5', value: '15', required: true }),
    from: h('input', { id: 'f-from', type: 'date', value: addDays(today(), 1), required: true }),
    to: h('input', { id: 'f-to', type: 'date', value: addDays(today(), 28), required: true }),
    manual: h('input', { id: 'f-manual', type: 'checkbox' }),
  };
  const serviceTextField = field('f-service-text', t('new.serviceText'), inputs.serviceText, t('new.serviceTextHint'));
  const showServiceText = () => {
    const free = inputs.serviceType.value === FREE_TEXT;
    serviceTextField.hidden = !free;
    inputs.serviceText.required = free;
  };
  inputs.serviceType.addEventListener('change', showServiceText);
  showServiceText();
  const hours = Object.fromEntries(DAYS.map((d) => [d, h('input', { id: `f-hours-${d}`, value: d <= 5 ? '08:00-12:00' : '', placeholder: '08:00-12:00, 14:00-18:00', 'aria-describedby': 'hours-hint', autocomplete: 'off' })]));
  const result = h('div', { class: 'preview', 'aria-live': 'polite' });
  const createButton = h('button', { type: 'button', class: 'primary', disabled: true, 'data-action': 'create', 'aria-describedby': 'create-hint', onclick: () => submit(true) }, t('new.create'));
  const createHint = h('small', { id: 'create-hint', class: 'hint' }, t('new.previewFirst'));
  // Creating needs a preview of exactly this form without overlaps.
  const blockCreate = (hint) => {
    createButton.disabled = true;
    createHint.textContent = hint;
  };
  state.onZoneChange = () => {
    zoneName.textContent = tz();
    result.replaceChildren();
    blockCreate(t('new.previewFirst'));
  };

  const read = () => {
    const hoursValue = {};
    for (const d of DAYS) {
      const raw = hours[d].value.trim();
      if (!raw) continue;
      hoursValue[d] = raw.split(/\s*[,;]\s*/).map((range) => {
        const m = /^(\d{1,2}:\d{2})\s*[-–]\s*(\d{1,2}:\d{2})$/.exec(range);
        if (!m) throw new LocalProblem(t('new.badHours', { day: t(`day.${d}`), value: range }), `hours.${d}`);
        return [m[1].padStart(5, '0'), m[2].padStart(5, '0')];
      });
    }
    const actor = o.actors.find((a) => a.reference === inputs.actor.value);
    const free = inputs.serviceType.value === FREE_TEXT;
    return {
      name: inputs.name.value,
      actor: inputs.actor.value,
      actorDisplay: actor?.display,
      serviceType: free ? { text: inputs.serviceText.value.trim() } : (o.serviceTypes[Number(inputs.serviceType.value)]?.concept ?? null),
      specialty: o.specialties[Number(inputs.specialty.value)]?.coding ?? null,
      hours: hoursValue,
      slotMinutes: Number(inputs.slotMinutes.value),
      from: inputs.from.value,
      to: inputs.to.value,
      manualConfirmation: inputs.manual.checked,
      timeZone: tz(),
    };
  };
  const markField = (err) => {
    for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
    const name = err?.field ?? err?.reason?.field;
    const el = name && (name === 'serviceType' && inputs.serviceType.value === FREE_TEXT ? inputs.serviceText : (inputs[name] ?? hours[/^hours\.([1-7])$/.exec(name)?.[1]]));
    if (el) {
      el.setAttribute('aria-invalid', 'true');
      el.focus();
    }
  };
  const submit = async (create) => {
    state.busy = true;
    if (!create) result.replaceChildren();
    section.querySelector(':scope > .error')?.remove();
    markField(undefined);
    try {
      if (!form.reportValidity()) return;
      const body = read();
      if (!create) {
        const p = await api('POST', 'calendars/preview', body);
        const conflicts = p.conflicts.length;
        result.replaceChildren(
          h('p', {}, t('new.previewResult', { slots: p.slots, first: when(p.first?.start), last: when(p.last?.start) })),
          h('ul', { class: 'per-day' }, DAYS.filter((d) => p.perWeekday[d]).map((d) => h('li', {}, `${t(`day.${d}`)}: ${p.perWeekday[d]}`))),
          conflicts
            ? h(
                'div',
                { class: 'error', role: 'alert', 'data-conflicts': String(conflicts) },
                h('strong', {}, t('new.conflicts')),
                h('p', {}, t('new.conflictsBlock')),
                h('ul', {}, p.conflicts.slice(0, 10).map((c) => h('li', {}, t('new.conflictItem', { start: `${when(c.start)}–${clock(c.end)}`, calendar: c.calendar || '—', existing: `${when(c.existingStart)}–${clock(c.existingEnd)}` })))),
                conflicts > 10 ? h('p', {}, t('new.moreConflicts', { n: conflicts - 10 })) : '',
              )
            : h('p', { class: 'ok' }, t('new.noConflicts')),
        );
        if (conflicts) blockCreate(t('new.createBlocked'));
        else {
          createButton.disabled = false;
          createHint.textContent = '';
        }
      } else {
        const c = await api('POST', 'calendars', body);
        state.calendars = null;
        state.options = null;
        result.replaceChildren(h('p', { class: 'ok', role: 'status' }, t('new.created', { name: body.name, slots: c.slots }), ' ', h('a', { href: `#/week?calendar=${encodeURIComponent(c.schedule)}&date=${body.from}` }, t('new.open'))));
        blockCreate('');
      }
    } catch (err) {
      showError(section, err);
      markField(err);
      // A refused calendar: its preview no longer holds.
      if (create) {
        result.replaceChildren();
        blockCreate(t('new.previewFirst'));
      }
    } finally {
      state.busy = false;
    }
  };
  const form = h(
    'form',
    {
      class: 'calendar-form',
      oninput: () => blockCreate(t('new.previewFirst')),
      onchange: () => blockCreate(t('new.previewFirst')),
      onsubmit: (e) => {
        e.preventDefault();
        submit(false);
      },
    },
    field('f-name', t('new.name'), inputs.name),
    field('f-actor', t('new.actor'), inputs.actor),
    field('f-service', t('new.serviceType'), inputs.serviceType),
    serviceTextField,
    field('f-specialty', t('new.specialty'), inputs.specialty),
    field('f-minutes', t('new.slotMinutes'), inputs.slotMinutes),
    h('div', { class: 'row' }, field('f-from', t('new.from'), inputs.from), field('f-to', t('new.to'), inputs.to)),
    h('div', { class: 'field check' }, inputs.manual, h('label', { for: 'f-manual' }, t('new.manual'))),
    h('fieldset', {}, h('legend', {}, t('new.hours')), h('small', { id: 'hours-hint' }, t('new.hoursHint')), DAYS.map((d) => field(`f-hours-${d}`, t(`day.${d}`), hours[d]))),
    h('div', { class: 'buttons' }, h('button', { type: 'submit', 'data-action': 'preview' }, t('new.preview')), createButton, createHint),
  );
  section.append(form, result);
  return section;
}
