// The page's views by the name in the address (`#/<name>/<id>?<params>`); an address naming no
// view opens the first. `show(route, page)` returns the view's content (`page.render` draws the
// current view again); `live` views are drawn again when the repository reports a change, unless
// someone is filling in a form. A view in the navigation also has a link in index.html and its
// label `nav.<name>` in i18n.js.
import { appointmentView } from './appointment.js';
import { auditView } from './audit.js';
import { newCalendarView } from './new-calendar.js';
import { pendingView } from './pending.js';
import { subscriptionsView } from './subscriptions.js';
import { weekView } from './week.js';

export const views = {
  week: { show: weekView, live: true },
  pending: { show: pendingView, live: true },
  appointment: { show: appointmentView, live: false },
  'new-calendar': { show: newCalendarView, live: false },
  subscriptions: { show: subscriptionsView, live: true },
  audit: { show: auditView, live: false },
};
