import crypto from 'node:crypto';
import { auditEvent, auditEventJson, recordColumns, redacted, type AuditRecord } from '../../src/audit/balp';
import { auditColumns, linkHash } from '../../src/audit/chain';
import { parseRecord, recordJson, storedEvent, storedEventJson } from '../../src/audit/stored-form';

/**
 * The stored form of an AuditEvent is built without the AuditEvent object in between (it is made
 * for every access): it must be the very text `JSON.stringify(auditEvent(r))` gives, its search
 * columns those `auditColumns` reads from that text (what `terminus audit verify` derives again),
 * and the link the one of the chain's definition.
 */
describe('AuditEvent serialisation', () => {
  const pick = <T>(values: readonly T[], n: number): T => values[n % values.length];

  function record(n: number): AuditRecord {
    const kind = pick(['rest', 'security'] as const, n);
    const bits = (k: number) => (n >> k) & 1;
    return {
      id: crypto.randomUUID(),
      recorded: new Date(Date.UTC(2026, 10, 1) + n * 7919),
      source: pick(['Terminus https://t.example on host-1', 'quote " and \\ and ü \u0001'], n >> 1),
      kind,
      subtype: kind === 'security' ? pick(['client-registered', 'token-issued', 'token-revoked', 'attestation-failed', 'not-a-code'], n >> 2) : pick(['read', 'search-type', 'operation', 'create', 'history-instance'], n >> 2),
      operation: bits(3) ? pick(['book', 'cancel'], n) : undefined,
      action: pick(['C', 'R', 'U', 'D', 'E'] as const, n >> 4),
      outcome: pick(['0', '4', '8'] as const, n >> 5),
      outcomeDesc: bits(6) ? pick(['', '500 exception: "x"'], n) : undefined,
      parties: {
        client: bits(7) ? { clientId: pick(['c1', '', 'c"2'], n), product: bits(8) ? pick(['P', ''], n >> 1) : undefined, version: bits(9) ? pick(['1.0', ''], n >> 2) : undefined, attestation: bits(10) ? pick(['key', ''], n) : undefined } : undefined,
        user: bits(11) ? { identifier: pick([{ system: 'https://gematik.de/fhir/sid/telematik-id', value: '1-ABC' }, { system: '', value: 'v' }, { system: 's', value: '' }], n >> 3), name: bits(12) ? 'Dr. X' : undefined, professionOid: bits(13) ? '1.2.276.0.76.4.50' : undefined } : undefined,
        address: bits(14) ? pick(['10.0.0.1', ''], n) : undefined,
      },
      entities: pick([[], ['Slot/1'], ['Appointment/1/_history/2', 'Slot/2', 'Patient/3'], ['']], n >> 15),
      patient: bits(17) ? pick(['Patient/1', 'Patient/2/_history/3', 'Group/1'], n) : undefined,
      query: bits(18) ? pick(['', 'GET /fhir/Slot?schedule=Schedule/1&access_token=secret', 'GET /fhir/Patient/1/_history'], n >> 1) : undefined,
      requestId: bits(19) ? pick(['r-1', ''], n) : undefined,
      traceId: bits(20) ? pick(['4bf92f3577b34da6a3ce929d0e0e4736', ''], n) : undefined,
    };
  }

  test('auditEventJson and recordColumns give what auditEvent, JSON.stringify and auditColumns give', () => {
    for (let i = 0; i < 4000; i++) {
      const r = record(crypto.randomInt(1 << 21));
      const text = JSON.stringify(auditEvent(r));
      expect(auditEventJson(r)).toBe(text);
      expect(recordColumns(r)).toEqual(auditColumns(JSON.parse(text)));
    }
  });

  test('a stored record renders as the AuditEvent it was made for, holds no credential of its query, and is a third of its size', () => {
    for (let i = 0; i < 4000; i++) {
      const r = record(crypto.randomInt(1 << 21));
      const stored = recordJson(r);
      expect(stored.startsWith('{"v":1,')).toBe(true);
      expect(storedEventJson(stored)).toBe(auditEventJson(r));
      expect(JSON.stringify(storedEvent(stored))).toBe(auditEventJson(r));
      expect(parseRecord(stored)).toEqual({ ...r, query: r.query === undefined ? undefined : redacted(r.query) });
      expect(stored).not.toContain('secret');
    }
    const search = record(0b1_0001_1111_1001_1000_0000 | (1 << 18));
    expect(recordJson(search).length * 3).toBeLessThan(auditEventJson(search).length);
  });

  test('text stored before the record form (the AuditEvent itself) is read as it is; text that is neither is refused', () => {
    const r = record(12345);
    const earlier = JSON.stringify(auditEvent(r));
    expect(storedEventJson(earlier)).toBe(earlier);
    expect(storedEvent(earlier)).toEqual(JSON.parse(earlier));
    expect(parseRecord(earlier)).toBeUndefined();
    const stored = recordJson(r);
    for (const broken of [stored.slice(0, -1), stored.replace('"kind":"', '"kind":"x'), stored.replace(/"entities":\[[^\]]*\]/, '"entities":[1]'), stored.replace(/"id":"[^"]*"/, '"id":7'), `{"v":1,${JSON.stringify({ ...JSON.parse(stored), v: undefined, parties: { user: { name: 'x' } } }).slice(1)}`, `{"v":1,${JSON.stringify({ ...JSON.parse(stored), v: undefined, parties: { client: {} } }).slice(1)}`]) {
      expect(parseRecord(broken)).toBeUndefined();
      expect(() => storedEvent(broken)).toThrow('the stored audit record is not one');
    }
  });

  test('a link is SHA-256 over chain, position, previous link and the SHA-256 of the content', () => {
    const content = JSON.stringify(auditEvent(record(12345)));
    for (const prev of [Buffer.alloc(32), crypto.randomBytes(32), crypto.randomBytes(5)]) {
      const position = Buffer.alloc(12);
      position.writeInt32BE(3, 0);
      position.writeBigInt64BE(77n, 4);
      const contentHash = crypto.createHash('sha256').update(content, 'utf8').digest();
      const expected = crypto.createHash('sha256').update(position).update(prev).update(contentHash).digest();
      expect(linkHash(3, 77n, prev, content).equals(expected)).toBe(true);
    }
  });
});
