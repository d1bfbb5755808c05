import type { AppointmentParticipant, HealthcareService } from '@medplum/fhirtypes';
import { unprocessable } from '../fhir/outcomes';
import type { BookingContext } from './actor';
import { localId } from './references';

/**
 * An inactive, deleted or missing HealthcareService takes no bookings, whether the appointment
 * names it as participant or reaches it through its Schedule's actor. Coded as for patients
 * (patients.ts): missing or deleted is `not-found`, inactive `business-rule`, both 422.
 */
export async function checkServices(c: BookingContext, participants: AppointmentParticipant[]): Promise<void> {
  for (const [i, p] of participants.entries()) {
    const id = localId(p.actor?.reference, 'HealthcareService');
    if (!id) continue;
    const expression = `Appointment.participant[${i}].actor`;
    const row = await c.repo.readRow('HealthcareService', id);
    if (!row || row.deleted) throw unprocessable(`HealthcareService/${id} does not exist`, expression, 'not-found');
    if ((row.resource as HealthcareService).active === false) throw unprocessable(`HealthcareService/${id} is not active`, expression);
  }
}
