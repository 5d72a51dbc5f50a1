/**
 * Compacted encoding: the bytes of a row's key columns, as Apache Fluss's compacted key encoder
 * writes them. Bucketing hashes these bytes (bucketing.ts) and primary-key tables use them as the
 * KV store key, so they must match Fluss byte for byte. The same field encoding makes the values
 * of a CompactedRow (row-encoder.ts), so the writer and reader of single fields live here.
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
 * Values are in the internal form of values.ts (BIGINT, DECIMAL unscaled and timestamps in µs are
 * bigint; DATE days and TIME µs of day are numbers). Written values are assumed already validated;
 * read values are checked, since clients send rows in this encoding.
 *
 * Every field is self-delimiting, so the encoding of a run of fields is never a proper prefix of
 * the encoding of another run of the same types: a key prefix names whole field values.
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

// Field kinds, chosen once per layout so the per-value work is a switch over small ints.
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
export const MAX_COMPACT_DECIMAL_PRECISION = 18;
/** Timestamps up to this precision are whole milliseconds (Fluss's "compact" timestamp). */
const MAX_COMPACT_TIMESTAMP_PRECISION = 3;

function kindOf(t: DataType): number {
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
const TWO_POW_31 = 2147483648;
/** Integers below this magnitude are exact as numbers. */
const MAX_EXACT = 2 ** 53;
const MILLIS_PER_DAY = 86_400_000;
const NANOS_PER_MILLI = 1_000_000;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/**
 * Writes fields of a fixed list of types, in the compacted encoding, into a growable buffer it
 * owns: encoding allocates nothing but the copies it is asked for. Keys and rows share it.
 */
export class CompactedWriter {
  private readonly kinds: Uint8Array;
  private buf = Buffer.alloc(64);
  private pos = 0;
  /** Splits a bigint into two 32-bit halves without BigInt arithmetic. */
  private readonly scratch = new DataView(new ArrayBuffer(8));

  /** `types[i]` is the type of field i. */
  constructor(types: readonly DataType[]) {
    this.kinds = Uint8Array.from(types, kindOf);
  }

  /** Starts a new encoding that opens with `headerBytes` zero bytes (a row's null bits). */
  begin(headerBytes: number): void {
    this.pos = 0;
    this.ensure(headerBytes);
    this.buf.fill(0, 0, headerBytes);
    this.pos = headerBytes;
  }

  /** Sets bit `bit` (LSB first) of the header opened by `begin`. */
  setHeaderBit(bit: number): void {
    this.buf[bit >> 3] |= 1 << (bit & 7);
  }

  /** The bytes written since `begin`, in a new array the caller owns. */
  copy(): Uint8Array {
    const out = new Uint8Array(this.pos);
    out.set(this.buf.subarray(0, this.pos));
    return out;
  }

  /** The bytes written since `begin`, as a view valid until the next `begin`. */
  view(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }

  /** Appends `value` (internal form, not null) as field `field`. */
  write(field: number, value: unknown): void {
    const kind = this.kinds[field];
    switch (kind) {
      case BOOLEAN:
        this.ensure(1);
        this.buf[this.pos++] = value ? 1 : 0;
        break;
      case BYTE:
        this.ensure(1);
        this.buf[this.pos++] = value as number;
        break;
      case SHORT:
        this.ensure(2);
        this.buf[this.pos++] = value as number;
        this.buf[this.pos++] = (value as number) >> 8;
        break;
      case INT:
        this.varInt(value as number);
        break;
      case LONG:
        this.varLongBigint(value as bigint);
        break;
      case FLOAT:
        this.ensure(4);
        this.pos = this.buf.writeFloatLE(value as number, this.pos);
        break;
      case DOUBLE:
        this.ensure(8);
        this.pos = this.buf.writeDoubleLE(value as number, this.pos);
        break;
      case STRING: {
        const len = Buffer.byteLength(value as string, 'utf8');
        this.varInt(len);
        this.ensure(len);
        this.pos += this.buf.write(value as string, this.pos, len, 'utf8');
        break;
      }
      case BYTES: {
        const bytes = value as Uint8Array;
        this.varInt(bytes.length);
        this.ensure(bytes.length);
        this.buf.set(bytes, this.pos);
        this.pos += bytes.length;
        break;
      }
      case BIG_DECIMAL:
        this.twosComplementBytes(value as bigint);
        break;
      case TIME_MILLIS:
      case TIME_NANOS: {
        const micros = value as number;
        const millis = Math.floor(micros / 1000);
        this.varInt(millis);
        if (kind === TIME_NANOS) this.varInt((micros - millis * 1000) * 1000);
        break;
      }
      case TIMESTAMP_MILLIS:
      case TIMESTAMP_NANOS:
        this.timestamp(value as bigint, kind === TIMESTAMP_NANOS);
        break;
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
    let nanoOfMilli: number;
    if (Number.isSafeInteger(asNumber)) {
      const millis = Math.floor(asNumber / 1000);
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

const EMPTY = Buffer.alloc(0);

/**
 * Reads fields of a fixed list of types in the compacted encoding, the inverse of CompactedWriter.
 * Each field is checked to lie inside the input and to hold a value of its type (decimals within
 * their precision, CHAR and BINARY within their length, times of day and timestamps in range), so
 * bytes from a client decode to valid internal values or throw CORRUPT_MESSAGE.
 */
export class CompactedReader {
  private readonly kinds: Uint8Array;
  private readonly types: readonly DataType[];
  /** Per DECIMAL field, 10^precision: the unscaled value must stay below it in magnitude. */
  private readonly decimalBounds: (bigint | undefined)[];
  /** The same bounds as numbers (exact: 10^p for p <= 22), to check compact decimals without a bigint. */
  private readonly decimalLimits: Float64Array;
  private buf: Buffer = EMPTY;
  private pos = 0;
  /** The 64-bit value read last (varLongHalves, timestamp): its two's-complement halves as int32. */
  private lo = 0;
  private hi = 0;
  private readonly scratch = new DataView(new ArrayBuffer(8));

  /** `types[i]` is the type of field i. */
  constructor(types: readonly DataType[]) {
    this.types = [...types];
    this.kinds = Uint8Array.from(types, kindOf);
    this.decimalBounds = types.map((t) => (t.kind === 'DECIMAL' ? 10n ** BigInt(t.precision) : undefined));
    this.decimalLimits = Float64Array.from(types, (t) => (t.kind === 'DECIMAL' ? 10 ** t.precision : 0));
  }

  /** Starts reading `bytes` at `start`. */
  begin(bytes: Uint8Array, start: number): void {
    this.buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = start;
  }

  /** Where the next field starts. */
  get position(): number {
    return this.pos;
  }

  /** Reads field `field` (internal form). Strings and byte arrays are copies, never views of the input. */
  read(field: number): unknown {
    const kind = this.kinds[field];
    switch (kind) {
      case BOOLEAN: {
        const b = this.buf[this.take(field, 1)];
        if (b > 1) throw this.invalid(field, `boolean byte ${b}`);
        return b === 1;
      }
      case BYTE:
        return this.buf.readInt8(this.take(field, 1));
      case SHORT:
        return this.buf.readInt16LE(this.take(field, 2));
      case INT:
        return this.varInt(field);
      case LONG: {
        const v = this.varLong(field);
        const bound = this.decimalBounds[field];
        if (bound !== undefined) this.checkDecimal(field, v, bound);
        return v;
      }
      case FLOAT:
        return this.buf.readFloatLE(this.take(field, 4));
      case DOUBLE:
        return this.buf.readDoubleLE(this.take(field, 8));
      case STRING: {
        const start = this.span(field);
        return this.buf.toString('utf8', start, this.pos);
      }
      case BYTES: {
        const start = this.span(field);
        const out = new Uint8Array(this.pos - start);
        out.set(this.buf.subarray(start, this.pos));
        return out;
      }
      case BIG_DECIMAL: {
        const len = this.length(field);
        if (len === 0 || len > 17) throw this.invalid(field, `an unscaled value of ${len} bytes`);
        const start = this.take(field, len);
        const v = BigInt.asIntN(len * 8, BigInt(`0x${this.buf.toString('hex', start, start + len)}`));
        this.checkDecimal(field, v, this.decimalBounds[field]!);
        return v;
      }
      case TIME_MILLIS:
      case TIME_NANOS: {
        const millis = this.varInt(field);
        const nanos = kind === TIME_NANOS ? this.varInt(field) : 0;
        if (millis < 0 || millis >= MILLIS_PER_DAY || nanos < 0 || nanos >= NANOS_PER_MILLI) throw this.invalid(field, `time of day ${millis} ms + ${nanos} ns`);
        return millis * 1000 + Math.floor(nanos / 1000);
      }
      case TIMESTAMP_MILLIS:
      case TIMESTAMP_NANOS:
        this.timestamp(field, kind === TIMESTAMP_NANOS);
        return this.int64();
    }
  }

  /** The input being read, where `span` positions point. */
  get input(): Buffer {
    return this.buf;
  }

  /**
   * Reads field `field`, a BIGINT, compact DECIMAL (p <= 18), TIME or TIMESTAMP, checked as `read`
   * does, and writes its internal value (unscaled value, µs of day, epoch µs) as a 64-bit two's
   * complement into `words[at]` (low 32 bits) and `words[at + 1]` (high): no bigint is made.
   */
  readInt64(field: number, words: Int32Array, at: number): void {
    const kind = this.kinds[field];
    switch (kind) {
      case LONG:
        this.varLongHalves(field);
        if (this.decimalBounds[field] !== undefined) this.checkCompactDecimal(field);
        break;
      case TIME_MILLIS:
      case TIME_NANOS: {
        const micros = this.read(field) as number; // below 2^37
        this.lo = micros | 0;
        this.hi = Math.floor(micros / TWO_POW_32);
        break;
      }
      case TIMESTAMP_MILLIS:
      case TIMESTAMP_NANOS:
        this.timestamp(field, kind === TIMESTAMP_NANOS);
        break;
      default:
        throw new TributaryError('INVALID_ARGUMENT', `compacted field ${field} (${formatDataType(this.types[field])}) is not a 64-bit integer`);
    }
    words[at] = this.lo;
    words[at + 1] = this.hi;
  }

  /**
   * Reads field `field`, a CHAR, STRING, BINARY or BYTES, checked as `read` does, without copying
   * it: returns where its bytes start in `input`; they end at `position`. String bytes are as
   * written: `read` would replace what is not valid UTF-8 with U+FFFD.
   */
  span(field: number): number {
    const len = this.length(field);
    const start = this.take(field, len);
    const t = this.types[field];
    if (t.kind === 'BINARY' && len !== t.length) throw this.invalid(field, `${len} bytes`);
    if (t.kind === 'CHAR' && len > t.length) {
      const chars = codePoints(this.buf.toString('utf8', start, start + len));
      if (chars > t.length) throw this.invalid(field, `${chars} characters`);
    }
    return start;
  }

  /** Claims `n` bytes and returns where they start. */
  private take(field: number, n: number): number {
    const start = this.pos;
    if (start + n > this.buf.length) throw this.truncated(field);
    this.pos = start + n;
    return start;
  }

  /** A varint32 as a signed int32 (the inverse of writing `value >>> 0`). */
  private varInt(field: number): number {
    const buf = this.buf;
    let pos = this.pos;
    let result = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (pos >= buf.length) throw this.truncated(field);
      const b = buf[pos++];
      result |= (b & 0x7f) << shift;
      if (b < 0x80) {
        this.pos = pos;
        return result;
      }
    }
    throw this.invalid(field, 'a varint32 longer than 5 bytes');
  }

  /** A length prefix that must fit the remaining input. */
  private length(field: number): number {
    const len = this.varInt(field);
    if (len < 0 || this.pos + len > this.buf.length) throw this.truncated(field);
    return len;
  }

  /** A varint64 as its two's-complement halves, into `lo` and `hi`. */
  private varLongHalves(field: number): void {
    const buf = this.buf;
    let pos = this.pos;
    let lo = 0;
    let hi = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (pos >= buf.length) throw this.truncated(field);
      const b = buf[pos++];
      const bits = b & 0x7f;
      if (shift < 28) lo |= bits << shift;
      else if (shift === 28) {
        lo |= bits << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (shift - 32);
      if (b < 0x80) {
        this.pos = pos;
        this.lo = lo;
        this.hi = hi;
        return;
      }
    }
    throw this.invalid(field, 'a varint64 longer than 10 bytes');
  }

  /** The 64-bit value in `lo` and `hi`. */
  private int64(): bigint {
    this.scratch.setInt32(0, this.lo, true);
    this.scratch.setInt32(4, this.hi, true);
    return this.scratch.getBigInt64(0, true);
  }

  private varLong(field: number): bigint {
    this.varLongHalves(field);
    return this.int64();
  }

  /**
   * Epoch milliseconds and, with `nanos`, nanoseconds of the millisecond, as epoch microseconds
   * in `lo` and `hi`.
   */
  private timestamp(field: number, nanos: boolean): void {
    this.varLongHalves(field);
    const nanoOfMilli = nanos ? this.varInt(field) : 0;
    if (nanoOfMilli < 0 || nanoOfMilli >= NANOS_PER_MILLI) throw this.invalid(field, `${nanoOfMilli} nanoseconds of a millisecond`);
    const microOfMilli = Math.floor(nanoOfMilli / 1000);
    // ms * 1000 + µs on the 32-bit halves, exact in doubles: the low half's product carries into
    // the high one, and the result leaves 64 bits exactly when the high half leaves 32.
    const low = (this.lo >>> 0) * 1000 + microOfMilli;
    const high = this.hi * 1000 + Math.floor(low / TWO_POW_32);
    if (high < -TWO_POW_31 || high >= TWO_POW_31) throw this.invalid(field, `timestamp of ${this.int64() * 1000n + BigInt(microOfMilli)} µs, beyond 64 bits`);
    this.lo = low | 0;
    this.hi = high;
  }

  /** Checks the compact decimal in `lo` and `hi` against its bound, as a number while that is exact. */
  private checkCompactDecimal(field: number): void {
    const value = this.hi * TWO_POW_32 + (this.lo >>> 0);
    const limit = this.decimalLimits[field];
    if (value > -MAX_EXACT && value < MAX_EXACT) {
      if (value >= limit || value <= -limit) throw this.invalid(field, `unscaled value ${this.int64()}`);
    } else this.checkDecimal(field, this.int64(), this.decimalBounds[field]!);
  }

  private checkDecimal(field: number, unscaled: bigint, bound: bigint): void {
    if (unscaled >= bound || unscaled <= -bound) throw this.invalid(field, `unscaled value ${unscaled}`);
  }

  private truncated(field: number): TributaryError {
    return new TributaryError('CORRUPT_MESSAGE', `compacted field ${field} (${formatDataType(this.types[field])}) runs past the end of ${this.buf.length} bytes`);
  }

  private invalid(field: number, what: string): TributaryError {
    return new TributaryError('CORRUPT_MESSAGE', `compacted field ${field} (${formatDataType(this.types[field])}) holds ${what}, not a value of its type`);
  }
}

function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/**
 * Encodes the key columns of rows. Build one per key layout and reuse it: it owns a growable
 * buffer, so encoding allocates nothing but the returned copy (`encode`) or view (`encodeView`).
 */
export class CompactedKeyEncoder {
  private readonly writer: CompactedWriter;
  private readonly positions: Int32Array;
  private readonly fields: readonly KeyField[];

  constructor(fields: readonly KeyField[]) {
    if (fields.length === 0) throw new TributaryError('INVALID_ARGUMENT', 'a key needs at least one column');
    this.fields = fields.map((f) => ({ ...f }));
    this.writer = new CompactedWriter(fields.map((f) => f.type));
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
    return this.writer.copy();
  }

  /** The key bytes of `row` as a view of the encoder's buffer, valid until its next call. */
  encodeView(row: readonly unknown[]): Uint8Array {
    this.write(row);
    return this.writer.view();
  }

  private write(row: readonly unknown[]): void {
    const writer = this.writer;
    writer.begin(0);
    for (let i = 0; i < this.positions.length; i++) {
      const v = row[this.positions[i]];
      if (v === null || v === undefined) {
        const f = this.fields[i];
        throw new TributaryError('INVALID_ROW', `key column '${f.name}' (${formatDataType(f.type)}) must not be null`);
      }
      writer.write(i, v);
    }
  }
}

/** Encodes `values` (one per type, in key order). For hot paths build a CompactedKeyEncoder once. */
export function encodeKey(types: readonly DataType[], values: readonly unknown[]): Uint8Array {
  return new CompactedKeyEncoder(types.map((type, position) => ({ name: `#${position}`, type, position }))).encode(values);
}
