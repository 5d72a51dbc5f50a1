/**
 * CompactedRow: the value format of primary-key tables' KV store, as Apache Fluss's CompactedRow
 * (fluss.md §3.2 COMPACTED), and the KV value that wraps it.
 *
 *   CompactedRow := NullBits Value*
 *   NullBits     := ceil(n / 8) bytes for a row of n columns; bit i (byte i >> 3, bit i & 7, least
 *                   significant first) set = column i is null and has no Value; unused high bits 0
 *   Value        := each non-null column in column order, in the compacted field encoding
 *                   whose grammar heads key-encoder.ts (varints, LE floats, length-prefixed
 *                   strings and bytes, decimals, timestamps)
 *
 *   KvValue      := SchemaId i16 little-endian, CompactedRow   (the schema the row was written with;
 *                   a reader decodes the row with that schema's columns, see KvValueDecoder)
 *
 * Primary keys are the compacted key encoding (key-encoder.ts) of the columns `primaryKeyLayout`
 * lists: the bucket key first, so the encoded bucket key is a byte prefix of every primary key of
 * that bucket key, and a prefix lookup is a range scan.
 *
 * Values in and out are the internal form of values.ts, in schema column order.
 */
import { TributaryError } from './errors.js';
import { CompactedReader, CompactedWriter } from './key-encoder.js';
import { fieldIndexes, type Schema } from './schema.js';
import type { DataType } from './types.js';

const nullBytesOf = (columnCount: number): number => (columnCount + 7) >> 3;

/**
 * Encodes rows of a fixed list of column types. Build one per schema and reuse it: it owns a
 * growable buffer, so each row costs one allocation, the returned copy, or none for a view.
 */
export class CompactedRowEncoder {
  private readonly writer: CompactedWriter;
  private readonly columnCount: number;
  private readonly nullBytes: number;

  constructor(types: readonly DataType[]) {
    this.writer = new CompactedWriter(types);
    this.columnCount = types.length;
    this.nullBytes = nullBytesOf(types.length);
  }

  /** The row of `values` (internal form, column order; null or undefined = null), in a new array. */
  encode(values: ArrayLike<unknown>): Uint8Array {
    this.write(values);
    return this.writer.copy();
  }

  /** The row of `values` as a view of the encoder's buffer, valid until its next call. */
  encodeView(values: ArrayLike<unknown>): Uint8Array {
    this.write(values);
    return this.writer.view();
  }

  private write(values: ArrayLike<unknown>): void {
    if (values.length !== this.columnCount) throw new TributaryError('INVALID_ROW', `a row of ${values.length} values for ${this.columnCount} columns`);
    const writer = this.writer;
    writer.begin(this.nullBytes);
    for (let i = 0; i < this.columnCount; i++) {
      const v = values[i];
      if (v === null || v === undefined) writer.setHeaderBit(i);
      else writer.write(i, v);
    }
  }
}

/**
 * Receives the columns of a row that CompactedRowDecoder.visit walks, in column order: a reader
 * of the row's fields in their stored form, for consumers that need no JS values.
 */
export interface CompactedRowVisitor {
  /** Column `column` is null. */
  nullColumn(column: number): void;
  /** Column `column` is not null: read its field, exactly once, with `reader` (`read`, `readInt64` or `span`). */
  column(column: number, reader: CompactedReader): void;
}

/**
 * Decodes rows of a fixed list of column types. Rows from clients go through it too, so anything
 * that is not exactly one row of these types (truncated, trailing bytes, values outside their
 * type) throws CORRUPT_MESSAGE. Nullability is not checked here: partial updates carry nulls in
 * NOT NULL columns they leave alone.
 */
export class CompactedRowDecoder {
  private readonly reader: CompactedReader;
  private readonly columnCount: number;
  private readonly nullBytes: number;

  constructor(types: readonly DataType[]) {
    this.reader = new CompactedReader(types);
    this.columnCount = types.length;
    this.nullBytes = nullBytesOf(types.length);
  }

  /**
   * The values of the row in `bytes` from `start` to the end, in `out` when given (resized to the
   * column count) or in a new array. Strings and byte arrays are copies, so `bytes` may be reused
   * afterwards.
   */
  decode(bytes: Uint8Array, out: unknown[] = new Array(this.columnCount), start = 0): unknown[] {
    const n = this.columnCount;
    const reader = this.open(bytes, start);
    out.length = n;
    for (let i = 0; i < n; i++) {
      out[i] = (bytes[start + (i >> 3)] & (1 << (i & 7))) !== 0 ? null : reader.read(i);
    }
    this.close(bytes);
    return out;
  }

  /**
   * Walks the row in `bytes` from `start` to the end, handing each column to `visitor`, and checks
   * it as `decode` does; a visitor that has seen some columns may still see the walk throw.
   */
  visit(bytes: Uint8Array, visitor: CompactedRowVisitor, start = 0): void {
    const n = this.columnCount;
    const reader = this.open(bytes, start);
    for (let i = 0; i < n; i++) {
      if ((bytes[start + (i >> 3)] & (1 << (i & 7))) !== 0) visitor.nullColumn(i);
      else visitor.column(i, reader);
    }
    this.close(bytes);
  }

  /** Checks the null bits of the row at `start` and starts the reader on its fields. */
  private open(bytes: Uint8Array, start: number): CompactedReader {
    const n = this.columnCount;
    const nullBytes = this.nullBytes;
    if (bytes.length - start < nullBytes) throw corrupt(`${bytes.length - start} bytes cannot hold the null bits of ${n} columns`);
    if (n & 7 && bytes[start + nullBytes - 1] >> (n & 7) !== 0) throw corrupt(`null bits set beyond the ${n} columns`);
    this.reader.begin(bytes, start + nullBytes);
    return this.reader;
  }

  /** Checks that the fields read end the row. */
  private close(bytes: Uint8Array): void {
    const reader = this.reader;
    if (reader.position !== bytes.length) throw corrupt(`${bytes.length - reader.position} bytes after the last of ${this.columnCount} columns`);
  }
}

function corrupt(why: string): TributaryError {
  return new TributaryError('CORRUPT_MESSAGE', `invalid compacted row: ${why}`);
}

const SCHEMA_ID_SIZE = 2;
/** Where the CompactedRow of a KV value starts. */
export const KV_VALUE_ROW_START = SCHEMA_ID_SIZE;

/** The KV value of a row written with schema `schemaId`. */
export function encodeKvValue(schemaId: number, row: Uint8Array): Uint8Array {
  checkSchemaId(schemaId);
  // Not a pooled Buffer: values stay in memory a while and must not pin a shared slab.
  return writeKvValue(schemaId, row, new Uint8Array(SCHEMA_ID_SIZE + row.length));
}

function checkSchemaId(schemaId: number): void {
  if (!Number.isInteger(schemaId) || schemaId < 0 || schemaId > 0x7fff) throw new TributaryError('INVALID_ARGUMENT', `schema id ${schemaId} does not fit an i16`);
}

function writeKvValue(schemaId: number, row: Uint8Array, out: Uint8Array): Uint8Array {
  out[0] = schemaId & 0xff;
  out[1] = schemaId >> 8;
  out.set(row, SCHEMA_ID_SIZE);
  return out;
}

/**
 * KV values of one schema packed side by side into buffers of their own: one allocation for many
 * values that are kept and dropped together, such as those of one write batch.
 */
export class KvValuePacker {
  private buf: Uint8Array;
  private used = 0;

  /** `expectedBytes`: the rows' total size, a hint for the first buffer. */
  constructor(
    private readonly schemaId: number,
    expectedBytes: number,
  ) {
    checkSchemaId(schemaId);
    this.buf = new Uint8Array(expectedBytes);
  }

  /** Bytes a KV value adds to its row. */
  static readonly OVERHEAD = SCHEMA_ID_SIZE;

  /** The KV value of `row`, a view of the packer's current buffer. */
  pack(row: Uint8Array): Uint8Array {
    const size = SCHEMA_ID_SIZE + row.length;
    if (this.used + size > this.buf.length) {
      this.buf = new Uint8Array(Math.max(size, this.buf.length));
      this.used = 0;
    }
    const out = this.buf.subarray(this.used, this.used + size);
    this.used += size;
    return writeKvValue(this.schemaId, row, out);
  }
}

/** The schema id and row of a KV value; the row is a view of `value`, not a copy. */
export function readKvValue(value: Uint8Array): { schemaId: number; row: Uint8Array } {
  return { schemaId: kvValueSchemaId(value), row: value.subarray(SCHEMA_ID_SIZE) };
}

/** The schema id a KV value was written with. */
export function kvValueSchemaId(value: Uint8Array): number {
  if (value.length < SCHEMA_ID_SIZE) throw new TributaryError('CORRUPT_MESSAGE', `a KV value of ${value.length} bytes has no schema id`);
  return (((value[1] << 8) | value[0]) << 16) >> 16;
}

/** How rows of one writer's schema become rows of the reader's: the decoder and, per reader column, the writer's column (-1: null). */
interface WriterLayout {
  decoder: CompactedRowDecoder;
  /** Undefined when the writer's schema is the reader's. */
  sources?: Int32Array;
}

/**
 * Decodes CompactedRows and KV values written with any schema of a table as rows of one schema,
 * the reader's: columns are matched by field id, and a column the writer's schema lacks (added
 * after the row was written) reads as null. Other schemas come from `schemaOf`, asked once per id;
 * an id it does not know is SCHEMA_NOT_EXIST.
 */
export class KvValueDecoder {
  private readonly layouts = new Map<number, WriterLayout>();
  private readonly width: number;
  private written: unknown[] = [];

  constructor(
    private readonly schema: Schema,
    schemaId: number,
    private readonly schemaOf: (schemaId: number) => Schema | undefined,
  ) {
    this.width = schema.columns.length;
    this.layouts.set(schemaId, { decoder: new CompactedRowDecoder(schema.columns.map((c) => c.type)) });
  }

  /** Whether rows of `schemaId` decode without asking `schemaOf`. */
  knows(schemaId: number): boolean {
    return this.layouts.has(schemaId);
  }

  /** The values of a KV value, in the reader's column order (see `decodeRow`). */
  decode(value: Uint8Array, out?: unknown[]): unknown[] {
    return this.decodeRow(kvValueSchemaId(value), value, out, SCHEMA_ID_SIZE);
  }

  /**
   * The values of a CompactedRow written with `schemaId` (`row` from `start` on), in `out` when
   * given or in a new array.
   */
  decodeRow(schemaId: number, row: Uint8Array, out: unknown[] = new Array(this.width), start = 0): unknown[] {
    const layout = this.layoutOf(schemaId);
    const sources = layout.sources;
    if (!sources) return layout.decoder.decode(row, out, start);
    const written = layout.decoder.decode(row, this.written, start);
    out.length = this.width;
    for (let i = 0; i < this.width; i++) out[i] = sources[i] < 0 ? null : written[sources[i]];
    return out;
  }

  private layoutOf(schemaId: number): WriterLayout {
    let layout = this.layouts.get(schemaId);
    if (!layout) {
      const writer = this.schemaOf(schemaId);
      if (!writer) throw new TributaryError('SCHEMA_NOT_EXIST', `a row written with schema ${schemaId}, which the table does not have`);
      layout = { decoder: new CompactedRowDecoder(writer.columns.map((c) => c.type)), sources: fieldIndexes(writer.columns, this.schema.columns) };
      this.layouts.set(schemaId, layout);
    }
    return layout;
  }
}

/**
 * The columns of a primary key in encoding order: the bucket key columns in bucket-key order, then
 * the other primary-key columns in primary-key order. Partition key columns are left out: a KV
 * store holds a single partition, where they are constant (Fluss's "physical" primary key).
 */
export function primaryKeyLayout(schema: Schema, bucketKeys: readonly string[], partitionKeys: readonly string[] = []): string[] {
  const primaryKey = schema.primaryKey;
  if (!primaryKey || primaryKey.length === 0) throw new TributaryError('INVALID_ARGUMENT', 'the table has no primary key');
  for (const k of bucketKeys) {
    if (!primaryKey.includes(k) || partitionKeys.includes(k)) {
      throw new TributaryError('INVALID_BUCKET_KEY', `bucket key '${k}' must be a primary-key column that is not a partition key`);
    }
  }
  if (new Set(bucketKeys).size !== bucketKeys.length) throw new TributaryError('INVALID_BUCKET_KEY', `bucket key (${bucketKeys.join(', ')}) lists a column twice`);
  const layout = [...bucketKeys, ...primaryKey.filter((k) => !bucketKeys.includes(k) && !partitionKeys.includes(k))];
  if (layout.length === 0) throw new TributaryError('INVALID_ARGUMENT', `the primary key (${primaryKey.join(', ')}) has no column besides the partition keys`);
  return layout;
}
