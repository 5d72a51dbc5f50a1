/**
 * Compacted key encoding: the bytes of a row's key columns, as Apache Fluss's compacted key
 * encoder writes them. Bucketing hashes these bytes (bucketing.ts) and primary-key tables use
 * them as the KV store key, so they must match Fluss byte for byte.
 *
 * Grammar (fields concatenated in key-column order; no null bitmap, key columns are never null):
 *
 *   varint32 / varint64 = unsigned LEB128 of the two's-complement value: 7 bits a byte, low group
 *                         first, high bit set = more bytes follow. NOT zigzag: a negative INT
 *                         takes 5 bytes, a negative BIGINT 10.
 *   BOOLEAN             = u8 (0 | 1)
 *   TINYINT             = i8
 *   SMALLINT            = i16 little-endian
 *   INT                 = varint32
 *   BIGINT              = varint64
 *   FLOAT / DOUBLE      = f32 / f64 little-endian
 *   DECIMAL(p <= 18, s) = varint64 of the unscaled value
 *   DECIMAL(p > 18, s)  = varint32 length, unscaled value as minimal two's-complement big-endian
 *                         bytes (Java's BigInteger.toByteArray)
 *   CHAR / STRING       = varint32 byte length, UTF-8 bytes
 *   BINARY / BYTES      = varint32 length, bytes
 *   DATE                = varint32 days since 1970-01-01
 *   TIME(p <= 3)        = varint32 milliseconds of the day
 *   TIME(p > 3)         = varint32 milliseconds of the day, varint32 nanoseconds of the millisecond
 *   TIMESTAMP(p <= 3), TIMESTAMP_LTZ(p <= 3) = varint64 epoch milliseconds
 *   TIMESTAMP(p > 3),  TIMESTAMP_LTZ(p > 3)  = varint64 epoch milliseconds (floor),
 *                                               varint32 nanoseconds of the millisecond
 *
 * TIME(p > 3) is Tributary's own: Fluss keeps TIME in milliseconds only, while Tributary stores
 * microseconds, and two keys that differ below the millisecond must not encode alike. It follows
 * the timestamp rule so TIME(0..3) stays identical to Fluss.
 *
 * Input values are in the internal form of values.ts (BIGINT, DECIMAL unscaled and timestamps in
 * µs are bigint; DATE days and TIME µs of day are numbers) and are assumed already validated.
 */
import { TributaryError } from './errors.js';
import type { Schema } from './schema.js';
import { type DataType, formatDataType } from './types.js';

/** One key column: where its value sits in the row and how it is written. */
export interface KeyField {
  name: string;
  type: DataType;
  /** Index of the column's value in the rows given to `encode`. */
  position: number;
}

// Field writers, chosen once per key layout so the per-row loop is a switch over small ints.
const BOOLEAN = 0;
const BYTE = 1;
const SHORT = 2;
const INT = 3;
const LONG = 4;
const FLOAT = 5;
const DOUBLE = 6;
const STRING = 7;
const BYTES = 8;
const BIG_DECIMAL = 9;
const TIME_MILLIS = 10;
const TIME_NANOS = 11;
const TIMESTAMP_MILLIS = 12;
const TIMESTAMP_NANOS = 13;

/** Decimals up to this precision fit a long (Fluss's "compact" decimal). */
const MAX_COMPACT_DECIMAL_PRECISION = 18;
/** Timestamps up to this precision are whole milliseconds (Fluss's "compact" timestamp). */
const MAX_COMPACT_TIMESTAMP_PRECISION = 3;

function writerOf(t: DataType): number {
  switch (t.kind) {
    case 'BOOLEAN':
      return BOOLEAN;
    case 'TINYINT':
      return BYTE;
    case 'SMALLINT':
      return SHORT;
    case 'INT':
    case 'DATE':
      return INT;
    case 'BIGINT':
      return LONG;
    case 'FLOAT':
      return FLOAT;
    case 'DOUBLE':
      return DOUBLE;
    case 'CHAR':
    case 'STRING':
      return STRING;
    case 'BINARY':
    case 'BYTES':
      return BYTES;
    case 'DECIMAL':
      return t.precision <= MAX_COMPACT_DECIMAL_PRECISION ? LONG : BIG_DECIMAL;
    case 'TIME':
      return t.precision <= MAX_COMPACT_TIMESTAMP_PRECISION ? TIME_MILLIS : TIME_NANOS;
    case 'TIMESTAMP':
    case 'TIMESTAMP_LTZ':
      return t.precision <= MAX_COMPACT_TIMESTAMP_PRECISION ? TIMESTAMP_MILLIS : TIMESTAMP_NANOS;
  }
}

const TWO_POW_32 = 4294967296;

/**
 * Encodes the key columns of rows. Build one per key layout and reuse it: it owns a growable
 * buffer, so encoding allocates nothing but the returned copy (`encode`) or view (`encodeView`).
 */
export class CompactedKeyEncoder {
  private readonly writers: Uint8Array;
  private readonly positions: Int32Array;
  private readonly fields: readonly KeyField[];
  private buf = Buffer.alloc(64);
  private pos = 0;
  /** Splits a bigint into two 32-bit halves without BigInt arithmetic. */
  private readonly scratch = new DataView(new ArrayBuffer(8));

  constructor(fields: readonly KeyField[]) {
    if (fields.length === 0) throw new TributaryError('INVALID_ARGUMENT', 'a key needs at least one column');
    this.fields = fields.map((f) => ({ ...f }));
    this.writers = Uint8Array.from(fields, (f) => writerOf(f.type));
    this.positions = Int32Array.from(fields, (f) => f.position);
  }

  /** The encoder for `keyColumns` of rows laid out as the schema's columns. */
  static forColumns(schema: Schema, keyColumns: readonly string[]): CompactedKeyEncoder {
    return new CompactedKeyEncoder(
      keyColumns.map((name) => {
        const position = schema.columns.findIndex((c) => c.name === name);
        if (position < 0) throw new TributaryError('INVALID_ARGUMENT', `key column '${name}' is not a column of the table`);
        return { name, type: schema.columns[position].type, position };
      }),
    );
  }

  /** The key bytes of `row`, in a new array the caller owns. */
  encode(row: readonly unknown[]): Uint8Array {
    this.write(row);
    const out = new Uint8Array(this.pos);
    out.set(this.buf.subarray(0, this.pos));
    return out;
  }

  /** The key bytes of `row` as a view of the encoder's buffer, valid until its next call. */
  encodeView(row: readonly unknown[]): Uint8Array {
    this.write(row);
    return this.buf.subarray(0, this.pos);
  }

  private write(row: readonly unknown[]): void {
    this.pos = 0;
    const writers = this.writers;
    for (let i = 0; i < writers.length; i++) {
      const v = row[this.positions[i]];
      if (v === null || v === undefined) {
        const f = this.fields[i];
        throw new TributaryError('INVALID_ROW', `key column '${f.name}' (${formatDataType(f.type)}) must not be null`);
      }
      switch (writers[i]) {
        case BOOLEAN:
          this.ensure(1);
          this.buf[this.pos++] = v ? 1 : 0;
          break;
        case BYTE:
          this.ensure(1);
          this.buf[this.pos++] = v as number;
          break;
        case SHORT:
          this.ensure(2);
          this.buf[this.pos++] = v as number;
          this.buf[this.pos++] = (v as number) >> 8;
          break;
        case INT:
          this.varInt(v as number);
          break;
        case LONG:
          this.varLongBigint(v as bigint);
          break;
        case FLOAT:
          this.ensure(4);
          this.pos = this.buf.writeFloatLE(v as number, this.pos);
          break;
        case DOUBLE:
          this.ensure(8);
          this.pos = this.buf.writeDoubleLE(v as number, this.pos);
          break;
        case STRING: {
          const len = Buffer.byteLength(v as string, 'utf8');
          this.varInt(len);
          this.ensure(len);
          this.pos += this.buf.write(v as string, this.pos, len, 'utf8');
          break;
        }
        case BYTES: {
          const bytes = v as Uint8Array;
          this.varInt(bytes.length);
          this.ensure(bytes.length);
          this.buf.set(bytes, this.pos);
          this.pos += bytes.length;
          break;
        }
        case BIG_DECIMAL:
          this.twosComplementBytes(v as bigint);
          break;
        case TIME_MILLIS:
        case TIME_NANOS: {
          const micros = v as number;
          const millis = Math.floor(micros / 1000);
          this.varInt(millis);
          if (writers[i] === TIME_NANOS) this.varInt((micros - millis * 1000) * 1000);
          break;
        }
        case TIMESTAMP_MILLIS:
        case TIMESTAMP_NANOS:
          this.timestamp(v as bigint, writers[i] === TIMESTAMP_NANOS);
          break;
      }
    }
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const grown = Buffer.alloc(Math.max(this.buf.length * 2, this.pos + n));
    grown.set(this.buf.subarray(0, this.pos));
    this.buf = grown;
  }

  private varInt(value: number): void {
    this.ensure(5);
    let u = value >>> 0;
    while (u > 0x7f) {
      this.buf[this.pos++] = (u & 0x7f) | 0x80;
      u >>>= 7;
    }
    this.buf[this.pos++] = u;
  }

  /** Writes the 64-bit two's-complement value `hi:lo` (both unsigned 32-bit halves) as a varint. */
  private varLong(hi: number, lo: number): void {
    this.ensure(10);
    while (hi !== 0 || lo > 0x7f) {
      this.buf[this.pos++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | ((hi & 0x7f) << 25)) >>> 0;
      hi >>>= 7;
    }
    this.buf[this.pos++] = lo;
  }

  private varLongBigint(value: bigint): void {
    this.scratch.setBigInt64(0, value, true);
    this.varLong(this.scratch.getUint32(4, true), this.scratch.getUint32(0, true));
  }

  /** A safe integer as a varint64; ToUint32 and floor division give the two's-complement halves. */
  private varLongNumber(value: number): void {
    this.varLong(Math.floor(value / TWO_POW_32) >>> 0, value >>> 0);
  }

  /** Epoch microseconds as epoch milliseconds (floor) and, with `nanos`, nanoseconds of the millisecond. */
  private timestamp(micros: bigint, nanos: boolean): void {
    const asNumber = Number(micros);
    let millis: number;
    let nanoOfMilli: number;
    if (Number.isSafeInteger(asNumber)) {
      millis = Math.floor(asNumber / 1000);
      nanoOfMilli = (asNumber - millis * 1000) * 1000;
      this.varLongNumber(millis);
    } else {
      let m = micros / 1000n;
      if (m * 1000n > micros) m -= 1n;
      nanoOfMilli = Number(micros - m * 1000n) * 1000;
      this.varLongBigint(m);
    }
    if (nanos) this.varInt(nanoOfMilli);
  }

  /** Length-prefixed minimal two's-complement big-endian bytes, as Java's BigInteger.toByteArray. */
  private twosComplementBytes(value: bigint): void {
    const magnitude = value < 0n ? -value - 1n : value;
    const bitLength = magnitude === 0n ? 0 : magnitude.toString(2).length;
    const len = (bitLength >> 3) + 1; // room for the sign bit
    this.varInt(len);
    this.ensure(len);
    let u = BigInt.asUintN(len * 8, value);
    for (let i = this.pos + len - 1; i >= this.pos; i--) {
      this.buf[i] = Number(u & 0xffn);
      u >>= 8n;
    }
    this.pos += len;
  }
}

/** Encodes `values` (one per type, in key order). For hot paths build a CompactedKeyEncoder once. */
export function encodeKey(types: readonly DataType[], values: readonly unknown[]): Uint8Array {
  return new CompactedKeyEncoder(types.map((type, position) => ({ name: `#${position}`, type, position }))).encode(values);
}
