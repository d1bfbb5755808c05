import { t } from './i18n.js';
import { h, state } from './page.js';

/** The cancellation-reason question (ISiKTerminCancelationReason) in place of the buttons. */
export function askReason(container, action, onSubmit, onAbort) {
  state.busy = true;
  const id = `reason-${Math.random().toString(36).slice(2)}`;
  const select = h('select', { id, required: true }, h('option', { value: '' }, t('reason.choose')), ['pat', 'prov', 'maint', 'meds-inc', 'other'].map((c) => h('option', { value: c }, t(`reason.${c}`))));
  const form = h(
    'form',
    {
      class: 'reason',
      onsubmit: (e) => {
        e.preventDefault();
        if (!select.value) return select.reportValidity();
        onSubmit(select.value);
      },
    },
    h('label', { for: id }, t('reason.label')),
    select,
    h('button', { type: 'submit', class: 'danger', 'data-action': `do-${action}` }, t(action === 'decline' ? 'action.doDecline' : 'action.doCancel')),
    h(
      'button',
      {
        type: 'button',
        onclick: () => {
          state.busy = false;
          onAbort();
        },
      },
      t('action.abort'),
    ),
  );
  container.replaceChildren(form);
  select.focus();
}
