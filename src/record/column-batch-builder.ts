/**
 * Builds the Arrow record batches of a table schema from rows, columns or other Arrow batches,
 * ready for `encodeArrowPayload`.
 *
 * Every column keeps its values in typed arrays of its own that grow by doubling: bits for BOOLEAN,
 * Int8…Int64 / Float32 / Float64 / Int32 days for fixed widths, two int64 words per DECIMAL (low
 * word first: the little-endian 128-bit two's complement Arrow wants), int32 offsets plus UTF-8 or
 * raw bytes for strings and binaries, and a validity bitmap only once a null shows up. `build()`
 * hands those arrays to the batch and starts afresh, so no two columns or batches share memory
 * (apache-arrow's IPC writer corrupts streams whose columns do). `buildTransient()` lends them
 * instead, for a batch encoded at once: the builder then reuses their capacity, so a writer that
 * builds batch after batch allocates (and collects) almost nothing.
 *
 * Columns of JS strings are the costly input: a column given as an array of ASCII strings is
 * encoded with one native UTF-8 write of their concatenation, offsets following from the lengths.
 * Rows already encoded as CompactedRows (a primary-key table's writes and stored values) skip JS
 * values altogether: each field goes from the row's bytes into its column (`appendCompactedRow`).
 *
 * Rows read out of another encoding can be appended field by field (`appendValue`, `appendBytes`,
 * `endRow`), bytes copied from the caller's buffer without a view made per value.
 *
 * Appends are all-or-nothing: a value that does not fit its column throws INVALID_ROW (a
 * CompactedRow that does not decode, CORRUPT_MESSAGE) and leaves the builder as it was; `truncate`
 * takes back the rows of a caller's own many-row append that fails part-way.
 */
import { isUtf8 } from 'node:buffer';
import * as arrow from 'apache-arrow';
import { TributaryError } from '../common/errors.js';
import { type CompactedReader, MAX_COMPACT_DECIMAL_PRECISION } from '../common/key-encoder.js';
import { CompactedRowDecoder, type CompactedRowVisitor } from '../common/row-encoder.js';
import type { Column, Schema } from '../common/schema.js';
import { formatDataType } from '../common/types.js';
import { type Row, RowReader, toInternal, unknownColumn } from '../common/values.js';
import { align8 } from './arrow-payload.js';
import { sameArrowType, toArrowSchema } from './arrow-schema.js';

/** Estimated IPC framing and metadata of a payload, and per column (field node and buffer entries). */
const MESSAGE_OVERHEAD = 96;
const COLUMN_OVERHEAD = 64;
const MAX_VAR_BYTES = 0x7fffffff;
/** UTF-16 units of strings concatenated for one native write; longer columns go value by value. */
const MAX_CONCATENATED = 1 << 26;
const utf8 = new TextEncoder();

type FixedArray = Int8Array | Int16Array | Int32Array | Float32Array | Float64Array | BigInt64Array;
type FixedArrayConstructor = { new (length: number): FixedArray; readonly BYTES_PER_ELEMENT: number };

/** `arr`, or a copy at least `needed` long (doubling) when it is shorter. */
function grown<T extends Uint8Array | Int32Array | FixedArray>(arr: T, needed: number): T {
  if (needed <= arr.length) return arr;
  const next = new (arr.constructor as new (length: number) => T)(Math.max(needed, arr.length * 2, 64));
  (next as Uint8Array).set(arr as Uint8Array);
  return next;
}

function setBit(bits: Uint8Array, i: number): void {
  bits[i >> 3] |= 1 << (i & 7);
}

function clearBit(bits: Uint8Array, i: number): void {
  bits[i >> 3] &= ~(1 << (i & 7));
}

function bitAt(bits: Uint8Array, i: number): boolean {
  return (bits[i >> 3] & (1 << (i & 7))) !== 0;
}

/** Whether `bytes[start, end)` is well-formed UTF-8: what a JS string decoded from it encodes back to. */
function isWellFormedUtf8(bytes: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (bytes[i] >= 0x80) return isUtf8(bytes.subarray(i, end));
  return true;
}

/** Strings this short are copied byte by byte: cheaper than a view and a native copy. */
const SHORT_COPY = 64;

/** The first `byteLength` bytes of a typed array. */
function bytesOf(values: ArrayBufferView, byteLength: number): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, byteLength);
}

abstract class ColumnAppender {
  length = 0;
  nullCount = 0;
  /** Allocated at the first null; bit i set = value i present. */
  private validity: Uint8Array | null = null;

  constructor(readonly type: arrow.DataType) {}

  appendNull(): void {
    this.validityFor(1); // the new bit stays 0
    this.pushNull();
    this.nullCount++;
    this.length++;
  }

  /** Appends an internal value (values.ts), already checked against the column. */
  append(value: unknown): void {
    if (this.validity) setBit(this.validityFor(1), this.length);
    this.pushValue(value);
    this.length++;
  }

  /**
   * Appends the field `field` of a CompactedRow that `reader` is reading (not null), checked as
   * the reader checks it; a field that fails throws and leaves the column as it was.
   */
  appendCompacted(reader: CompactedReader, field: number): void {
    this.pushCompacted(reader, field);
    if (this.validity) setBit(this.validityFor(1), this.length);
    this.length++;
  }

  /** Takes back the values appended after the first `length`. */
  truncate(length: number): void {
    const validity = this.validity;
    if (validity) {
      for (let i = length; i < this.length; i++) {
        if (bitAt(validity, i)) clearBit(validity, i);
        else this.nullCount--;
      }
    }
    this.dropValues(length);
    this.length = length;
  }

  /** Appends the values of an Arrow column of this column's type (checked by the caller). */
  appendData(data: arrow.Data): void {
    const n = data.length;
    if (data.nullCount > 0) {
      const validity = this.validityFor(n);
      for (let i = 0; i < n; i++) {
        if (bitAt(data.nullBitmap, data.offset + i)) setBit(validity, this.length + i);
      }
      this.nullCount += data.nullCount;
    } else {
      this.markPresent(n);
    }
    this.pushData(data);
    this.length += n;
  }

  /**
   * Marks `values` (null or undefined = null, `nulls` of them) from the current length on as
   * present or null; the caller appends their values and adds to the length.
   */
  protected markValidity(values: readonly unknown[], nulls: number): void {
    if (nulls === 0) {
      this.markPresent(values.length);
      return;
    }
    const validity = this.validityFor(values.length);
    for (let i = 0; i < values.length; i++) {
      if (values[i] !== null && values[i] !== undefined) setBit(validity, this.length + i);
    }
    this.nullCount += nulls;
  }

  /** Marks `count` values from the current length on as present, when the column has a bitmap. */
  protected markPresent(count: number): void {
    if (!this.validity) return;
    const validity = this.validityFor(count);
    for (let i = 0; i < count; i++) setBit(validity, this.length + i);
  }

  /** The bitmap, started (all present so far) or grown to hold `count` more values. */
  private validityFor(count: number): Uint8Array {
    if (!this.validity) {
      const bits = new Uint8Array(Math.max(8, ((this.length + count + 7) >> 3) * 2));
      bits.fill(0xff, 0, this.length >> 3);
      if (this.length & 7) bits[this.length >> 3] = (1 << (this.length & 7)) - 1;
      this.validity = bits;
    }
    this.validity = grown(this.validity, (this.length + count + 7) >> 3);
    return this.validity;
  }

  /** Bytes this column adds to an uncompressed payload body. */
  byteSize(): number {
    return (this.nullCount > 0 ? align8((this.length + 7) >> 3) : 0) + this.valuesByteSize();
  }

  /**
   * The column as Arrow data; the appender starts afresh, with new arrays, or with `reuse` on the
   * same ones (the data is then valid until the next append).
   */
  finish(reuse: boolean): arrow.Data {
    const nullBitmap = this.nullCount > 0 ? this.validity!.subarray(0, (this.length + 7) >> 3) : undefined;
    const data = this.finishValues(this.length, this.nullCount, nullBitmap, reuse);
    this.length = 0;
    this.nullCount = 0;
    this.validity = null;
    return data;
  }

  protected abstract pushNull(): void;
  protected abstract pushValue(value: unknown): void;

  /** Pushes a field of a CompactedRow; throws before changing anything when it does not read. */
  protected pushCompacted(reader: CompactedReader, field: number): void {
    this.pushValue(reader.read(field));
  }

  /** Undoes the pushes of the values from `from` to the current length. */
  protected abstract dropValues(from: number): void;
  protected abstract pushData(data: arrow.Data): void;
  protected abstract valuesByteSize(): number;
  /** With `reuse`, the value arrays may be kept (the bitmap never is: its bits are only ever set). */
  protected abstract finishValues(length: number, nullCount: number, nullBitmap: Uint8Array | undefined, reuse: boolean): arrow.Data;
}

class BoolColumn extends ColumnAppender {
  private bits = new Uint8Array(0);

  protected pushNull(): void {
    this.bits = grown(this.bits, (this.length + 8) >> 3);
  }

  protected pushValue(value: unknown): void {
    this.bits = grown(this.bits, (this.length + 8) >> 3);
    if (value) setBit(this.bits, this.length);
  }

  protected dropValues(from: number): void {
    for (let i = from; i < this.length; i++) clearBit(this.bits, i);
  }

  protected pushData(data: arrow.Data): void {
    this.bits = grown(this.bits, (this.length + data.length + 7) >> 3);
    for (let i = 0; i < data.length; i++) {
      if (bitAt(data.values, data.offset + i)) setBit(this.bits, this.length + i);
    }
  }

  protected valuesByteSize(): number {
    return align8((this.length + 7) >> 3);
  }

  protected finishValues(length: number, nullCount: number, nullBitmap: Uint8Array | undefined): arrow.Data {
    // Never reused: pushes only set bits, so old ones would show through.
    const data = arrow.makeData({ type: this.type as arrow.Bool, length, nullCount, nullBitmap, data: grown(this.bits, (length + 7) >> 3).subarray(0, (length + 7) >> 3) });
    this.bits = new Uint8Array(0);
    return data;
  }
}

/** Stores value `index` of a fixed-width column from a CompactedRow field: into `values`, or as int32 `words` of 64-bit elements. */
type CompactedStore = (reader: CompactedReader, field: number, values: FixedArray, words: Int32Array, index: number) => void;

/** Fixed-width values: `width` elements of `values` per value. */
class FixedColumn extends ColumnAppender {
  private values!: FixedArray;
  /** `values` as bytes. */
  private bytes!: Uint8Array;
  /** `values` as int32 words when its elements are 64-bit (empty otherwise). */
  private words!: Int32Array;
  private readonly valueBytes: number;

  constructor(
    type: arrow.DataType,
    private readonly ArrayType: FixedArrayConstructor,
    private readonly width: number,
    private readonly store: (values: FixedArray, index: number, value: unknown) => void,
    private readonly storeCompacted: CompactedStore,
    /** The typed array whose elements are this column's internal values, if any (bulk copies). */
    private readonly NativeInput?: FixedArrayConstructor,
  ) {
    super(type);
    this.setValues(new ArrayType(0));
    this.valueBytes = width * ArrayType.BYTES_PER_ELEMENT;
  }

  private setValues(values: FixedArray): void {
    this.values = values;
    this.bytes = bytesOf(values, values.byteLength);
    this.words = values.BYTES_PER_ELEMENT === 8 ? new Int32Array(values.buffer, values.byteOffset, values.length * 2) : NO_WORDS;
  }

  /** Whether `values` is the typed array of this column's internal values, copied as they are. */
  takesTypedArray(values: unknown): values is FixedArray {
    return this.NativeInput !== undefined && values instanceof this.NativeInput;
  }

  /** Appends values given as `takesTypedArray` says (no nulls). */
  appendTypedArray(values: FixedArray): void {
    this.markPresent(values.length);
    this.pushBytes(bytesOf(values, values.byteLength));
    this.length += values.length;
  }

  private reserve(count: number): void {
    const values = grown(this.values, (this.length + count) * this.width);
    if (values !== this.values) this.setValues(values);
  }

  protected pushNull(): void {
    this.reserve(1);
    // Zeros, also where a reused array still holds a value of an earlier batch.
    this.bytes.fill(0, this.length * this.valueBytes, (this.length + 1) * this.valueBytes);
  }

  protected pushValue(value: unknown): void {
    this.reserve(1);
    this.store(this.values, this.length, value);
  }

  protected override pushCompacted(reader: CompactedReader, field: number): void {
    if ((this.length + 1) * this.width > this.values.length) this.reserve(1);
    this.storeCompacted(reader, field, this.values, this.words, this.length);
  }

  protected dropValues(): void {
    // The places are overwritten by the next pushes, or zeroed when those are nulls.
  }

  private pushBytes(bytes: Uint8Array): void {
    this.reserve(bytes.length / this.valueBytes);
    this.bytes.set(bytes, this.length * this.valueBytes);
  }

  protected pushData(data: arrow.Data): void {
    this.pushBytes(bytesOf(data.values, data.length * this.valueBytes));
  }

  protected valuesByteSize(): number {
    return align8(this.length * this.valueBytes);
  }

  protected finishValues(length: number, nullCount: number, nullBitmap: Uint8Array | undefined, reuse: boolean): arrow.Data {
    const values = this.values.subarray(0, length * this.width);
    if (!reuse) this.setValues(new this.ArrayType(0));
    // makeData views the bytes with the type's own array (Uint32 words for decimals).
    return arrow.makeData({ type: this.type as arrow.Int, length, nullCount, nullBitmap, data: values as Int32Array });
  }
}

/** Utf8 and Binary: int32 offsets into one byte array. */
class VarBinaryColumn extends ColumnAppender {
  private offsets = new Int32Array(1);
  private bytes: Buffer = Buffer.alloc(0);
  private end = 0;
  private readonly utf8: boolean;

  constructor(type: arrow.DataType) {
    super(type);
    this.utf8 = arrow.DataType.isUtf8(type);
  }

  private reserve(values: number, bytes: number): void {
    if (this.end + bytes > MAX_VAR_BYTES) throw new TributaryError('RECORD_TOO_LARGE_EXCEPTION', `column of type ${String(this.type)} would exceed ${MAX_VAR_BYTES} bytes in one batch`);
    this.offsets = grown(this.offsets, this.length + values + 1);
    if (this.end + bytes > this.bytes.length) {
      // Buffer.alloc, never the shared pool of allocUnsafe: the bytes must be this column's own.
      // Never past the limit, so that what fits `bytes` is within it.
      const next = Buffer.alloc(Math.min(MAX_VAR_BYTES, Math.max(this.end + bytes, this.bytes.length * 2, 1024)));
      this.bytes.copy(next, 0, 0, this.end);
      this.bytes = next;
    }
  }

  protected pushNull(): void {
    this.reserve(1, 0);
    this.offsets[this.length + 1] = this.end;
  }

  protected pushValue(value: unknown): void {
    if (typeof value === 'string') {
      this.reserve(1, value.length * 3); // UTF-8 needs at most 3 bytes per UTF-16 unit
      this.end += this.bytes.write(value, this.end, 'utf8');
    } else {
      const bytes = value as Uint8Array;
      this.reserve(1, bytes.length);
      this.bytes.set(bytes, this.end);
      this.end += bytes.length;
    }
    this.offsets[this.length + 1] = this.end;
  }

  protected override pushCompacted(reader: CompactedReader, field: number): void {
    const start = reader.span(field);
    this.pushBytes(reader.input, start, reader.position);
  }

  /** Appends `input[start, end)` (see pushBytes). */
  appendBytes(input: Buffer, start: number, end: number): void {
    this.pushBytes(input, start, end);
    this.markPresent(1);
    this.length++;
  }

  /** Copies the bytes as they are, unless a string's are not well-formed UTF-8: those go as the JS string would. */
  private pushBytes(input: Buffer, start: number, end: number): void {
    if (this.utf8 && !isWellFormedUtf8(input, start, end)) return this.pushValue(input.toString('utf8', start, end));
    const size = end - start;
    if (this.end + size > this.bytes.length || this.length + 2 > this.offsets.length) this.reserve(1, size);
    const bytes = this.bytes;
    let at = this.end;
    if (size < SHORT_COPY) for (let i = start; i < end; i++) bytes[at++] = input[i];
    else {
      // A view and a typed array set: Buffer.copy's argument handling cost more than the copy at 100 bytes.
      bytes.set(new Uint8Array(input.buffer, input.byteOffset + start, size), at);
      at += size;
    }
    this.end = at;
    this.offsets[this.length + 1] = at;
  }

  protected dropValues(from: number): void {
    this.end = this.offsets[from];
  }

  /**
   * Appends strings checked by the caller, null or undefined for null (`nulls` of them), `text`
   * being the others concatenated (null when too long to concatenate). ASCII text is written with
   * one native call and each offset follows from a string length; anything else goes value by value.
   */
  appendStrings(values: readonly unknown[], text: string | null, nulls: number): void {
    const n = values.length;
    if (text !== null) {
      this.reserve(n, text.length);
      // Room for one byte per UTF-16 unit: all of it read and as many bytes written means ASCII.
      const { read, written } = utf8.encodeInto(text, this.bytes.subarray(this.end, this.end + text.length));
      if (read === text.length && written === text.length) return this.appendAscii(values, nulls);
    }
    for (const v of values) {
      if (v === null || v === undefined) this.appendNull();
      else this.append(v);
    }
  }

  /** Accounts for ASCII strings already written at the end of the bytes. */
  private appendAscii(values: readonly unknown[], nulls: number): void {
    const n = values.length;
    this.markValidity(values, nulls);
    const offsets = this.offsets;
    const at = this.length + 1;
    let end = this.end;
    for (let i = 0; i < n; i++) {
      const v = values[i];
      if (typeof v === 'string') end += v.length;
      offsets[at + i] = end;
    }
    this.end = end;
    this.length += n;
  }

  protected pushData(data: arrow.Data): void {
    const n = data.length;
    const source = data.valueOffsets as Int32Array;
    const first = source[0];
    const size = source[n] - first;
    this.reserve(n, size);
    this.bytes.set((data.values as Uint8Array).subarray(first, first + size), this.end);
    const shift = this.end - first;
    const offsets = this.offsets;
    const at = this.length;
    if (shift === 0) offsets.set(source.subarray(1, n + 1), at + 1);
    else for (let i = 1; i <= n; i++) offsets[at + i] = source[i] + shift;
    this.end += size;
  }

  protected valuesByteSize(): number {
    return align8(4 * (this.length + 1)) + align8(this.end);
  }

  protected finishValues(length: number, nullCount: number, nullBitmap: Uint8Array | undefined, reuse: boolean): arrow.Data {
    const data = arrow.makeData({
      type: this.type as arrow.Utf8,
      length,
      nullCount,
      nullBitmap,
      valueOffsets: this.offsets.subarray(0, length + 1),
      data: new Uint8Array(this.bytes.buffer, this.bytes.byteOffset, this.end),
    });
    if (!reuse) {
      this.offsets = new Int32Array(1); // offsets[0] stays 0 when reused
      this.bytes = Buffer.alloc(0);
    }
    this.end = 0;
    return data;
  }
}

const storeNumber = (values: FixedArray, i: number, v: unknown): void => {
  values[i] = v as number;
};
const storeBigInt = (values: FixedArray, i: number, v: unknown): void => {
  values[i] = v as bigint;
};
const storeMicrosOfDay = (values: FixedArray, i: number, v: unknown): void => {
  values[i] = BigInt(v as number);
};
/** BigInt64Array keeps the low 64 bits of what it is given: the low word, then the sign-extended high word. */
const storeDecimal128 = (values: FixedArray, i: number, v: unknown): void => {
  values[2 * i] = v as bigint;
  values[2 * i + 1] = (v as bigint) >> 64n;
};

const NO_WORDS = new Int32Array(0);

const compactedNumber: CompactedStore = (reader, field, values, _words, i) => {
  values[i] = reader.read(field) as number;
};
const compactedInt64: CompactedStore = (reader, field, _values, words, i) => {
  reader.readInt64(field, words, 2 * i);
};
/** A compact decimal's 64-bit unscaled value, sign-extended to 128 bits. */
const compactedDecimal64: CompactedStore = (reader, field, _values, words, i) => {
  reader.readInt64(field, words, 4 * i);
  words[4 * i + 2] = words[4 * i + 3] = words[4 * i + 1] >> 31;
};
const compactedDecimal128: CompactedStore = (reader, field, values, _words, i) => {
  storeDecimal128(values, i, reader.read(field));
};

function columnAppender(column: Column, type: arrow.DataType): ColumnAppender {
  const t = column.type;
  switch (t.kind) {
    case 'BOOLEAN':
      return new BoolColumn(type);
    case 'TINYINT':
      return new FixedColumn(type, Int8Array, 1, storeNumber, compactedNumber, Int8Array);
    case 'SMALLINT':
      return new FixedColumn(type, Int16Array, 1, storeNumber, compactedNumber, Int16Array);
    case 'INT':
    case 'DATE':
      return new FixedColumn(type, Int32Array, 1, storeNumber, compactedNumber, Int32Array);
    case 'BIGINT':
      return new FixedColumn(type, BigInt64Array, 1, storeBigInt, compactedInt64, BigInt64Array);
    case 'FLOAT':
      return new FixedColumn(type, Float32Array, 1, storeNumber, compactedNumber, Float32Array);
    case 'DOUBLE':
      return new FixedColumn(type, Float64Array, 1, storeNumber, compactedNumber, Float64Array);
    case 'DECIMAL':
      return new FixedColumn(type, BigInt64Array, 2, storeDecimal128, t.precision <= MAX_COMPACT_DECIMAL_PRECISION ? compactedDecimal64 : compactedDecimal128);
    case 'TIME':
      return new FixedColumn(type, BigInt64Array, 1, storeMicrosOfDay, compactedInt64);
    case 'TIMESTAMP':
    case 'TIMESTAMP_LTZ':
      // Below microsecond precision values must be truncated one by one.
      return new FixedColumn(type, BigInt64Array, 1, storeBigInt, compactedInt64, t.precision === 6 ? BigInt64Array : undefined);
    case 'CHAR':
    case 'STRING':
    case 'BINARY':
    case 'BYTES':
      return new VarBinaryColumn(type);
  }
}

/**
 * Checks a column of user values for a STRING or CHAR column as `toInternal` does (which throws
 * for what does not fit) and concatenates the strings, unless they are too long for that.
 */
function checkedStrings(column: Column, values: readonly unknown[]): { text: string | null; nulls: number } {
  const maxUnits = column.type.kind === 'CHAR' ? column.type.length : Infinity;
  let text: string | null = '';
  let nulls = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    // A CHAR value within its length in UTF-16 units is within it in characters too.
    if (typeof v !== 'string' || v.length > maxUnits) {
      if (toInternal(column, v) === null) {
        nulls++;
        continue;
      }
    }
    // Reading a character flattens a string that was built by concatenation in place (V8), so
    // that the native write copies it in one piece instead of walking its parts for every batch.
    (v as string).charCodeAt(0);
    if (text !== null) text = text.length + (v as string).length <= MAX_CONCATENATED ? text + (v as string) : null;
  }
  return { text, nulls };
}

function invalidRow(message: string): TributaryError {
  return new TributaryError('INVALID_ROW', message);
}

/** Appends the columns of a CompactedRow to their appenders. */
class CompactedAppend implements CompactedRowVisitor {
  constructor(private readonly appenders: readonly ColumnAppender[]) {}

  nullColumn(column: number): void {
    this.appenders[column].appendNull();
  }

  column(column: number, reader: CompactedReader): void {
    this.appenders[column].appendCompacted(reader, column);
  }
}

export class ColumnBatchBuilder {
  readonly arrowSchema: arrow.Schema;
  private readonly appenders: ColumnAppender[];
  private readonly indexByName = new Map<string, number>();
  private readonly scratch: unknown[];
  private readonly reader: RowReader;
  /** Made at the first CompactedRow appended. */
  private compactedRows: CompactedRowDecoder | undefined;
  private readonly compactedVisitor: CompactedRowVisitor;
  private rows = 0;

  constructor(readonly schema: Schema) {
    this.arrowSchema = toArrowSchema(schema);
    this.appenders = schema.columns.map((c, i) => columnAppender(c, this.arrowSchema.fields[i].type));
    schema.columns.forEach((c, i) => this.indexByName.set(c.name, i));
    this.scratch = new Array(schema.columns.length);
    this.reader = new RowReader(schema.columns);
    this.compactedVisitor = new CompactedAppend(this.appenders);
  }

  get rowCount(): number {
    return this.rows;
  }

  /** Size of the uncompressed payload `build()` would encode to, metadata estimated. */
  get estimatedSizeInBytes(): number {
    let size = MESSAGE_OVERHEAD + COLUMN_OVERHEAD * this.appenders.length;
    for (const a of this.appenders) size += a.byteSize();
    return size;
  }

  /** Appends a row of user values (column name → value, values.ts), checking each against its column. */
  appendRow(row: Row): void {
    this.appendInternalRow(this.reader.read(row, this.scratch));
  }

  /**
   * Appends a row of internal values (values.ts) in column order, null for null. The values are
   * trusted: they must come from `toInternal` or from a batch of the same schema.
   */
  appendInternalRow(values: ArrayLike<unknown>): void {
    if (values.length !== this.appenders.length) throw invalidRow(`a row of ${values.length} values for ${this.appenders.length} columns`);
    for (let i = 0; i < this.appenders.length; i++) {
      const v = values[i];
      if (v === null || v === undefined) this.appenders[i].appendNull();
      else this.appenders[i].append(v);
    }
    this.rows++;
  }

  /**
   * Appends a CompactedRow (row-encoder.ts) written with this builder's schema: `row` from `start`
   * to its end. The same values as `appendInternalRow` of its decoded values, without making them:
   * fields go from the bytes into the columns. A row that does not decode throws CORRUPT_MESSAGE
   * and leaves the builder as it was.
   */
  appendCompactedRow(row: Uint8Array, start = 0): void {
    this.compactedRows ??= new CompactedRowDecoder(this.schema.columns.map((c) => c.type));
    try {
      this.compactedRows.visit(row, this.compactedVisitor, start);
    } catch (err) {
      this.truncate(this.rows);
      throw err;
    }
    this.rows++;
  }

  /**
   * Appends an internal value (as `appendInternalRow` takes them, null for null) to column
   * `column` of the row being appended field by field: each column gets one value, by this or by
   * `appendBytes`, then `endRow()` ends the row. For a caller that reads rows out of an encoding of
   * its own, without making a row of values first.
   */
  appendValue(column: number, value: unknown): void {
    if (value === null || value === undefined) this.appenders[column].appendNull();
    else this.appenders[column].append(value);
  }

  /**
   * Appends the bytes `source[start, end)` to BYTES, BINARY, STRING or CHAR column `column` of the
   * row being appended field by field (see `appendValue`), without a view of them: the same value
   * as `appendValue` of those bytes (of their UTF-8 decoding for a string), trusted as that is.
   */
  appendBytes(column: number, source: Buffer, start: number, end: number): void {
    const appender = this.appenders[column];
    if (!(appender instanceof VarBinaryColumn)) throw invalidRow(`column '${this.schema.columns[column].name}' (${formatDataType(this.schema.columns[column].type)}) does not take bytes`);
    appender.appendBytes(source, start, end);
  }

  /** Ends a row appended field by field; throws, the row left unended, when a column has not exactly one value of it. */
  endRow(): void {
    const rows = this.rows + 1;
    for (let i = 0; i < this.appenders.length; i++) {
      if (this.appenders[i].length !== rows) throw invalidRow(`column '${this.schema.columns[i].name}' has ${this.appenders[i].length - this.rows} values of a row`);
    }
    this.rows = rows;
  }

  /**
   * Takes back everything appended after the first `rows` rows, a row left unended included: an
   * append of many rows that fails part-way leaves the builder as it was before it.
   */
  truncate(rows: number): void {
    if (rows < 0 || rows > this.rows) throw new RangeError(`cannot truncate ${this.rows} rows to ${rows}`);
    for (const appender of this.appenders) if (appender.length > rows) appender.truncate(rows);
    this.rows = rows;
  }

  /**
   * Appends columns of equal length by name; columns left out are null. A column is an Arrow
   * vector of the column's Arrow type, the column's own typed array (Int32Array for INT and DATE,
   * BigInt64Array for BIGINT and microsecond timestamps, Float64Array for DOUBLE, ...: copied as
   * is), or any array of user values, checked one by one as `appendRow` does.
   */
  appendColumns(columns: Record<string, ArrayLike<unknown> | arrow.Vector>): void {
    let count: number | undefined;
    let firstName = '';
    for (const name in columns) {
      if (!this.indexByName.has(name)) throw unknownColumn(name, this.schema.columns);
      const length = columns[name].length;
      if (count === undefined) [count, firstName] = [length, name];
      else if (length !== count) throw invalidRow(`column '${name}' has ${length} values, column '${firstName}' ${count}`);
    }
    if (count === undefined || count === 0) return;
    const n = count;
    // Check everything before appending anything.
    const inputs = this.schema.columns.map((column, i): (() => void) => {
      const appender = this.appenders[i];
      const given = columns[column.name];
      if (given === undefined) {
        if (!column.nullable) throw invalidRow(`column ${column.name}: missing, but the column is NOT NULL`);
        return () => {
          for (let r = 0; r < n; r++) appender.appendNull();
        };
      }
      if (given instanceof arrow.Vector) {
        this.checkArrowColumn(column, appender, given.type, given.nullCount);
        return () => given.data.forEach((d) => appender.appendData(d));
      }
      if (appender instanceof FixedColumn && appender.takesTypedArray(given)) return () => appender.appendTypedArray(given);
      if (appender instanceof VarBinaryColumn && (column.type.kind === 'STRING' || column.type.kind === 'CHAR') && Array.isArray(given)) {
        const { text, nulls } = checkedStrings(column, given);
        return () => appender.appendStrings(given, text, nulls);
      }
      const internal = new Array<unknown>(n);
      for (let r = 0; r < n; r++) internal[r] = toInternal(column, given[r]);
      return () => {
        for (const v of internal) {
          if (v === null) appender.appendNull();
          else appender.append(v);
        }
      };
    });
    for (const append of inputs) append();
    this.rows += n;
  }

  /** Appends a record batch whose columns are this schema's, in order, with the same Arrow types. */
  appendRecordBatch(batch: arrow.RecordBatch): void {
    const fields = batch.schema.fields;
    const expected = this.arrowSchema.fields;
    if (fields.length !== expected.length) {
      throw invalidRow(`record batch has columns (${fields.map((f) => f.name).join(', ')}), the table (${expected.map((f) => f.name).join(', ')})`);
    }
    const children = batch.data.children;
    fields.forEach((f, i) => {
      const column = this.schema.columns[i];
      if (f.name !== column.name) throw invalidRow(`record batch column ${i} is '${f.name}', the table's is '${column.name}'`);
      this.checkArrowColumn(column, this.appenders[i], f.type, children[i].nullCount);
    });
    children.forEach((d, i) => this.appenders[i].appendData(d));
    this.rows += batch.numRows;
  }

  private checkArrowColumn(column: Column, appender: ColumnAppender, type: arrow.DataType, nullCount: number): void {
    if (!sameArrowType(type, appender.type)) {
      throw invalidRow(`column '${column.name}' (${formatDataType(column.type)}) needs Arrow type ${String(appender.type)}, got ${String(type)}`);
    }
    if (!column.nullable && nullCount > 0) throw invalidRow(`column '${column.name}' is NOT NULL but has ${nullCount} nulls`);
  }

  /** The batch of everything appended since the last build; the builder starts afresh. */
  build(): arrow.RecordBatch {
    return this.finish(false);
  }

  /**
   * The same batch as `build()`, but its buffers stay the builder's, which reuses them: the batch
   * is valid until the next append, so encode it before then.
   */
  buildTransient(): arrow.RecordBatch {
    return this.finish(true);
  }

  /**
   * The batch for an encoding that follows at once, from a builder kept for the next batch:
   * transient, so the next batch fills memory already grown (a fresh builder doubles its way up to
   * a batch's size, zeroing and copying as it goes), unless it is larger than `maxKeptBytes`,
   * whose arrays are handed away so that a builder waiting for its next batch holds little.
   */
  buildToEncode(maxKeptBytes: number): arrow.RecordBatch {
    return this.estimatedSizeInBytes > maxKeptBytes ? this.build() : this.buildTransient();
  }

  private finish(reuse: boolean): arrow.RecordBatch {
    const children = this.appenders.map((a) => a.finish(reuse));
    const length = this.rows;
    this.rows = 0;
    return new arrow.RecordBatch(this.arrowSchema, arrow.makeData({ type: new arrow.Struct(this.arrowSchema.fields), length, nullCount: 0, children }));
  }
}
