/**
 * SMART App Launch v2 system scopes (`system/Appointment.rs`), the grammar the authorization
 * server grants and the enforcement point and FHIR layer check. A leaf: imports nothing.
 */
const SMART = /^system\/(\*|[A-Z][A-Za-z]+)\.(c?r?u?d?s?)$/;

/** SMART v2: `system/Appointment.rs` is covered by itself or by `system/*.cruds` (permissions a subset). */
export function scopeCovered(requested: string, allowed: string[]): boolean {
  if (allowed.includes(requested)) return true;
  const r = SMART.exec(requested);
  if (!r || !r[2]) return false;
  return allowed.some((a) => {
    const m = SMART.exec(a);
    return m !== null && (m[1] === '*' || m[1] === r[1]) && [...r[2]].every((p) => m[2].includes(p));
  });
}
