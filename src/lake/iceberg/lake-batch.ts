/**
 * Log record batches as lake record batches: the Arrow schema of a lake schema (table-shape.ts),
 * and the conversion of a batch of the table's Arrow schema (record/arrow-schema.ts) into it.
 *
 * | Iceberg      | Arrow                                  |
 * |--------------|----------------------------------------|
 * | boolean      | Bool                                   |
 * | int, long    | Int32, Int64                           |
 * | float, double| Float32, Float64                       |
 * | decimal(p,s) | Decimal(scale s, precision p, 128 bit) |
 * | string       | Utf8                                   |
 * | binary       | Binary                                 |
 * | date         | Date32 (days)                          |
 * | time         | Time64 (microseconds)                  |
 * | timestamp    | Timestamp (microseconds, no zone)      |
 * | timestamptz  | Timestamp (microseconds, 'UTC')        |
 *
 * Every field carries its Iceberg field id as metadata `PARQUET:field_id`, which the Parquet
 * writer turns into the Parquet field ids Iceberg readers resolve columns by; it is nullable when
 * the Iceberg field is optional.
 */
import * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import type { Column, TableInfo } from '../../common/schema.js';
import { sameArrowType, toArrowType } from '../../record/arrow-schema.js';
import { nullColumn } from '../../record/batch-evolution.js';
import { decimalOf, type IcebergPrimitive, type IcebergSchema } from './types.js';
import { BUCKET_COLUMN, icebergTypeOf, OFFSET_COLUMN, TIMESTAMP_COLUMN } from './table-shape.js';

export const FIELD_ID_KEY = 'PARQUET:field_id';

function arrowTypeOf(type: IcebergPrimitive): arrow.DataType {
  switch (type) {
    case 'boolean':
      return new arrow.Bool();
    case 'int':
      return new arrow.Int32();
    case 'long':
      return new arrow.Int64();
    case 'float':
      return new arrow.Float32();
    case 'double':
      return new arrow.Float64();
    case 'string':
      return new arrow.Utf8();
    case 'binary':
      return new arrow.Binary();
    case 'date':
      return new arrow.DateDay();
    case 'time':
      return new arrow.TimeMicrosecond();
    case 'timestamp':
      return new arrow.TimestampMicrosecond(null);
    case 'timestamptz':
      return new arrow.TimestampMicrosecond('UTC');
  }
  const decimal = decimalOf(type);
  if (decimal) return new arrow.Decimal(decimal.scale, decimal.precision, 128);
  throw new TributaryError('INVALID_TYPE', `Iceberg type ${type} has no lake column mapping`);
}

const arrowSchemas = new WeakMap<IcebergSchema, arrow.Schema>();

/** The Arrow schema of a lake schema; one object per lake schema object, so callers may cache on it. */
export function lakeArrowSchema(lakeSchema: IcebergSchema): arrow.Schema {
  let schema = arrowSchemas.get(lakeSchema);
  if (!schema) {
    schema = new arrow.Schema(lakeSchema.fields.map((f) => new arrow.Field(f.name, arrowTypeOf(f.type), !f.required, new Map([[FIELD_ID_KEY, String(f.id)]]))));
    arrowSchemas.set(lakeSchema, schema);
  }
  return schema;
}

/** Per row of a batch: its bucket, log offset and commit timestamp (µs), the lake's system columns. */
export interface SystemColumns {
  bucket: number;
  offsets: BigInt64Array;
  timestamps: BigInt64Array;
}

/**
 * The log offsets `first`, `first` + 1, … of `count` rows, for `SystemColumns.offsets`: written as
 * little-endian 32-bit halves (as metrics.ts reads longs), since a BigInt per row was a sixth of
 * the round's thread's time.
 */
export function consecutiveOffsets(first: bigint, count: number): BigInt64Array {
  if (first < 0n || first + BigInt(count) > 2n ** 63n) throw new TributaryError('INVALID_ARGUMENT', `offsets from ${first} for ${count} rows`);
  const offsets = new BigInt64Array(count);
  const words = new Uint32Array(offsets.buffer);
  let low = Number(first & 0xffffffffn);
  let high = Number(first >> 32n);
  for (let i = 0; i < count; ) {
    // Up to where the low word wraps, the high word stays: no test per row.
    const end = Math.min(count, i + 2 ** 32 - low);
    for (const base = low - i; i < end; i++) {
      words[2 * i] = base + i;
      words[2 * i + 1] = high;
    }
    low = 0;
    high++;
  }
  return offsets;
}

/**
 * The lake batch of a log batch. Columns the lake has and the batch lacks (the batch was written
 * with an older schema) are null; columns the lake lacks (not yet added to it) are left out.
 * Column buffers are shared with `batch`, except TINYINT and SMALLINT, widened to Iceberg's int.
 * `offsets` and `timestamps` become the lake batch's own columns: they must not share memory.
 */
export function toLakeBatch(batch: arrow.RecordBatch, info: TableInfo, lakeSchema: IcebergSchema, system: SystemColumns): arrow.RecordBatch {
  const rows = batch.numRows;
  const { offsets, timestamps } = system;
  if (offsets.length !== rows || timestamps.length !== rows) {
    throw new TributaryError('INVALID_ARGUMENT', `a batch of ${rows} rows with ${offsets.length} offsets and ${timestamps.length} timestamps`);
  }
  if (offsets.buffer === timestamps.buffer && offsets.byteOffset < timestamps.byteOffset + timestamps.byteLength && timestamps.byteOffset < offsets.byteOffset + offsets.byteLength) {
    throw new TributaryError('INVALID_ARGUMENT', 'offsets and timestamps share memory');
  }
  const schema = lakeArrowSchema(lakeSchema);
  const batchColumns = new Map(batch.schema.fields.map((f, i) => [f.name, i]));
  const tableColumns = new Map<string, Column>(info.schema.columns.map((c) => [c.name, c]));
  const children = schema.fields.map((field, i): arrow.Data => {
    switch (field.name) {
      case BUCKET_COLUMN:
        return arrow.makeData({ type: field.type as arrow.Int32, length: rows, nullCount: 0, data: new Int32Array(rows).fill(system.bucket) });
      case OFFSET_COLUMN:
        return arrow.makeData({ type: field.type as arrow.Int64, length: rows, nullCount: 0, data: offsets });
      case TIMESTAMP_COLUMN:
        return arrow.makeData({ type: field.type as arrow.TimestampMicrosecond, length: rows, nullCount: 0, data: timestamps });
    }
    const index = batchColumns.get(field.name);
    if (index === undefined) {
      if (!field.nullable) throw new TributaryError('INVALID_ARGUMENT', `lake column '${field.name}' is required but the batch has no such column`);
      return nullColumn(field.type, rows);
    }
    const column = tableColumns.get(field.name);
    const given = batch.schema.fields[index].type;
    if (!column || !sameArrowType(given, toArrowType(column.type)) || icebergTypeOf(column.type) !== lakeSchema.fields[i].type) {
      throw new TributaryError('INVALID_ARGUMENT', `batch column '${field.name}' of Arrow type ${String(given)} does not match lake column type ${lakeSchema.fields[i].type}`);
    }
    const data = batch.data.children[index];
    const kind = column.type.kind;
    return kind === 'TINYINT' || kind === 'SMALLINT' ? widenedToInt32(data, field.type as arrow.Int32) : data.clone(field.type);
  });
  return new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(schema.fields), length: rows, nullCount: 0, children }));
}

/**
 * Int8 or Int16 values as Int32. The validity bitmap is shared, read from `data.offset` on as
 * arrow does for sliced data, whose values are already cut to the slice.
 */
function widenedToInt32(data: arrow.Data, type: arrow.Int32): arrow.Data {
  const values = new Int32Array(data.length);
  values.set((data.values as Int8Array | Int16Array).subarray(0, data.length));
  return arrow.makeData({ type, offset: data.offset, length: data.length, nullCount: data.nullCount, nullBitmap: data.nullBitmap, data: values });
}
