/**
 * Iceberg's partition transforms (spec: "Partition Transforms", "Bucket Transform Details",
 * "Truncate Transform Details", "Appendix B: 32-bit Hash Requirements").
 *
 *   transform    := identity | bucket[N] | truncate[W] | year | month | day | hour | void
 *
 *   identity     any primitive            → the value, of the source type
 *   bucket[N]    int long decimal date time timestamp* string uuid fixed binary
 *                                         → int: (murmur3_x86_32(hash input, 0) & Integer.MAX_VALUE) % N,
 *                                           hash input as common/bucketing.ts writes it (ints and
 *                                           every date/time kind as a long; nanosecond timestamps
 *                                           first floored to microseconds)
 *   truncate[W]  int, long                → v - (((v % W) + W) % W), wrapping like Java's int/long
 *                decimal                  → the same on the unscaled value (W at the column's scale)
 *                string                   → the first W code points
 *                binary                   → the first W bytes
 *   year         date, timestamp*         → int: years since 1970 (floor)
 *   month        date, timestamp*         → int: months since 1970-01 (floor)
 *   day          date, timestamp*         → int: days since 1970-01-01 (floor)
 *   hour         timestamp*               → int: hours since 1970-01-01 00:00 (floor)
 *   void         any                      → null, of the source type
 *
 * Every transform gives null for a null value. Timestamps with a zone are UTC instants, so all
 * date parts are taken in UTC.
 *
 * Source values: int/date → number (date = days since epoch); long/time/timestamp* → bigint (µs,
 * ns for the _ns kinds); decimal → bigint unscaled value; string → string; binary/fixed/uuid →
 * Uint8Array; boolean → boolean; float/double → number. Integral kinds also take the other of
 * number/bigint (a safe integer), so Tributary's internal values (TIME as a number) go in as they
 * are. Results follow the same forms.
 *
 * Human strings (partition path text, before URL escaping) follow Iceberg's Java conventions:
 * year '2017', month '2017-11', day '2017-11-16', hour '2017-11-16-22', date '2017-11-16',
 * time '22:31:08' (Java's LocalTime form), timestamp '2017-11-16T22:31:08.000001', timestamptz
 * the same with 'Z', decimal '14.20', binary/fixed base64, uuid its text, null 'null'.
 */
import { icebergBucket } from '../../common/bucketing.js';
import { TributaryError } from '../../common/errors.js';
import { formatDecimal } from '../../common/values.js';
import type { PartitionValue } from './data-file.js';
import { type IcebergPrimitive, decimalOf, fixedLengthOf } from './types.js';

export type SourceValue = number | bigint | string | boolean | Uint8Array;

export interface Transform {
  /** The type of the values this transform makes from `source` values. */
  resultType(source: IcebergPrimitive): IcebergPrimitive;
  /** The partition value of a source value (null gives null). */
  apply(source: IcebergPrimitive, value: SourceValue | null): PartitionValue;
  /** The transform as partition specs spell it: 'bucket[16]'. */
  toString(): string;
  /** The text of a value this transform made, as partition paths show it. */
  toHumanString(source: IcebergPrimitive, value: PartitionValue): string;
}

type Kind = 'identity' | 'bucket' | 'truncate' | 'year' | 'month' | 'day' | 'hour' | 'void';

/** What a source type is, for the transforms. */
type Category = 'boolean' | 'int' | 'long' | 'float' | 'double' | 'decimal' | 'date' | 'time' | 'timestamp' | 'timestamptz' | 'timestamp_ns' | 'timestamptz_ns' | 'string' | 'uuid' | 'fixed' | 'binary';

const SIMPLE_CATEGORIES = new Set<string>(['boolean', 'int', 'long', 'float', 'double', 'date', 'time', 'timestamp', 'timestamptz', 'timestamp_ns', 'timestamptz_ns', 'string', 'uuid', 'binary']);
const TIMESTAMPS = new Set<Category>(['timestamp', 'timestamptz', 'timestamp_ns', 'timestamptz_ns']);
const BUCKET_SOURCES = new Set<Category>(['int', 'long', 'decimal', 'date', 'time', 'timestamp', 'timestamptz', 'timestamp_ns', 'timestamptz_ns', 'string', 'uuid', 'fixed', 'binary']);
const TRUNCATE_SOURCES = new Set<Category>(['int', 'long', 'decimal', 'string', 'binary']);

const MICROS_PER_HOUR = 3_600_000_000n;
const MICROS_PER_DAY = 86_400_000_000n;

function categoryOf(type: IcebergPrimitive): Category {
  if (SIMPLE_CATEGORIES.has(type)) return type as Category;
  if (decimalOf(type)) return 'decimal';
  if (fixedLengthOf(type) !== undefined) return 'fixed';
  throw new TributaryError('INVALID_TYPE', `'${type}' is not an Iceberg primitive type`);
}

const TRANSFORM_TEXT = /^(identity|year|month|day|hour|void)$|^(bucket|truncate)\[(\d+)\]$/;

/** Reads a transform as partition specs and sort orders spell it. */
export function parseTransform(text: string): Transform {
  const m = TRANSFORM_TEXT.exec(text.trim());
  if (!m) throw new TributaryError('INVALID_ARGUMENT', `unknown partition transform '${text}'`);
  if (m[1]) return new IcebergTransform(m[1] as Kind, 0);
  const param = Number(m[3]);
  if (!Number.isSafeInteger(param) || param < 1 || param > 0x7fffffff) {
    throw new TributaryError('INVALID_ARGUMENT', `${m[2]} needs a positive int parameter, got '${text}'`);
  }
  return new IcebergTransform(m[2] as Kind, param);
}

class IcebergTransform implements Transform {
  constructor(
    private readonly kind: Kind,
    /** N of bucket[N], W of truncate[W]. */
    private readonly param: number,
  ) {}

  toString(): string {
    return this.kind === 'bucket' || this.kind === 'truncate' ? `${this.kind}[${this.param}]` : this.kind;
  }

  resultType(source: IcebergPrimitive): IcebergPrimitive {
    this.check(categoryOf(source), source);
    return this.kind === 'identity' || this.kind === 'truncate' || this.kind === 'void' ? source : 'int';
  }

  apply(source: IcebergPrimitive, value: SourceValue | null): PartitionValue {
    const cat = categoryOf(source);
    this.check(cat, source);
    if (value === null || this.kind === 'void') return null;
    checkValue(cat, source, value);
    switch (this.kind) {
      case 'identity':
        return canonical(cat, value);
      case 'bucket':
        if (cat === 'timestamp_ns' || cat === 'timestamptz_ns') return icebergBucket(floorDiv(toBigInt(value), 1000n), this.param);
        return icebergBucket(value as number | bigint | string | Uint8Array, this.param, cat === 'decimal');
      case 'truncate':
        return this.truncate(cat, value);
      case 'year':
        return Math.floor(monthsOf(daysOf(cat, value)) / 12);
      case 'month':
        return monthsOf(daysOf(cat, value));
      case 'day':
        return daysOf(cat, value);
      case 'hour':
        return Number(floorDiv(microsOf(cat, value), MICROS_PER_HOUR));
    }
  }

  toHumanString(source: IcebergPrimitive, value: PartitionValue): string {
    const cat = categoryOf(source);
    this.check(cat, source);
    if (value === null) return 'null';
    switch (this.kind) {
      case 'identity':
      case 'truncate':
        checkValue(cat, source, value);
        return humanValue(cat, source, value);
      case 'bucket':
        return String(value);
      case 'year':
        return humanYear(value as number);
      case 'month':
        return humanMonth(value as number);
      case 'day':
        return humanDay(value as number);
      case 'hour': {
        const hours = value as number;
        const day = Math.floor(hours / 24);
        return `${humanDay(day)}-${pad2(hours - day * 24)}`;
      }
      case 'void':
        return 'null';
    }
  }

  /** Throws unless this transform takes values of the source category. */
  private check(cat: Category, source: IcebergPrimitive): void {
    const ok =
      this.kind === 'identity' || this.kind === 'void'
        ? true
        : this.kind === 'bucket'
          ? BUCKET_SOURCES.has(cat)
          : this.kind === 'truncate'
            ? TRUNCATE_SOURCES.has(cat)
            : this.kind === 'hour'
              ? TIMESTAMPS.has(cat)
              : cat === 'date' || TIMESTAMPS.has(cat);
    if (!ok) throw new TributaryError('INVALID_ARGUMENT', `transform ${this} does not apply to ${source}`);
  }

  private truncate(cat: Category, value: SourceValue): PartitionValue {
    const w = this.param;
    switch (cat) {
      case 'int': {
        const v = value as number;
        return (v - (((v % w) + w) % w)) | 0;
      }
      case 'long':
      case 'decimal': {
        const v = toBigInt(value);
        const width = BigInt(w);
        const truncated = v - (((v % width) + width) % width);
        return cat === 'long' ? BigInt.asIntN(64, truncated) : truncated;
      }
      case 'string':
        return truncateCodePoints(value as string, w);
      default:
        return (value as Uint8Array).slice(0, w);
    }
  }
}

function wrongValue(source: IcebergPrimitive, value: unknown): TributaryError {
  const shown = value instanceof Uint8Array ? `${value.length} bytes` : typeof value === 'bigint' ? `${value}n` : JSON.stringify(value);
  return new TributaryError('INVALID_ARGUMENT', `${shown} is not a value of Iceberg type ${source}`);
}

/** Throws unless `value` has a form the source category takes. */
function checkValue(cat: Category, source: IcebergPrimitive, value: SourceValue): void {
  let ok: boolean;
  switch (cat) {
    case 'boolean':
      ok = typeof value === 'boolean';
      break;
    case 'int':
    case 'date':
      ok = typeof value === 'number' ? Number.isInteger(value) && value >= -0x80000000 && value <= 0x7fffffff : typeof value === 'bigint' && value >= -0x80000000n && value <= 0x7fffffffn;
      break;
    case 'float':
    case 'double':
      ok = typeof value === 'number';
      break;
    case 'string':
      ok = typeof value === 'string';
      break;
    case 'uuid':
      ok = value instanceof Uint8Array && value.length === 16;
      break;
    case 'fixed':
      ok = value instanceof Uint8Array && value.length === fixedLengthOf(source);
      break;
    case 'binary':
      ok = value instanceof Uint8Array;
      break;
    case 'decimal':
      ok = typeof value === 'bigint' || Number.isSafeInteger(value);
      break;
    default: // long, time, timestamps
      ok = typeof value === 'bigint' ? BigInt.asIntN(64, value) === value : Number.isSafeInteger(value);
  }
  if (!ok) throw wrongValue(source, value);
}

/** An identity partition value in the canonical form of its type (copies byte arrays). */
function canonical(cat: Category, value: SourceValue): PartitionValue {
  switch (cat) {
    case 'int':
    case 'date':
      return Number(value);
    case 'long':
    case 'decimal':
    case 'time':
    case 'timestamp':
    case 'timestamptz':
    case 'timestamp_ns':
    case 'timestamptz_ns':
      return toBigInt(value);
    case 'uuid':
    case 'fixed':
    case 'binary':
      return (value as Uint8Array).slice();
    default:
      return value;
  }
}

function toBigInt(value: SourceValue): bigint {
  return typeof value === 'bigint' ? value : BigInt(value as number);
}

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}

/** Microseconds since the epoch of a timestamp of any kind (nanoseconds floored). */
function microsOf(cat: Category, value: SourceValue): bigint {
  const v = toBigInt(value);
  return cat === 'timestamp_ns' || cat === 'timestamptz_ns' ? floorDiv(v, 1000n) : v;
}

/** Days since 1970-01-01 of a date or timestamp (floor). */
function daysOf(cat: Category, value: SourceValue): number {
  if (cat === 'date') return Number(value);
  return Number(floorDiv(microsOf(cat, value), MICROS_PER_DAY));
}

/**
 * Proleptic Gregorian year, month (1–12) and day of a day number, by integer arithmetic
 * (Howard Hinnant's civil_from_days): no Date objects, exact for every int day.
 */
function civil(days: number): { year: number; month: number; day: number } {
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const month = mp < 10 ? mp + 3 : mp - 9;
  return { year: yoe + era * 400 + (month <= 2 ? 1 : 0), month, day: doy - Math.floor((153 * mp + 2) / 5) + 1 };
}

/** Months since 1970-01 of a day number. */
function monthsOf(days: number): number {
  const { year, month } = civil(days);
  return (year - 1970) * 12 + month - 1;
}

const pad2 = (n: number): string => String(n).padStart(2, '0');

/** A year as Java's String.format("%04d") writes it (the transforms' own human strings). */
function year4(year: number): string {
  return year < 0 ? `-${String(-year).padStart(3, '0')}` : String(year).padStart(4, '0');
}

function humanYear(years: number): string {
  return year4(1970 + years);
}

function humanMonth(months: number): string {
  const years = Math.floor(months / 12);
  return `${year4(1970 + years)}-${pad2(months - years * 12 + 1)}`;
}

function humanDay(days: number): string {
  const { year, month, day } = civil(days);
  return `${year4(year)}-${pad2(month)}-${pad2(day)}`;
}

/** A date as Java's LocalDate.toString writes it (identity values of date and timestamps). */
function isoDate(days: number): string {
  const { year, month, day } = civil(days);
  const y = year > 9999 ? `+${year}` : year < 0 ? `-${String(-year).padStart(4, '0')}` : String(year).padStart(4, '0');
  return `${y}-${pad2(month)}-${pad2(day)}`;
}

/** A time of day as Java's LocalTime.toString writes it: HH:mm, then :ss and .SSS/.SSSSSS/.SSSSSSSSS as needed. */
function isoTime(nanoOfDay: bigint): string {
  const nanos = Number(nanoOfDay % 1_000_000_000n);
  const seconds = Number(nanoOfDay / 1_000_000_000n);
  let text = `${pad2(Math.floor(seconds / 3600))}:${pad2(Math.floor(seconds / 60) % 60)}`;
  if (seconds % 60 !== 0 || nanos !== 0) text += `:${pad2(seconds % 60)}`;
  if (nanos !== 0) {
    const digits = String(nanos).padStart(9, '0');
    text += `.${nanos % 1_000_000 === 0 ? digits.slice(0, 3) : nanos % 1000 === 0 ? digits.slice(0, 6) : digits}`;
  }
  return text;
}

/** A timestamp in `unitsPerDay` units since the epoch as Java's LocalDateTime.toString writes it. */
function isoTimestamp(value: bigint, unitsPerDay: bigint, nanosPerUnit: bigint): string {
  const days = floorDiv(value, unitsPerDay);
  return `${isoDate(Number(days))}T${isoTime((value - days * unitsPerDay) * nanosPerUnit)}`;
}

function humanValue(cat: Category, source: IcebergPrimitive, value: SourceValue): string {
  switch (cat) {
    case 'date':
      return isoDate(Number(value));
    case 'time':
      return isoTime(toBigInt(value) * 1000n);
    case 'timestamp':
    case 'timestamptz':
      return isoTimestamp(toBigInt(value), MICROS_PER_DAY, 1000n) + (cat === 'timestamptz' ? 'Z' : '');
    case 'timestamp_ns':
    case 'timestamptz_ns':
      return isoTimestamp(toBigInt(value), MICROS_PER_DAY * 1000n, 1n) + (cat === 'timestamptz_ns' ? 'Z' : '');
    case 'decimal':
      return formatDecimal(toBigInt(value), decimalOf(source)!.scale);
    case 'uuid': {
      const h = Buffer.from(value as Uint8Array).toString('hex');
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    }
    case 'fixed':
    case 'binary':
      return Buffer.from(value as Uint8Array).toString('base64');
    default:
      return String(value);
  }
}

/** The first `count` code points of `s` (a surrogate pair is one code point). */
function truncateCodePoints(s: string, count: number): string {
  if (s.length <= count) return s;
  let end = 0;
  for (let n = 0; n < count && end < s.length; n++) end += s.codePointAt(end)! > 0xffff ? 2 : 1;
  return s.slice(0, end);
}
