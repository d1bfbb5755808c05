import type { AuditEvent, Bundle } from '@medplum/fhirtypes';
import { TELEMATIK_ID_SYSTEM } from '../../common/vocabulary';
import { type Fhir, FhirError, outcome } from './fhir';

/** One line of the practice's audit log: who did what to which data, when, from where, with what result. */
export interface AuditLine {
  id: string;
  recorded: string;
  /** restful-interaction or security event code, with the operation (`operation $book`). */
  what: string;
  action: string | null;
  outcome: string;
  failure: string | null;
  user: string | null;
  userId: string | null;
  client: string | null;
  address: string | null;
  patient: string | null;
  entities: string[];
}

export interface AuditFilter {
  patient?: string;
  appointment?: string;
  /** A Telematik-ID, KVNR or client_id. */
  user?: string;
  from?: string;
  to?: string;
  cursor?: string;
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const PAGE = 50;

/**
 * The audit log as the page shows it: AuditEvents about a patient or an appointment, by a user,
 * within days, newest first, a page at a time (the server's cursor continues it).
 */
export async function auditLog(fhir: Fhir, f: AuditFilter): Promise<{ lines: AuditLine[]; next: string | null }> {
  const q = new URLSearchParams({ _count: String(PAGE) });
  if (f.patient) q.append('patient', f.patient.startsWith('Patient/') ? f.patient : `Patient/${f.patient}`);
  if (f.appointment) q.append('entity', f.appointment.startsWith('Appointment/') ? f.appointment : `Appointment/${f.appointment}`);
  if (f.user) q.append('agent:identifier', f.user);
  for (const [name, value, prefix] of [
    ['from', f.from, 'ge'],
    ['to', f.to, 'le'],
  ] as const) {
    if (!value) continue;
    if (!DATE.test(value)) throw new FhirError(400, outcome('invalid', `${name}: "${value}" is not a date (YYYY-MM-DD)`, name), { code: 'date' });
    q.append('date', `${prefix}${value}`);
  }
  if (f.cursor) q.append('_cursor', f.cursor);
  const bundle = await fhir.request<Bundle<AuditEvent>>('GET', `AuditEvent?${q}`);
  const next = bundle.link?.find((l) => l.relation === 'next')?.url;
  return { lines: (bundle.entry ?? []).flatMap((e) => (e.resource ? [auditLine(e.resource)] : [])), next: next ? new URL(next).searchParams.get('_cursor') : null };
}

function auditLine(e: AuditEvent): AuditLine {
  const user = e.agent?.find((a) => a.requestor);
  const client = e.agent?.[0];
  const [first, ...more] = e.subtype ?? [];
  const operation = more.find((c) => c.code === 'operation')?.display;
  const userId = user?.who?.identifier?.value ?? null;
  return {
    id: e.id as string,
    recorded: e.recorded,
    what: [first?.code ?? e.type.code, operation].filter(Boolean).join(' '),
    action: e.action ?? null,
    outcome: e.outcome ?? '0',
    failure: e.outcomeDesc ?? null,
    user: user ? (user.name ?? user.who?.display ?? userId) : null,
    userId: user?.who?.identifier?.system === TELEMATIK_ID_SYSTEM || userId ? userId : null,
    client: client?.who?.display ?? client?.who?.identifier?.value ?? null,
    address: client?.network?.address ?? null,
    patient: e.entity?.find((x) => x.type?.code === '1')?.what?.reference ?? null,
    entities: (e.entity ?? []).filter((x) => x.role?.code === '4' && x.what?.reference).map((x) => x.what!.reference!),
  };
}
