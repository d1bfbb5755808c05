import type { Resource } from '@medplum/fhirtypes';
import { profile, stripVersion } from './profile-registry';
import { ISIK_PROFILE } from '../../common/vocabulary';

export type ProfileSelection = 'claimed' | 'type-default';

/**
 * The profile every write of the type has to meet in this repository (ISiK Terminplanung 6.0.0).
 * Patient is absent on purpose: patients created by $book "sind bis zur Vervollständigung nur
 * gegen den Kernstandard valide" (ISiKTermin, participant:AkteurPatient), so ISiKPatient applies
 * only when claimed.
 */
const REQUIRED_BY_TYPE: Readonly<Record<string, string>> = {
  Appointment: ISIK_PROFILE.Appointment,
  Schedule: ISIK_PROFILE.Schedule,
  Slot: ISIK_PROFILE.Slot,
  HealthcareService: ISIK_PROFILE.HealthcareService,
};

export function requiredProfile(resourceType: string): string | undefined {
  return REQUIRED_BY_TYPE[resourceType];
}

/** Known profiles to check, each once; claimed profiles we do not know are not checked. */
export function profilesToApply(resource: Resource, selection: ProfileSelection): string[] {
  const urls = new Set<string>();
  for (const claimed of resource.meta?.profile ?? []) {
    const sd = profile(claimed);
    if (sd && sd.type === resource.resourceType) urls.add(stripVersion(claimed));
  }
  const required = selection === 'type-default' ? requiredProfile(resource.resourceType) : undefined;
  if (required) urls.add(required);
  return [...urls];
}
