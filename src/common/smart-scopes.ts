/**
 * SMART App Launch v2 scopes (`system/Appointment.rs`, `patient/Appointment.cru`), the grammar
 * the authorization server grants and the enforcement point and FHIR layer check. `system/` is an
 * institution's or a service's reach, `patient/` a patient's own compartment (docs/requirements.md, Patients (authorization code flow)). A
 * leaf: imports nothing.
 */
const SMART = /^(system|patient)\/(\*|[A-Z][A-Za-z]+)\.(c?r?u?d?s?)$/;

/** The context of a scope: what the caller's identity may ask for. */
export type ScopeContext = 'system' | 'patient';

/** SMART v2 permissions (`system/Appointment.crus`). */
export type Permission = 'c' | 'r' | 'u' | 'd' | 's';

/**
 * What one interaction needs, written in the `system/` context (`system/Appointment.c`); the
 * enforcement point reads it as `patient/` for a patient. Type `*`: every type.
 */
export type ScopeNeed = `system/${string}.${Permission}`;

export const scopeNeed = (type: string, permission: Permission): ScopeNeed => `system/${type}.${permission}`;

/**
 * SMART v2: `system/Appointment.rs` is covered by itself or by `system/*.cruds` (permissions a
 * subset, the same context: a `patient/` scope never covers a `system/` need, nor the reverse).
 */
export function scopeCovered(requested: string, allowed: string[]): boolean {
  if (allowed.includes(requested)) return true;
  const r = SMART.exec(requested);
  if (!r || !r[3]) return false;
  return allowed.some((a) => {
    const m = SMART.exec(a);
    return m !== null && m[1] === r[1] && (m[2] === '*' || m[2] === r[2]) && [...r[3]].every((p) => m[3].includes(p));
  });
}
