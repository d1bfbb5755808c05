import crypto from 'node:crypto';

/** The log does not parse as a TCG crypto-agile event log. */
export class MalformedEventLog extends Error {}

const TPM_ALG_SHA256 = 0x000b;

const EV_NO_ACTION = 0x00000003;
const SPEC_ID_SIGNATURE = Buffer.from('Spec ID Event03\0', 'latin1');
const STARTUP_LOCALITY_SIGNATURE = Buffer.from('StartupLocality\0', 'latin1');

/** One TCG_PCR_EVENT2: its PCR, type, the digest per bank and the (untrusted) event data. */
export interface LogEvent {
  pcrIndex: number;
  eventType: number;
  digests: Map<number, Buffer>;
  data: Buffer;
}

/**
 * The TCG crypto-agile event log (PC Client Platform Firmware Profile §10): parsed and replayed by
 * the guard, written by the attestation helper for its own PCR 23 measurements.
 *
 * Parses a TCG crypto-agile event log (PC Client Platform Firmware Profile §10; little-endian): the
 * first record is a TCG_PCClientPCREvent holding the TCG_EfiSpecIDEvent that names the banks and
 * their digest sizes, then TCG_PCR_EVENT2 records. Refuses anything that does not parse exactly.
 */
export function parseEventLog(buf: Buffer): { banks: Map<number, number>; events: LogEvent[] } {
  const r = new LeReader(buf);
  // TCG_PCClientPCREvent: pcrIndex, eventType = EV_NO_ACTION, SHA-1 digest (20 zero bytes), eventSize, event.
  r.u32();
  if (r.u32() !== EV_NO_ACTION) throw new MalformedEventLog('tpm_event_log does not start with the Spec ID event');
  r.bytes(20);
  const specId = new LeReader(r.bytes(r.u32()));
  if (!specId.bytes(16).equals(SPEC_ID_SIGNATURE)) throw new MalformedEventLog('tpm_event_log is not a crypto-agile log (Spec ID Event03)');
  specId.u32(); // platformClass
  specId.bytes(3); // specVersionMinor, specVersionMajor, errata
  specId.u8(); // uintnSize
  const algorithms = specId.u32();
  if (algorithms === 0 || algorithms > 8) throw new MalformedEventLog('tpm_event_log names no or too many banks');
  const banks = new Map<number, number>();
  for (let i = 0; i < algorithms; i++) banks.set(specId.u16(), specId.u16());
  specId.bytes(specId.u8()); // vendorInfo
  specId.end();
  const events: LogEvent[] = [];
  while (r.remaining > 0) {
    const pcrIndex = r.u32();
    const eventType = r.u32();
    const count = r.u32();
    if (count > banks.size) throw new MalformedEventLog('a tpm_event_log event has more digests than banks');
    const digests = new Map<number, Buffer>();
    for (let i = 0; i < count; i++) {
      const alg = r.u16();
      const size = banks.get(alg);
      if (size === undefined) throw new MalformedEventLog('a tpm_event_log event names a bank the log did not declare');
      digests.set(alg, r.bytes(size));
    }
    events.push({ pcrIndex, eventType, digests, data: r.bytes(r.u32()) });
    if (events.length > 10_000) throw new MalformedEventLog('tpm_event_log has too many events');
  }
  return { banks, events };
}

/**
 * Replays the log into the sha256 bank: PCRs start at zero (17-22 at all ones, PCR 0 at the
 * StartupLocality), EV_NO_ACTION events are not measured, every other event extends
 * PCR = H(PCR ‖ digest). Only digests count; event data is never trusted.
 */
export function replaySha256(events: LogEvent[], indices: number[]): Map<number, Buffer> {
  const pcrs = new Map<number, Buffer>(indices.map((i) => [i, Buffer.alloc(32, i >= 17 && i <= 22 ? 0xff : 0)]));
  for (const e of events) {
    if (e.eventType === EV_NO_ACTION) {
      if (e.pcrIndex === 0 && pcrs.has(0) && e.data.length >= 17 && e.data.subarray(0, 16).equals(STARTUP_LOCALITY_SIGNATURE)) {
        const start = Buffer.alloc(32);
        start[31] = e.data[16];
        pcrs.set(0, start);
      }
      continue;
    }
    const current = pcrs.get(e.pcrIndex);
    if (!current) continue;
    const digest = e.digests.get(TPM_ALG_SHA256);
    if (!digest) throw new MalformedEventLog('a tpm_event_log event has no sha256 digest');
    pcrs.set(e.pcrIndex, crypto.createHash('sha256').update(current).update(digest).digest());
  }
  return pcrs;
}

class LeReader {
  private offset = 0;
  constructor(private readonly buf: Buffer) {}
  get remaining(): number {
    return this.buf.length - this.offset;
  }
  private need(n: number): void {
    if (this.offset + n > this.buf.length) throw new MalformedEventLog('tpm_event_log is truncated');
  }
  u8(): number {
    this.need(1);
    return this.buf[this.offset++];
  }
  u16(): number {
    this.need(2);
    const v = this.buf.readUInt16LE(this.offset);
    this.offset += 2;
    return v;
  }
  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32LE(this.offset);
    this.offset += 4;
    return v;
  }
  bytes(n: number): Buffer {
    this.need(n);
    const v = this.buf.subarray(this.offset, this.offset + n);
    this.offset += n;
    return v;
  }
  end(): void {
    if (this.offset !== this.buf.length) throw new MalformedEventLog('tpm_event_log Spec ID event has trailing bytes');
  }
}

/** Writing side (the attestation helper): the Spec ID header for a sha256-only log, and one event. */
export function specIdHeader(): Buffer {
  const specId = Buffer.concat([
    SPEC_ID_SIGNATURE,
    le32(0), // platformClass: client
    Buffer.from([0, 2, 0, 2]), // version 2.0 errata 0, uintnSize 2 (UINT64)
    le32(1),
    le16(TPM_ALG_SHA256),
    le16(32),
    Buffer.from([0]), // no vendorInfo
  ]);
  return Buffer.concat([le32(0), le32(EV_NO_ACTION), Buffer.alloc(20), le32(specId.length), specId]);
}

export function logEvent(pcrIndex: number, eventType: number, sha256: Buffer, data: Buffer): Buffer {
  return Buffer.concat([le32(pcrIndex), le32(eventType), le32(1), le16(TPM_ALG_SHA256), sha256, le32(data.length), data]);
}

function le32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return b;
}

function le16(v: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(v);
  return b;
}
