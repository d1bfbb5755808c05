export { book, type BookInput, type BookResult } from './book';
export { actorOf, internalRequest, observerFor, registerBookingHooks } from './hooks';
export type { Actor, BookingContext } from './actor';
export { appointmentIdOf } from './references';
export { changedImmutables, IMMUTABLE_ELEMENTS } from './immutables';
export { BOOKING_CONFIRMATION_URL, REPLACES_URL } from './status';
export { checkProposal } from './proposal';
