/**
 * The protobuf wire format, for the messages the hot paths write and read by hand instead of
 * through protobuf-es (bucket-records-request.ts, lookup-messages.ts): tag = field << 3 | wire
 * type; int32 and int64 as varints, negative values as the 10-byte varint of their 64-bit two's
 * complement; a length-delimited field as its length and bytes.
 */
import { TributaryError } from '../common/errors.js';

export const WIRE_VARINT = 0;
export const WIRE_I64 = 1;
export const WIRE_LEN = 2;
export const WIRE_I32 = 5;

export const tag = (field: number, wireType: number): number => (field << 3) | wireType;

/** Bytes of the varint of a non-negative safe integer. */
export function varintSize(value: number): number {
  let size = 1;
  for (; value > 0x7f; value = Math.floor(value / 0x80)) size++;
  return size;
}

/** Writes a non-negative safe integer as a varint at `pos`; returns the end. */
export function writeVarint(buf: Uint8Array, pos: number, value: number): number {
  while (value > 0x7f) {
    buf[pos++] = (value % 0x80) | 0x80;
    value = Math.floor(value / 0x80);
  }
  buf[pos++] = value;
  return pos;
}

/** Writes an int32 or int64 as protobuf does (at most 10 bytes); returns the end. */
export function writeSignedVarint(buf: Uint8Array, pos: number, value: number | bigint): number {
  if (typeof value === 'number' && value >= 0 && Number.isSafeInteger(value)) return writeVarint(buf, pos, value);
  let v = BigInt.asUintN(64, BigInt(value));
  while (v > 0x7fn) {
    buf[pos++] = Number(v & 0x7fn) | 0x80;
    v >>= 7n;
  }
  buf[pos++] = Number(v);
  return pos;
}

/** Bytes of an int32 or int64 as `writeSignedVarint` writes it. */
export function signedVarintSize(value: number | bigint): number {
  if (typeof value === 'number' && value >= 0 && Number.isSafeInteger(value)) return varintSize(value);
  let size = 1;
  for (let v = BigInt.asUintN(64, BigInt(value)); v > 0x7fn; v >>= 7n) size++;
  return size;
}

/** Bytes written at the end, growing by doubling: by position (`reserve`, then write at `used`) or appended. */
export class WireWriter {
  buf: Buffer;
  used = 0;

  constructor(size = 64) {
    this.buf = Buffer.allocUnsafe(size);
  }

  /** Makes room for `n` more bytes. */
  reserve(n: number): void {
    if (this.used + n <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.used + n));
    this.buf.copy(grown, 0, 0, this.used);
    this.buf = grown;
  }

  /** A non-negative safe integer (tags, lengths, ids). */
  uint(value: number): this {
    this.reserve(10);
    this.used = writeVarint(this.buf, this.used, value);
    return this;
  }

  /** An int32 or int64. */
  varint(value: number | bigint): this {
    this.reserve(10);
    this.used = writeSignedVarint(this.buf, this.used, value);
    return this;
  }

  raw(bytes: Uint8Array): this {
    this.reserve(bytes.length);
    this.buf.set(bytes, this.used);
    this.used += bytes.length;
    return this;
  }

  /** The bytes written so far: a view, valid until the next write. */
  take(): Uint8Array {
    return this.buf.subarray(0, this.used);
  }
}

/** Reads fields of a message in any order; throws CORRUPT_MESSAGE naming `what` on bad input. */
export class WireReader {
  pos = 0;
  end: number;

  constructor(
    private readonly buf: Uint8Array,
    private readonly what: string,
  ) {
    this.end = buf.length;
  }

  /** An unsigned varint of up to 53 bits. */
  varint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw this.corrupt('a varint runs past its end');
      const b = this.buf[this.pos++];
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 0x80;
    }
    throw this.corrupt('a varint is longer than 10 bytes');
  }

  /** An int32 varint: its low 32 bits, signed. */
  int32(): number {
    let value = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.pos >= this.end) throw this.corrupt('a varint runs past its end');
      const b = this.buf[this.pos++];
      if (shift < 32) value |= (b & 0x7f) << shift;
      if (b < 0x80) return value | 0;
    }
    throw this.corrupt('a varint is longer than 10 bytes');
  }

  /** Reads a length; returns where the field it delimits ends. */
  delimitedEnd(): number {
    const length = this.varint();
    if (length > this.end - this.pos) throw this.corrupt(`a field of ${length} bytes runs past its message`);
    return this.pos + length;
  }

  /**
   * A length-delimited field as a plain Uint8Array over the same memory, not a Buffer view: Node's
   * Buffer makes the views of every request's bytes with the same code, and after long-lived ones
   * (a write's records) V8 allocates such views straight into its old generation, where
   * short-lived ones slow every young-generation collection down.
   */
  view(): Uint8Array {
    const end = this.delimitedEnd();
    const view = new Uint8Array(this.buf.buffer, this.buf.byteOffset + this.pos, end - this.pos);
    this.pos = end;
    return view;
  }

  skip(fieldTag: number): void {
    switch (fieldTag & 7) {
      case WIRE_VARINT:
        this.varint();
        return;
      case WIRE_I64:
        this.advance(8);
        return;
      case WIRE_LEN:
        this.pos = this.delimitedEnd();
        return;
      case WIRE_I32:
        this.advance(4);
        return;
      default:
        throw this.corrupt(`field ${fieldTag >>> 3} has wire type ${fieldTag & 7}`);
    }
  }

  private advance(n: number): void {
    if (n > this.end - this.pos) throw this.corrupt('a field runs past its message');
    this.pos += n;
  }

  private corrupt(why: string): TributaryError {
    return new TributaryError('CORRUPT_MESSAGE', `cannot read the ${this.what}: ${why}`);
  }
}
