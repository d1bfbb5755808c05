-- audit_event.content now holds the record an AuditEvent is rendered from (src/audit/stored-form.ts,
-- `{"v":1,...}`), no longer the AuditEvent's JSON: a third of the size, since every AuditEvent
-- repeats the same BALP systems and codes. The hash chain links this text as it linked the JSON.
-- Rows stored before hold the AuditEvent's JSON (`{"resourceType":"AuditEvent",...}`) and stay valid:
-- reads, export and verify take either form.
COMMENT ON COLUMN audit_event.content IS 'The stored record of the AuditEvent ({"v":1,...}, src/audit/stored-form.ts) or, for rows stored before that form, the AuditEvent''s JSON; exactly the text its link hashes';
