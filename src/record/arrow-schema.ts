/**
 * The Arrow schema of a table schema: the schema every ARROW log payload of that schema id is
 * written and read with (payloads never carry it themselves).
 *
 * | Tributary          | Arrow                                  |
 * |--------------------|----------------------------------------|
 * | BOOLEAN            | Bool                                   |
 * | TINYINT … BIGINT   | Int8, Int16, Int32, Int64              |
 * | FLOAT, DOUBLE      | Float32, Float64                       |
 * | DECIMAL(p, s)      | Decimal(scale s, precision p, 128 bit) |
 * | CHAR(n), STRING    | Utf8                                   |
 * | BINARY(n), BYTES   | Binary                                 |
 * | DATE               | Date32 (days)                          |
 * | TIME(p)            | Time64 (microseconds)                  |
 * | TIMESTAMP(p)       | Timestamp (microseconds, no zone)      |
 * | TIMESTAMP_LTZ(p)   | Timestamp (microseconds, 'UTC')        |
 *
 * Field nullability is the column's.
 */
import * as arrow from 'apache-arrow';
import { TributaryError } from '../common/errors.js';
import type { Schema } from '../common/schema.js';
import type { DataType } from '../common/types.js';

export function toArrowType(t: DataType): arrow.DataType {
  switch (t.kind) {
    case 'BOOLEAN':
      return new arrow.Bool();
    case 'TINYINT':
      return new arrow.Int8();
    case 'SMALLINT':
      return new arrow.Int16();
    case 'INT':
      return new arrow.Int32();
    case 'BIGINT':
      return new arrow.Int64();
    case 'FLOAT':
      return new arrow.Float32();
    case 'DOUBLE':
      return new arrow.Float64();
    case 'DECIMAL':
      return new arrow.Decimal(t.scale, t.precision, 128);
    case 'CHAR':
    case 'STRING':
      return new arrow.Utf8();
    case 'BINARY':
    case 'BYTES':
      return new arrow.Binary();
    case 'DATE':
      return new arrow.DateDay();
    case 'TIME':
      return new arrow.TimeMicrosecond();
    case 'TIMESTAMP':
      return new arrow.TimestampMicrosecond(null);
    case 'TIMESTAMP_LTZ':
      return new arrow.TimestampMicrosecond('UTC');
  }
}

/**
 * Whether two Arrow types are the same for our purposes. apache-arrow's own comparison tells a
 * missing time zone (`undefined`) from an absent one (`null`, as decoded from IPC); this does not.
 */
export function sameArrowType(a: arrow.DataType, b: arrow.DataType): boolean {
  return a.typeId === b.typeId && String(a) === String(b) && (!arrow.DataType.isDecimal(a) || a.bitWidth === (b as arrow.Decimal).bitWidth);
}

const fullSchemas = new WeakMap<Schema, arrow.Schema>();
const projectedSchemas = new WeakMap<Schema, Map<string, arrow.Schema>>();

/**
 * The Arrow schema of `schema`, or of the projection on `columns` (column indexes, in the order
 * wanted). Results are cached per schema object, so callers may key caches on their identity.
 */
export function toArrowSchema(schema: Schema, columns?: readonly number[]): arrow.Schema {
  if (columns === undefined) {
    let full = fullSchemas.get(schema);
    if (!full) {
      full = new arrow.Schema(schema.columns.map((c) => new arrow.Field(c.name, toArrowType(c.type), c.nullable)));
      fullSchemas.set(schema, full);
    }
    return full;
  }
  let byColumns = projectedSchemas.get(schema);
  if (!byColumns) {
    byColumns = new Map();
    projectedSchemas.set(schema, byColumns);
  }
  const key = columns.join(',');
  let projected = byColumns.get(key);
  if (!projected) {
    const full = toArrowSchema(schema);
    checkProjection(columns, full.fields.length);
    projected = new arrow.Schema(columns.map((i) => full.fields[i]));
    byColumns.set(key, projected);
  }
  return projected;
}

/**
 * A projection names columns, each once, by their index among `columnCount` columns. It may name
 * none: a batch of only a row count is what an older batch holds of columns added after it.
 */
export function checkProjection(columns: readonly number[], columnCount: number): void {
  const seen = new Set<number>();
  for (const i of columns) {
    if (!Number.isInteger(i) || i < 0 || i >= columnCount) throw new TributaryError('INVALID_COLUMN_PROJECTION', `column index ${i} is out of range [0, ${columnCount})`);
    if (seen.has(i)) throw new TributaryError('INVALID_COLUMN_PROJECTION', `column index ${i} is projected twice`);
    seen.add(i);
  }
}
