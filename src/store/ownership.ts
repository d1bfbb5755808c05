/** Types whose resources belong to the institution that created them (CONTRACT section 4). */
const INSTITUTION_OWNED = new Set(['Appointment', 'Subscription']);

/** Who writes: an institution (maybe one of REPOSITORY_OWNERS), or the repository itself. */
export interface Writer {
  institution?: string;
  isOwner: boolean;
}

/**
 * Owner recorded when a resource is created. Appointments and Subscriptions always belong to the
 * creating institution, also when it is a repository owner (owners see all of them anyway, other
 * institutions see none). Anything else a repository owner writes (calendars, services, code
 * systems) belongs to the repository (`null`) and is visible to all; the repository itself
 * (imports, jobs without a requester) writes `null` too.
 */
export function ownerForWrite(type: string, writer: Writer | undefined): string | null {
  if (!writer?.institution) return null;
  return writer.isOwner && !INSTITUTION_OWNED.has(type) ? null : writer.institution;
}
