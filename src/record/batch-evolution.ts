/**
 * Log batches across schema versions (ADD COLUMN, fluss.md §2.7). Every batch names the schema id
 * it was written with; a reader decodes it with that schema — or with the projection of it that
 * the server sent (`projectionIn`) — and presents it in the reader's own columns, matched by field
 * id: a column the batch lacks (added after it was written) is all null, a column the reader lacks
 * (added after the reader took its schema) is left out.
 */
import * as arrow from 'apache-arrow';
import { type Column, fieldIndexes, projectionIn, type Schema } from '../common/schema.js';
import { toArrowSchema } from './arrow-schema.js';

/** How the payloads of one schema id become batches of the reader's columns. */
export interface BatchLayout {
  /** The Arrow schema the payload decodes with. */
  decodeSchema: arrow.Schema;
  /** Per reader column, the decoded column holding it or -1; undefined when the decoded batch is already the reader's. */
  sources?: Int32Array;
}

/**
 * The layout of batches written with `writer`, read as `readerColumns`: with `projected`, the
 * server sent only the reader's columns that `writer` has (projectionIn); else the whole batch.
 */
export function batchLayout(writer: Schema, readerColumns: readonly Column[], projected: boolean): BatchLayout {
  const decoded = projected ? projectionIn(writer, readerColumns) : writer.columns.map((_, i) => i);
  const sources = fieldIndexes(
    decoded.map((i) => writer.columns[i]),
    readerColumns,
  );
  const identity = decoded.length === readerColumns.length && sources.every((s, i) => s === i);
  return { decodeSchema: toArrowSchema(writer, decoded), ...(identity ? {} : { sources }) };
}

/**
 * `batch`, decoded with a layout's schema, as a batch of `target` (the reader's Arrow schema):
 * column i is the batch's column `sources[i]`, or all null where that is -1. Columns are shared,
 * not copied.
 */
export function evolvedBatch(batch: arrow.RecordBatch, target: arrow.Schema, sources: Int32Array): arrow.RecordBatch {
  const rows = batch.numRows;
  const children = target.fields.map((field, i) => {
    const source = sources[i];
    return source < 0 ? nullColumn(field.type, rows) : batch.data.children[source].clone(field.type);
  });
  return new arrow.RecordBatch(target, arrow.makeData({ type: new arrow.Struct(target.fields), length: rows, nullCount: 0, children }));
}

/**
 * `batch`, presented in an older reader schema of a table, in a newer one (`target`): columns are
 * only ever added, so a name names the same column in both; the columns added since are null.
 */
export function inReaderSchema(batch: arrow.RecordBatch, target: arrow.Schema): arrow.RecordBatch {
  if (batch.schema === target) return batch;
  const names = batch.schema.fields.map((f) => f.name);
  return evolvedBatch(batch, target, Int32Array.from(target.fields, (f) => names.indexOf(f.name)));
}

/** A column of `length` nulls, with zeroed buffers of its own. */
export function nullColumn(type: arrow.DataType, length: number): arrow.Data {
  const nullBitmap = new Uint8Array((length + 7) >> 3);
  if (arrow.DataType.isUtf8(type) || arrow.DataType.isBinary(type)) {
    return arrow.makeData({ type: type as arrow.Utf8, length, nullCount: length, nullBitmap, valueOffsets: new Int32Array(length + 1), data: new Uint8Array(0) });
  }
  const count = arrow.DataType.isBool(type) ? (length + 7) >> 3 : arrow.DataType.isDecimal(type) ? 4 * length : length;
  const ArrayType = type.ArrayType as new (length: number) => Int32Array;
  return arrow.makeData({ type: type as arrow.Int, length, nullCount: length, nullBitmap, data: new ArrayType(count) });
}
