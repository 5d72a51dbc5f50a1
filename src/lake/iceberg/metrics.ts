/**
 * Column metrics of a data file, computed from the Arrow batches written into it (spec:
 * "Manifests", the data_file fields value_counts, null_value_counts, nan_value_counts,
 * lower_bounds and upper_bounds), since the Parquet writer reports none.
 *
 *   value count  = rows, nulls and NaNs included
 *   null count   = null rows
 *   NaN count    = NaN rows; float and double columns only
 *   lower/upper  = the least and greatest non-null, non-NaN value in single-value encoding
 *                  (single-value.ts); -0.0 sorts before +0.0. None when the column has no such
 *                  value. Strings compare by code point (= UTF-8 byte order), binary by unsigned
 *                  bytes, and both follow Iceberg's default metrics mode truncate(16): the lower
 *                  bound is the first 16 code points (strings) or bytes (binary); the upper bound
 *                  is the value itself when no longer than that, else its first 16 with the last
 *                  code point (byte) incremented, dropping trailing ones that cannot be (U+10FFFF,
 *                  0xFF) and never landing on a surrogate; when none can be, there is no upper bound.
 *
 * Arrow columns are matched to schema fields by the `PARQUET:field_id` metadata of the Arrow
 * field, else by name; fields the batches do not carry get no metrics. Bounds are kept for Bool,
 * Int8/16/32, Int64, Float32/64, Decimal128, Utf8, Binary, Date (days), Time64 and Timestamp
 * columns; other Arrow types get counts only. Values are read from the typed arrays (no per-row
 * objects); the encoded form of a bound follows the schema field's Iceberg type.
 */
import * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import { fromSingleValue, toSingleValue } from './single-value.js';
import type { IcebergField, IcebergPrimitive, IcebergSchema } from './types.js';

export interface FileMetrics {
  recordCount: number;
  /** By field id. */
  valueCounts: Map<number, number>;
  nullValueCounts: Map<number, number>;
  nanValueCounts: Map<number, number>;
  lowerBounds: Map<number, Uint8Array>;
  upperBounds: Map<number, Uint8Array>;
}

/** Iceberg's default metrics mode: truncate(16). */
const TRUNCATE_LENGTH = 16;

export function computeMetrics(batches: readonly arrow.RecordBatch[], schema: IcebergSchema): FileMetrics {
  const columns = new Map<number, ColumnMetrics>();
  const positionsBySchema = new Map<arrow.Schema, Map<IcebergField, number>>();
  let recordCount = 0;
  for (const batch of batches) {
    recordCount += batch.numRows;
    let positions = positionsBySchema.get(batch.schema);
    if (!positions) {
      positions = fieldPositions(batch.schema, schema);
      positionsBySchema.set(batch.schema, positions);
    }
    for (const [field, position] of positions) {
      const data = batch.data.children[position];
      let column = columns.get(field.id);
      if (!column) {
        column = new ColumnMetrics(field, data.type);
        columns.set(field.id, column);
      }
      column.add(data);
    }
  }
  const metrics: FileMetrics = {
    recordCount,
    valueCounts: new Map(),
    nullValueCounts: new Map(),
    nanValueCounts: new Map(),
    lowerBounds: new Map(),
    upperBounds: new Map(),
  };
  for (const field of schema.fields) {
    const column = columns.get(field.id);
    if (column) column.report(metrics);
  }
  return metrics;
}

/** Which Arrow column holds each schema field. */
function fieldPositions(arrowSchema: arrow.Schema, schema: IcebergSchema): Map<IcebergField, number> {
  const byId = new Map<number, number>();
  const byName = new Map<string, number>();
  arrowSchema.fields.forEach((f, i) => {
    const id = f.metadata.get('PARQUET:field_id');
    if (id !== undefined) byId.set(Number(id), i);
    byName.set(f.name, i);
  });
  const positions = new Map<IcebergField, number>();
  for (const field of schema.fields) {
    const position = byId.get(field.id) ?? byName.get(field.name);
    if (position !== undefined) positions.set(field, position);
  }
  return positions;
}

/** The null bit of row `i` of `data` (validity bitmaps are not sliced: they start at data.offset). */
function isValid(data: arrow.Data, i: number): boolean {
  const bit = data.offset + i;
  return (data.nullBitmap![bit >> 3] & (1 << (bit & 7))) !== 0;
}

/** Least and greatest values of a column across batches, kept in the column's own representation. */
interface Bounds {
  add(data: arrow.Data): void;
  /** Values to encode as bounds, or undefined when the column had no non-null, non-NaN value. */
  result(): { lower: Uint8Array | undefined; upper: Uint8Array | undefined } | undefined;
}

class ColumnMetrics {
  private values = 0;
  private nulls = 0;
  private readonly bounds?: Bounds;
  private readonly floats?: FloatBounds;
  /** The Arrow type of the column, as text: every batch must hold the column alike. */
  private readonly typeName: string;

  constructor(
    private readonly field: IcebergField,
    type: arrow.DataType,
  ) {
    this.typeName = String(type);
    this.bounds = boundsFor(field, type);
    if (this.bounds instanceof FloatBounds) this.floats = this.bounds;
  }

  add(data: arrow.Data): void {
    if (String(data.type) !== this.typeName) {
      throw new TributaryError('INVALID_ARGUMENT', `column '${this.field.name}' is ${this.typeName} in one batch and ${data.type} in another`);
    }
    this.values += data.length;
    this.nulls += data.nullCount;
    this.bounds?.add(data);
  }

  report(m: FileMetrics): void {
    const id = this.field.id;
    m.valueCounts.set(id, this.values);
    m.nullValueCounts.set(id, this.nulls);
    if (this.floats) m.nanValueCounts.set(id, this.floats.nans);
    const result = this.bounds?.result();
    if (result?.lower) m.lowerBounds.set(id, result.lower);
    if (result?.upper) m.upperBounds.set(id, result.upper);
  }
}

function boundsFor(field: IcebergField, type: arrow.DataType): Bounds | undefined {
  const expectUnit = (unit: arrow.TimeUnit): void => {
    const wanted = field.type.endsWith('_ns') ? arrow.TimeUnit.NANOSECOND : arrow.TimeUnit.MICROSECOND;
    if (unit !== wanted) throw new TributaryError('INVALID_ARGUMENT', `column '${field.name}' (${field.type}) is held in Arrow as ${type}, not in ${arrow.TimeUnit[wanted].toLowerCase()}s`);
  };
  if (arrow.DataType.isBool(type)) return new BooleanBounds(field);
  if (arrow.DataType.isInt(type)) {
    if (type.bitWidth === 64) return type.isSigned ? new LongBounds(field) : undefined;
    return type.isSigned || type.bitWidth < 32 ? new IntBounds(field) : undefined;
  }
  if (arrow.DataType.isDate(type)) return type.unit === arrow.DateUnit.DAY ? new IntBounds(field) : undefined;
  if (arrow.DataType.isTime(type) || arrow.DataType.isTimestamp(type)) {
    expectUnit(type.unit);
    return new LongBounds(field);
  }
  if (arrow.DataType.isFloat(type)) return type.precision === arrow.Precision.HALF ? undefined : new FloatBounds(field);
  if (arrow.DataType.isDecimal(type)) return type.bitWidth === 128 ? new DecimalBounds(field) : undefined;
  if (arrow.DataType.isUtf8(type)) return new BytesBounds(field, true);
  if (arrow.DataType.isBinary(type)) return new BytesBounds(field, false);
  return undefined;
}

class BooleanBounds implements Bounds {
  private sawFalse = false;
  private sawTrue = false;

  constructor(private readonly field: IcebergField) {}

  add(data: arrow.Data): void {
    const bits = data.values as Uint8Array;
    const nulls = data.nullCount > 0;
    for (let i = 0; i < data.length && !(this.sawFalse && this.sawTrue); i++) {
      if (nulls && !isValid(data, i)) continue;
      const bit = data.offset + i;
      if (bits[bit >> 3] & (1 << (bit & 7))) this.sawTrue = true;
      else this.sawFalse = true;
    }
  }

  result() {
    if (!this.sawFalse && !this.sawTrue) return undefined;
    return { lower: toSingleValue(this.field.type, !this.sawFalse), upper: toSingleValue(this.field.type, this.sawTrue) };
  }
}

/** Int8/16/32, unsigned narrower ones and dates: every value fits a number exactly. */
class IntBounds implements Bounds {
  private min = Number.POSITIVE_INFINITY;
  private max = Number.NEGATIVE_INFINITY;

  constructor(private readonly field: IcebergField) {}

  add(data: arrow.Data): void {
    const values = data.values as Int32Array | Int16Array | Int8Array | Uint16Array | Uint8Array;
    const nulls = data.nullCount > 0;
    let min = this.min;
    let max = this.max;
    for (let i = 0; i < data.length; i++) {
      if (nulls && !isValid(data, i)) continue;
      const v = values[i];
      if (v < min) min = v;
      if (v > max) max = v;
    }
    this.min = min;
    this.max = max;
  }

  result() {
    if (this.min > this.max) return undefined;
    return { lower: toSingleValue(this.field.type, this.min), upper: toSingleValue(this.field.type, this.max) };
  }
}

/**
 * Int64, Time64 and Timestamp: compared as (signed high word, unsigned low word), no BigInt per row.
 * The bounds start at the greatest and least long, so that no row has to ask whether it is the first.
 */
class LongBounds implements Bounds {
  private seen = false;
  private minHi = 0x7fffffff;
  private minLo = 0xffffffff;
  private maxHi = -0x80000000;
  private maxLo = 0;

  constructor(private readonly field: IcebergField) {}

  add(data: arrow.Data): void {
    const longs = data.values as BigInt64Array;
    const rows = data.length;
    const words = new Uint32Array(longs.buffer, longs.byteOffset, rows * 2);
    const nulls = data.nullCount > 0;
    let { minHi, minLo, maxHi, maxLo } = this;
    for (let i = 0; i < rows; i++) {
      if (nulls && !isValid(data, i)) continue;
      const lo = words[2 * i];
      const hi = words[2 * i + 1] | 0;
      if (hi < minHi || (hi === minHi && lo < minLo)) {
        minHi = hi;
        minLo = lo;
      }
      if (hi > maxHi || (hi === maxHi && lo > maxLo)) {
        maxHi = hi;
        maxLo = lo;
      }
    }
    if (rows > data.nullCount) this.seen = true;
    this.minHi = minHi;
    this.minLo = minLo;
    this.maxHi = maxHi;
    this.maxLo = maxLo;
  }

  result() {
    if (!this.seen) return undefined;
    const long = (hi: number, lo: number): bigint => (BigInt(hi) << 32n) | BigInt(lo);
    return { lower: toSingleValue(this.field.type, long(this.minHi, this.minLo)), upper: toSingleValue(this.field.type, long(this.maxHi, this.maxLo)) };
  }
}

/** Float32/64: NaNs counted and left out; -0.0 is less than +0.0. */
class FloatBounds implements Bounds {
  nans = 0;
  private min = Number.POSITIVE_INFINITY;
  private max = Number.NEGATIVE_INFINITY;
  private seen = false;

  constructor(private readonly field: IcebergField) {}

  add(data: arrow.Data): void {
    const values = data.values as Float32Array | Float64Array;
    const nulls = data.nullCount > 0;
    let { min, max, seen, nans } = this;
    for (let i = 0; i < data.length; i++) {
      if (nulls && !isValid(data, i)) continue;
      const v = values[i];
      if (v !== v) {
        nans++;
        continue;
      }
      seen = true;
      // Equal values differ only as -0.0 and +0.0: the sign decides (1 / -0 = -Infinity).
      if (v < min || (v === min && 1 / v < 0)) min = v;
      if (v > max || (v === max && 1 / v > 0)) max = v;
    }
    this.min = min;
    this.max = max;
    this.seen = seen;
    this.nans = nans;
  }

  result() {
    if (!this.seen) return undefined;
    return { lower: toSingleValue(this.field.type, this.min), upper: toSingleValue(this.field.type, this.max) };
  }
}

/** Decimal128: four little-endian 32-bit words per value, compared as a signed 128-bit integer. */
class DecimalBounds implements Bounds {
  private seen = false;
  private readonly min = new Uint32Array(4);
  private readonly max = new Uint32Array(4);

  constructor(private readonly field: IcebergField) {}

  add(data: arrow.Data): void {
    const words = data.values as Uint32Array;
    const nulls = data.nullCount > 0;
    const { min, max } = this;
    for (let i = 0; i < data.length; i++) {
      if (nulls && !isValid(data, i)) continue;
      const at = 4 * i;
      if (!this.seen) {
        this.seen = true;
        for (let w = 0; w < 4; w++) min[w] = max[w] = words[at + w];
        continue;
      }
      if (compare128(words, at, min) < 0) for (let w = 0; w < 4; w++) min[w] = words[at + w];
      if (compare128(words, at, max) > 0) for (let w = 0; w < 4; w++) max[w] = words[at + w];
    }
  }

  result() {
    if (!this.seen) return undefined;
    return { lower: toSingleValue(this.field.type, int128(this.min)), upper: toSingleValue(this.field.type, int128(this.max)) };
  }
}

/** Sign of words[at..at+4) minus b, both signed 128-bit little-endian word arrays. */
function compare128(words: Uint32Array, at: number, b: Uint32Array): number {
  const hiA = words[at + 3] | 0;
  const hiB = b[3] | 0;
  if (hiA !== hiB) return hiA < hiB ? -1 : 1;
  for (let w = 2; w >= 0; w--) {
    if (words[at + w] !== b[w]) return words[at + w] < b[w] ? -1 : 1;
  }
  return 0;
}

function int128(words: Uint32Array): bigint {
  const unsigned = (BigInt(words[3]) << 96n) | (BigInt(words[2]) << 64n) | (BigInt(words[1]) << 32n) | BigInt(words[0]);
  return BigInt.asIntN(128, unsigned);
}

/** Utf8 and Binary: unsigned byte order (for UTF-8, code point order), truncated bounds. */
class BytesBounds implements Bounds {
  private min?: Uint8Array;
  private max?: Uint8Array;

  constructor(
    private readonly field: IcebergField,
    private readonly utf8: boolean,
  ) {}

  add(data: arrow.Data): void {
    const offsets = data.valueOffsets as Int32Array;
    const bytes = data.values as Uint8Array;
    const nulls = data.nullCount > 0;
    let minAt = -1;
    let maxAt = -1;
    // The first bytes of the least and greatest value so far (-1: empty): a value whose first byte
    // lies strictly between them is neither, and most values are decided by that alone.
    let minFirst = -1;
    let maxFirst = -1;
    for (let i = 0; i < data.length; i++) {
      if (nulls && !isValid(data, i)) continue;
      const start = offsets[i];
      const end = offsets[i + 1];
      const first = start < end ? bytes[start] : -1;
      if (minAt < 0) {
        minAt = maxAt = i;
        minFirst = maxFirst = first;
        continue;
      }
      if (first <= minFirst && compareBytes(bytes, start, end, bytes, offsets[minAt], offsets[minAt + 1]) < 0) {
        minAt = i;
        minFirst = first;
      } else if (first >= maxFirst && compareBytes(bytes, start, end, bytes, offsets[maxAt], offsets[maxAt + 1]) > 0) {
        maxAt = i;
        maxFirst = first;
      }
    }
    if (minAt < 0) return;
    // Only the batch's winners are compared with (and copied into) the file's.
    const minStart = offsets[minAt];
    const minEnd = offsets[minAt + 1];
    if (!this.min || compareBytes(bytes, minStart, minEnd, this.min, 0, this.min.length) < 0) this.min = bytes.slice(minStart, minEnd);
    const maxStart = offsets[maxAt];
    const maxEnd = offsets[maxAt + 1];
    if (!this.max || compareBytes(bytes, maxStart, maxEnd, this.max, 0, this.max.length) > 0) this.max = bytes.slice(maxStart, maxEnd);
  }

  result() {
    if (!this.min || !this.max) return undefined;
    if (!this.utf8) {
      const upper = truncateBinaryMax(this.max);
      return { lower: toSingleValue(this.field.type, this.min.subarray(0, TRUNCATE_LENGTH)), upper: upper && toSingleValue(this.field.type, upper) };
    }
    const decoder = new TextDecoder();
    const lower = truncateCodePoints(decoder.decode(this.min));
    const upper = truncateStringMax(decoder.decode(this.max));
    return { lower: toSingleValue(this.field.type, lower), upper: upper === undefined ? undefined : toSingleValue(this.field.type, upper) };
  }
}

function compareBytes(a: Uint8Array, aStart: number, aEnd: number, b: Uint8Array, bStart: number, bEnd: number): number {
  const n = Math.min(aEnd - aStart, bEnd - bStart);
  for (let i = 0; i < n; i++) {
    const d = a[aStart + i] - b[bStart + i];
    if (d !== 0) return d;
  }
  return aEnd - aStart - (bEnd - bStart);
}

/** The first TRUNCATE_LENGTH bytes, the last one incremented (carrying); undefined if all are 0xFF. */
function truncateBinaryMax(max: Uint8Array): Uint8Array | undefined {
  if (max.length <= TRUNCATE_LENGTH) return max;
  const out = max.slice(0, TRUNCATE_LENGTH);
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i] !== 0xff) {
      out[i]++;
      return out.subarray(0, i + 1);
    }
  }
  return undefined;
}

function truncateCodePoints(s: string): string {
  const codePoints = Array.from(s);
  return codePoints.length <= TRUNCATE_LENGTH ? s : codePoints.slice(0, TRUNCATE_LENGTH).join('');
}

/** The first TRUNCATE_LENGTH code points, the last incremented (carrying, skipping surrogates); undefined if none can be. */
function truncateStringMax(max: string): string | undefined {
  const codePoints = Array.from(max, (c) => c.codePointAt(0)!);
  if (codePoints.length <= TRUNCATE_LENGTH) return max;
  for (let i = TRUNCATE_LENGTH - 1; i >= 0; i--) {
    const cp = codePoints[i];
    if (cp === 0x10ffff) continue;
    return String.fromCodePoint(...codePoints.slice(0, i), cp === 0xd7ff ? 0xe000 : cp + 1);
  }
  return undefined;
}

/** Sign of a − b, two bounds of Iceberg type `type` in single-value encoding. */
function compareBounds(type: IcebergPrimitive, a: Uint8Array, b: Uint8Array): number {
  const x = fromSingleValue(type, a);
  const y = fromSingleValue(type, b);
  // UTF-8 byte order is code point order.
  if (typeof x === 'string' || x instanceof Uint8Array) return compareBytes(a, 0, a.length, b, 0, b.length);
  if (x !== y) return x < y ? -1 : 1;
  // -0.0 sorts before +0.0.
  return typeof x === 'number' && x === 0 ? Number(!Object.is(x, -0)) - Number(!Object.is(y, -0)) : 0;
}

/**
 * The metrics of a file written in chunks, from the metrics of each chunk; they equal the whole
 * file's: counts add up, and bounds are the least lower and greatest upper bound of the chunks, as
 * truncation keeps their order (a truncated lower bound is a prefix of the value; a truncated upper
 * bound is the least string of 16 code points, or bytes, above every value with the same prefix).
 * A chunk whose values have no upper bound (16 leading code points U+10FFFF, or bytes 0xFF) holds
 * the greatest value, so the file has none either.
 */
export class MergedMetrics {
  private metrics?: FileMetrics;
  /** Fields with values but no upper bound. */
  private readonly unboundedAbove = new Set<number>();

  constructor(private readonly schema: IcebergSchema) {}

  add(m: FileMetrics): void {
    for (const id of m.lowerBounds.keys()) if (!m.upperBounds.has(id)) this.unboundedAbove.add(id);
    const into = this.metrics;
    if (!into) {
      this.metrics = m;
      return;
    }
    into.recordCount += m.recordCount;
    for (const key of ['valueCounts', 'nullValueCounts', 'nanValueCounts'] as const) {
      for (const [id, n] of m[key]) into[key].set(id, (into[key].get(id) ?? 0) + n);
    }
    for (const { id, type } of this.schema.fields) {
      const lower = m.lowerBounds.get(id);
      const least = into.lowerBounds.get(id);
      if (lower && (!least || compareBounds(type, lower, least) < 0)) into.lowerBounds.set(id, lower);
      const upper = m.upperBounds.get(id);
      const greatest = into.upperBounds.get(id);
      if (upper && (!greatest || compareBounds(type, upper, greatest) > 0)) into.upperBounds.set(id, upper);
    }
  }

  result(): FileMetrics {
    const m = this.metrics ?? computeMetrics([], this.schema);
    for (const id of this.unboundedAbove) m.upperBounds.delete(id);
    return m;
  }
}
