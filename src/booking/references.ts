/**
 * Reads the id out of a reference to a resource of this repository: `Slot/abc`,
 * `Slot/abc/_history/2`, or an absolute URL on the FHIR base (`https://host/fhir/Slot/abc`).
 */
export function localId(reference: string | undefined, type: string): string | undefined {
  if (!reference) return undefined;
  const m = new RegExp(`(?:^|/)${type}/([A-Za-z0-9\\-.]{1,64})(?:/_history/[^/]+)?$`).exec(reference);
  return m?.[1];
}

/** CONTRACT section 7: `cancelled-appt-id` holds an id, `Appointment/id` or an absolute URL. */
export function appointmentIdOf(value: string): string | undefined {
  const trimmed = value.trim();
  if (/^[A-Za-z0-9\-.]{1,64}$/.test(trimmed)) return trimmed;
  return localId(trimmed, 'Appointment');
}

export const ref = (type: string, id: string): string => `${type}/${id}`;
