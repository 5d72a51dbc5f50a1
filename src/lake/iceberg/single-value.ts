/**
 * Iceberg's binary single-value serialization (spec: "Appendix D: Single-value serialization"):
 * how manifests store column bounds and manifest lists store partition bounds.
 *
 *   boolean                         = u8: 0x00 false, any other byte true (written as 0x01)
 *   int, date                       = i32 little-endian (date: days since 1970-01-01)
 *   long                            = i64 little-endian
 *   time                            = i64 little-endian, microseconds since midnight
 *   timestamp, timestamptz          = i64 little-endian, microseconds since 1970-01-01 00:00 (UTC)
 *   timestamp_ns, timestamptz_ns    = i64 little-endian, nanoseconds since 1970-01-01 00:00 (UTC)
 *   float / double                  = IEEE 754 binary32 / binary64 little-endian, bits as given
 *                                     (-0.0 keeps its sign bit, so it sorts before +0.0 as bounds
 *                                     require; NaN is never a bound, metrics leave it out)
 *   decimal(P,S)                    = the unscaled value as two's-complement big-endian in the
 *                                     fewest bytes that hold it (Java's BigInteger.toByteArray)
 *   string                          = UTF-8 bytes, no length
 *   uuid                            = the 16 bytes, big-endian (f79c3e09-… = F7 9C 3E 09 …)
 *   fixed[L]                        = the L bytes
 *   binary                          = the bytes, no length
 *
 * Reading follows the spec's type-promotion rule for bounds written before a promotion: a 4-byte
 * `long` bound is an int, a 4-byte `double` bound a float, a 4-byte timestamp bound a date.
 *
 * Value forms: int/date/float/double → number; long/time/timestamp* → bigint; decimal → bigint
 * unscaled; string → string; uuid/fixed/binary → Uint8Array (written from a uuid's text too);
 * boolean → boolean. Writing also takes a safe-integer number where a bigint is read.
 */
import { minBigEndianBytes } from '../../common/bucketing.js';
import { TributaryError } from '../../common/errors.js';
import type { PartitionValue } from './data-file.js';
import { type IcebergPrimitive, decimalOf, fixedLengthOf } from './types.js';

export type SingleValue = number | bigint | string | boolean | Uint8Array;

const UTF8 = new TextEncoder();
const UTF8_STRICT = new TextDecoder('utf-8', { fatal: true });
const MICROS_PER_DAY = 86_400_000_000n;
const NANOS_PER_DAY = 86_400_000_000_000n;
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The single-value bytes of `value` of Iceberg type `type`, in a new array the caller owns. */
export function toSingleValue(type: IcebergPrimitive, value: PartitionValue | number | bigint): Uint8Array {
  if (value === null) throw new TributaryError('INVALID_ARGUMENT', `null has no single-value encoding (type ${type})`);
  switch (type) {
    case 'boolean':
      if (typeof value !== 'boolean') throw wrongValue(type, value);
      return Uint8Array.of(value ? 1 : 0);
    case 'int':
    case 'date': {
      const n = typeof value === 'bigint' ? Number(value) : value;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < -0x80000000 || n > 0x7fffffff) throw wrongValue(type, value);
      const out = new Uint8Array(4);
      new DataView(out.buffer).setInt32(0, n, true);
      return out;
    }
    case 'long':
    case 'time':
    case 'timestamp':
    case 'timestamptz':
    case 'timestamp_ns':
    case 'timestamptz_ns': {
      const out = new Uint8Array(8);
      new DataView(out.buffer).setBigInt64(0, toLong(type, value), true);
      return out;
    }
    case 'float':
    case 'double': {
      if (typeof value !== 'number') throw wrongValue(type, value);
      const out = new Uint8Array(type === 'float' ? 4 : 8);
      const view = new DataView(out.buffer);
      if (type === 'float') view.setFloat32(0, value, true);
      else view.setFloat64(0, value, true);
      return out;
    }
    case 'string':
      if (typeof value !== 'string') throw wrongValue(type, value);
      return UTF8.encode(value);
    case 'uuid':
      if (typeof value === 'string' && UUID_TEXT.test(value)) return Uint8Array.from(Buffer.from(value.replaceAll('-', ''), 'hex'));
      if (!(value instanceof Uint8Array) || value.length !== 16) throw wrongValue(type, value);
      return new Uint8Array(value);
    case 'binary':
      if (!(value instanceof Uint8Array)) throw wrongValue(type, value);
      return new Uint8Array(value);
  }
  if (decimalOf(type)) return minBigEndianBytes(toLong(type, value));
  const length = fixedLengthOf(type);
  if (length !== undefined) {
    if (!(value instanceof Uint8Array) || value.length !== length) throw wrongValue(type, value);
    return new Uint8Array(value);
  }
  throw unsupported(type);
}

/** The value of single-value bytes of Iceberg type `type`; byte arrays are copies. */
export function fromSingleValue(type: IcebergPrimitive, bytes: Uint8Array): SingleValue {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const len = bytes.length;
  switch (type) {
    case 'boolean':
      expectLength(type, len, 1);
      return bytes[0] !== 0;
    case 'int':
    case 'date':
      expectLength(type, len, 4);
      return view.getInt32(0, true);
    case 'long':
      if (len === 4) return BigInt(view.getInt32(0, true));
      expectLength(type, len, 8);
      return view.getBigInt64(0, true);
    case 'timestamp':
    case 'timestamptz':
    case 'timestamp_ns':
    case 'timestamptz_ns':
      if (len === 4) return BigInt(view.getInt32(0, true)) * (type.endsWith('_ns') ? NANOS_PER_DAY : MICROS_PER_DAY);
      expectLength(type, len, 8);
      return view.getBigInt64(0, true);
    case 'time':
      expectLength(type, len, 8);
      return view.getBigInt64(0, true);
    case 'float':
      expectLength(type, len, 4);
      return view.getFloat32(0, true);
    case 'double':
      if (len === 4) return view.getFloat32(0, true);
      expectLength(type, len, 8);
      return view.getFloat64(0, true);
    case 'string':
      try {
        return UTF8_STRICT.decode(bytes);
      } catch (err) {
        throw new TributaryError('CORRUPT_MESSAGE', 'a string single value is not valid UTF-8', { cause: err });
      }
    case 'uuid':
      expectLength(type, len, 16);
      return bytes.slice();
    case 'binary':
      return bytes.slice();
  }
  if (decimalOf(type)) {
    if (len === 0) throw new TributaryError('CORRUPT_MESSAGE', `a ${type} single value has no bytes`);
    let unsigned = 0n;
    for (let i = 0; i < len; i++) unsigned = (unsigned << 8n) | BigInt(bytes[i]);
    return BigInt.asIntN(len * 8, unsigned);
  }
  const length = fixedLengthOf(type);
  if (length !== undefined) {
    expectLength(type, len, length);
    return bytes.slice();
  }
  throw unsupported(type);
}

function toLong(type: IcebergPrimitive, value: PartitionValue | number | bigint): bigint {
  if (typeof value === 'bigint') {
    if (BigInt.asIntN(64, value) !== value && !decimalOf(type)) throw wrongValue(type, value);
    return value;
  }
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
  throw wrongValue(type, value);
}

function expectLength(type: IcebergPrimitive, actual: number, expected: number): void {
  if (actual !== expected) throw new TributaryError('CORRUPT_MESSAGE', `a ${type} single value has ${actual} bytes, not ${expected}`);
}

function wrongValue(type: IcebergPrimitive, value: unknown): TributaryError {
  const shown = value instanceof Uint8Array ? `${value.length} bytes` : typeof value === 'bigint' ? `${value}n` : JSON.stringify(value);
  return new TributaryError('INVALID_ARGUMENT', `${shown} is not a value of Iceberg type ${type}`);
}

function unsupported(type: IcebergPrimitive): TributaryError {
  return new TributaryError('INVALID_TYPE', `Iceberg type '${type}' has no single-value encoding here`);
}
