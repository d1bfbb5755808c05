export { book, type BookInput, type BookResult } from './book';
export { bookingInterceptors } from './interceptors';
export { bookingContext, type BookingContext } from './context';
export { appointmentIdOf } from './references';
export { changedImmutables, IMMUTABLE_ELEMENTS } from './immutables';
export { BOOKING_CONFIRMATION_URL, REPLACES_URL } from '../common/vocabulary';
export { checkProposal } from './proposal';
export type { AppointmentEventType } from './outbox';
export { retireFreeSlots, SlotRetention } from './slot-retention';
