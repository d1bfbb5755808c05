import { verifyAuditTrail } from '../../src/audit';
import { auditSigner } from '../../src/guard';
import type { TestToken } from '../guard/helpers/get-token';
import { call, institution, pepHarness, type PepHarness } from '../guard/pep/helpers';

const OWNER = '1-AUDIT-TAMPER-OWNER';

interface ChainRow {
  id: string;
  chain: number;
  seq: string;
}

/**
 * Tamper evidence: the hash chains and the signed checkpoints find a row altered, removed or
 * inserted with SQL, and a checkpoint altered or removed; a purge by retention is no removal; two
 * replicas writing at once never fork a chain.
 */
describe('audit verify', () => {
  let h: PepHarness;
  let owner: TestToken;
  const verify = () => verifyAuditTrail(h.ctx.db, auditSigner(h.ctx));
  const count = async () => Number((await h.ctx.db.query<{ n: string }>('SELECT count(*)::text AS n FROM audit_event')).rows[0].n);

  /** Runs `change` (SQL on the audit tables), expects verify to name `problem`, and undoes the change. */
  async function tampered(change: string[], undo: string[], problem: RegExp): Promise<void> {
    for (const sql of change) await h.ctx.db.query(sql);
    try {
      const result = await verify();
      expect(result.ok).toBe(false);
      expect(result.ok ? '' : result.problem).toMatch(problem);
    } finally {
      for (const sql of undo) await h.ctx.db.query(sql);
    }
    expect(await verify()).toEqual({ ok: true, count: await count() });
  }

  beforeAll(async () => {
    h = await pepHarness({ env: { REPOSITORY_OWNERS: OWNER }, fixture: true, redis: false });
    owner = await institution(h, { telematikId: OWNER });
    for (let i = 0; i < 6; i++) {
      expect((await call(h, owner, 'GET', '/Appointment/Appointment-Read-Example')).status).toBe(200);
      expect((await call(h, owner, 'POST', '/Patient', { body: { resourceType: 'Patient', active: true } })).status).toBe(201);
    }
    await h.terminus.audit.checkpoint();
    expect((await call(h, owner, 'GET', '/Slot?_count=1')).status).toBe(200);
    await h.terminus.audit.checkpoint();
  });
  afterAll(() => h.close());

  /** A row with rows after it in its chain, and the head of a chain the last checkpoint names. */
  async function middleAndHead(): Promise<{ middle: ChainRow; head: ChainRow }> {
    const { rows } = await h.ctx.db.query<ChainRow>('SELECT id, chain, seq::text AS seq FROM audit_event WHERE chain IS NOT NULL ORDER BY chain, seq');
    const byChain = new Map<number, ChainRow[]>();
    for (const r of rows) byChain.set(r.chain, [...(byChain.get(r.chain) ?? []), r]);
    const longest = [...byChain.values()].sort((a, b) => b.length - a.length)[0];
    expect(longest.length).toBeGreaterThanOrEqual(3);
    return { middle: longest[1], head: longest[longest.length - 1] };
  }

  test('an intact trail: every stored AuditEvent is counted', async () => {
    const n = await count();
    expect(n).toBeGreaterThanOrEqual(13);
    expect(await verify()).toEqual({ ok: true, count: n });
  });

  test('a row whose content was altered is named', async () => {
    const { middle } = await middleAndHead();
    await tampered(
      [`CREATE TABLE saved_row AS SELECT * FROM audit_event WHERE id = '${middle.id}'`, `UPDATE audit_event SET content = replace(content, '"outcome":"0"', '"outcome":"8"') WHERE id = '${middle.id}'`],
      [`UPDATE audit_event e SET content = s.content FROM saved_row s WHERE e.id = s.id`, 'DROP TABLE saved_row'],
      new RegExp(`^altered: audit event ${middle.id} .*its content does not match its link`),
    );
  });

  test('a row whose search columns were altered (hidden from a patient search) is named', async () => {
    const { middle } = await middleAndHead();
    await tampered(
      [`CREATE TABLE saved_row AS SELECT * FROM audit_event WHERE id = '${middle.id}'`, `UPDATE audit_event SET patients = '{}', agents = '{}' WHERE id = '${middle.id}'`],
      [`UPDATE audit_event e SET patients = s.patients, agents = s.agents FROM saved_row s WHERE e.id = s.id`, 'DROP TABLE saved_row'],
      new RegExp(`^altered: audit event ${middle.id} .*search columns differ`),
    );
  });

  test('a row removed from the middle of a chain is found: the position is missing', async () => {
    const { middle } = await middleAndHead();
    await tampered(
      [`CREATE TABLE saved_row AS SELECT * FROM audit_event WHERE id = '${middle.id}'`, `DELETE FROM audit_event WHERE id = '${middle.id}'`],
      ['INSERT INTO audit_event SELECT * FROM saved_row', 'DROP TABLE saved_row'],
      new RegExp(`^removed: chain ${middle.chain} has no audit event at position ${middle.seq}`),
    );
  });

  test('a deleted tail is found through the checkpoint', async () => {
    const { head } = await middleAndHead();
    await tampered(
      [`CREATE TABLE saved_row AS SELECT * FROM audit_event WHERE id = '${head.id}'`, `DELETE FROM audit_event WHERE id = '${head.id}'`],
      ['INSERT INTO audit_event SELECT * FROM saved_row', 'DROP TABLE saved_row'],
      new RegExp(`^removed: the checkpoint of .* names chain ${head.chain} up to position ${head.seq}, the chain ends at ${BigInt(head.seq) - 1n}`),
    );
  });

  test('a row inserted into a chain, and one put beside the chains, are found', async () => {
    const { middle } = await middleAndHead();
    const fake = '00000000-0000-4000-8000-00000000fa4e';
    await tampered(
      [`INSERT INTO audit_event SELECT '${fake}'::uuid, recorded, content, chain, seq, prev_hash, hash, type, subtypes, action, outcome, agents, entities, patients FROM audit_event WHERE id = '${middle.id}'`],
      [`DELETE FROM audit_event WHERE id = '${fake}'`],
      new RegExp(`^inserted: audit event ${fake} .*carries the content of audit event ${middle.id}`),
    );
    await tampered(
      [`INSERT INTO audit_event SELECT '${fake}'::uuid, recorded - interval '1 hour', content, NULL, NULL, NULL, NULL, type, subtypes, action, outcome, agents, entities, patients FROM audit_event WHERE id = '${middle.id}'`],
      [`DELETE FROM audit_event WHERE id = '${fake}'`],
      new RegExp(`^inserted: audit event ${fake} .* is in no chain`),
    );
  });

  test('a checkpoint altered or removed is found', async () => {
    const { rows } = await h.ctx.db.query<{ id: string }>('SELECT id::text AS id FROM audit_checkpoint ORDER BY id');
    expect(rows.length).toBeGreaterThanOrEqual(2);
    await tampered(
      ['CREATE TABLE saved_cp AS SELECT * FROM audit_checkpoint', `UPDATE audit_checkpoint SET jws = regexp_replace(jws, '\\.[^.]*$', '.AAAA') WHERE id = ${rows[0].id}`],
      ['DELETE FROM audit_checkpoint', 'INSERT INTO audit_checkpoint SELECT * FROM saved_cp', 'DROP TABLE saved_cp'],
      new RegExp(`^altered: checkpoint ${rows[0].id} .* does not carry the guard's signature`),
    );
    await tampered(
      ['CREATE TABLE saved_cp AS SELECT * FROM audit_checkpoint', `DELETE FROM audit_checkpoint WHERE id = ${rows[0].id}`],
      ['DELETE FROM audit_checkpoint', 'INSERT INTO audit_checkpoint SELECT * FROM saved_cp', 'DROP TABLE saved_cp'],
      /^removed or inserted: checkpoint \d+ .* does not follow the checkpoint before it/,
    );
  });

  test('verify --since walks only what was recorded since', async () => {
    const later = new Date(h.ctx.now().getTime() + 60_000);
    const result = await verifyAuditTrail(h.ctx.db, auditSigner(h.ctx), { since: later });
    expect(result).toEqual({ ok: true, count: 0 });
  });
});

describe('two replicas and the retention purge', () => {
  test('two replicas writing at once keep valid chains; a purge of expired months is no removal', async () => {
    const a = await pepHarness({ env: { REPOSITORY_OWNERS: OWNER }, fixture: true, redis: false });
    const b = await pepHarness({ env: { REPOSITORY_OWNERS: OWNER }, db: a.ctx.db, redis: false });
    try {
      const ta = await institution(a, { telematikId: OWNER });
      const tb = await institution(b, { telematikId: OWNER });
      const work = (h: PepHarness, t: TestToken, i: number) =>
        i % 2 ? call(h, t, 'POST', '/Patient', { body: { resourceType: 'Patient', active: true } }) : call(h, t, 'GET', '/Appointment/Appointment-Read-Example');
      const answers = await Promise.all([...Array.from({ length: 24 }, (_, i) => work(a, ta, i)), ...Array.from({ length: 24 }, (_, i) => work(b, tb, i))]);
      expect(answers.filter((r) => r.status >= 300)).toEqual([]);
      await Promise.all([a.terminus.audit.checkpoint(), b.terminus.audit.checkpoint()]);
      const n = Number((await a.ctx.db.query<{ n: string }>('SELECT count(*)::text AS n FROM audit_event')).rows[0].n);
      expect(n).toBeGreaterThanOrEqual(48);
      expect(await verifyAuditTrail(a.ctx.db, auditSigner(a.ctx))).toEqual({ ok: true, count: n });
      const { rows: forks } = await a.ctx.db.query('SELECT chain, seq FROM audit_event GROUP BY chain, seq HAVING count(*) > 1');
      expect(forks).toEqual([]);

      // Three years and two months later: the month of these events is past AUDIT_RETENTION_DAYS (1095).
      a.ctx.clock.advance(1157 * 86_400_000);
      await a.terminus.audit.security({ code: 'token-refused', parties: { address: '198.51.100.7' }, failure: 'invalid_grant: a later event' });
      const dropped = await a.terminus.audit.purge();
      expect(dropped.length).toBeGreaterThanOrEqual(1);
      const left = Number((await a.ctx.db.query<{ n: string }>('SELECT count(*)::text AS n FROM audit_event')).rows[0].n);
      expect(left).toBeLessThan(n);
      expect(await verifyAuditTrail(a.ctx.db, auditSigner(a.ctx))).toEqual({ ok: true, count: left });
    } finally {
      await b.close();
      await a.close();
    }
  });
});
