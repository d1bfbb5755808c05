/**
 * Big-endian reader for TPM 2.0 structures (TPM 2.0 Part 2): every read is bounds-checked and a
 * structure must be consumed exactly (`end`), so trailing bytes are refused.
 */
export class TpmStructureError extends Error {
  readonly token = 'malformed_tpm_structure';
}

export class TpmReader {
  private offset = 0;
  constructor(
    private readonly buf: Buffer,
    private readonly what: string,
  ) {}

  private need(n: number): void {
    if (this.offset + n > this.buf.length) throw new TpmStructureError(`${this.what} is truncated`);
  }

  u8(): number {
    this.need(1);
    return this.buf.readUInt8(this.offset++);
  }

  u16(): number {
    this.need(2);
    const v = this.buf.readUInt16BE(this.offset);
    this.offset += 2;
    return v;
  }

  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32BE(this.offset);
    this.offset += 4;
    return v;
  }

  u64(): bigint {
    this.need(8);
    const v = this.buf.readBigUInt64BE(this.offset);
    this.offset += 8;
    return v;
  }

  bytes(n: number): Buffer {
    this.need(n);
    const v = this.buf.subarray(this.offset, this.offset + n);
    this.offset += n;
    return v;
  }

  /** A TPM2B: u16 size, then that many bytes. */
  sized(): Buffer {
    return this.bytes(this.u16());
  }

  end(): void {
    if (this.offset !== this.buf.length) throw new TpmStructureError(`${this.what} has ${this.buf.length - this.offset} trailing bytes`);
  }
}

/** u16 size prefix ‖ body (TPM2B). */
export function tpm2b(body: Buffer): Buffer {
  const size = Buffer.alloc(2);
  size.writeUInt16BE(body.length);
  return Buffer.concat([size, body]);
}

export function u16(v: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(v);
  return b;
}

export function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v);
  return b;
}
