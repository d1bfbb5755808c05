/**
 * The one visibility rule of the repository. Appointments and Subscriptions belong to the
 * institution that created them; everything else, and whatever the repository writes itself,
 * belongs to nobody (`null`) and is visible to all. Repository owners (REPOSITORY_OWNERS) see
 * and manage everything. The store's SQL form of the rule is `ownerCondition` in
 * store/search/sql.ts; it must say the same.
 */
export interface Viewer {
  /** Telematik-ID of the institution asking. */
  institution: string;
  /** A repository owner, or the repository itself acting for one. */
  seesAll: boolean;
}

/** Types whose resources belong to the institution that created them. */
const INSTITUTION_OWNED = new Set(['Appointment', 'Subscription']);

/** Who writes: an institution (maybe one of REPOSITORY_OWNERS), or the repository itself. */
export interface Writer {
  institution?: string;
  isOwner: boolean;
}

/** Can `viewer` see what `owner` owns? No viewer: the repository itself, which sees all. */
export function canSee(owner: string | null, viewer?: Viewer): boolean {
  return !viewer || viewer.seesAll || owner === null || owner === viewer.institution;
}

/**
 * Owner recorded when a resource is created. Appointments and Subscriptions always belong to the
 * creating institution, also when it is a repository owner (owners see all of them anyway, other
 * institutions see none). Anything else a repository owner writes (calendars, services, code
 * systems) belongs to the repository (`null`); the repository itself (imports, jobs without a
 * requester) writes `null` too.
 */
export function ownerForWrite(type: string, writer: Writer | undefined): string | null {
  if (!writer?.institution) return null;
  return writer.isOwner && !INSTITUTION_OWNED.has(type) ? null : writer.institution;
}
