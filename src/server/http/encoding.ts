/**
 * The bodies of the REST API: rows going into a table, query results coming out.
 *
 * Rows in (POST …/rows), by Content-Type:
 *
 *   application/json                    [ { column: value, … }, … ]  one object per row; values as
 *                                       the client API takes them (docs/client.md), with BIGINT as
 *                                       a number (within ±2^53) or a digit string, DECIMAL as a
 *                                       string or number, DATE 'YYYY-MM-DD', TIME 'HH:MM:SS[.ffffff]',
 *                                       timestamps as ISO-8601 strings, BINARY/BYTES as base64
 *   application/vnd.apache.arrow.stream an Arrow IPC stream; its columns are matched to the
 *                                       table's by name and must have the table's Arrow types
 *                                       (record/arrow-schema.ts)
 *
 * Columns left out are null. Every row is checked before any is written; an error names the row
 * (from 1), the column, the value and the column's type: `row 2, column amount: 'x' is not a BIGINT`.
 *
 * Results out (POST /api/v1/sql), by Accept:
 *
 *   application/json (default)   { "columns": [ { "name", "type" } … ], "rows": [ [ value … ] … ] }
 *                                types are DuckDB's spelling; 64-bit and wider integers (BIGINT,
 *                                UBIGINT, HUGEINT) are strings, so every value of a column has one
 *                                JSON type and none loses digits; other numbers are numbers, NaN
 *                                and ±Infinity strings; DECIMAL exact strings; dates, times and
 *                                timestamps ISO-8601 strings; BLOBs base64; lists arrays, structs
 *                                objects
 *   application/vnd.apache.arrow.stream
 *                                one Arrow IPC stream without body compression, DuckDB types as in
 *                                ARROW_TYPES below; types without an entry become Utf8 text
 */
import * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import type { Column, Schema } from '../../common/schema.js';
import { type DataType, parseDataType } from '../../common/types.js';
import { atRow, type Row, shownValue, toInternal } from '../../common/values.js';
import type { QueryResult } from '../../query/duckdb/result.js';
import { arrowIpcStream, encodeArrowPayload } from '../../record/arrow-payload.js';
import { ColumnBatchBuilder } from '../../record/column-batch-builder.js';

export const ARROW_STREAM = 'application/vnd.apache.arrow.stream';

/** Rows of one Arrow record batch of a result: results are streamed as several. */
const RESULT_BATCH_ROWS = 65_536;

/**
 * The rows of a request body as one record batch of the table's schema, every value checked.
 * `body` is the parsed JSON (any value) or the raw bytes of an Arrow IPC stream.
 */
export function rowsBatch(schema: Schema, body: unknown): arrow.RecordBatch {
  const builder = new ColumnBatchBuilder(schema);
  if (body instanceof Uint8Array) {
    for (const batch of readIpcStream(body)) {
      const columns: Record<string, arrow.Vector> = {};
      batch.schema.fields.forEach((f, i) => (columns[f.name] = batch.getChildAt(i)!));
      builder.appendColumns(columns);
    }
    return builder.build();
  }
  if (!Array.isArray(body)) throw new TributaryError('INVALID_ARGUMENT', 'the body must be a JSON array of row objects, or an Arrow IPC stream');
  const binary = schema.columns.filter((c) => c.type.kind === 'BINARY' || c.type.kind === 'BYTES').map((c) => c.name);
  body.forEach((row: unknown, i) => {
    try {
      if (row === null || typeof row !== 'object' || Array.isArray(row)) {
        throw new TributaryError('INVALID_ROW', `${Array.isArray(row) ? 'an array' : shownValue(row)} is not a row: a row is an object of column names to values (the columns are ${schema.columns.map((c) => c.name).join(', ')})`);
      }
      builder.appendRow(binary.length === 0 ? (row as Row) : withBytes(row as Row, binary));
    } catch (err) {
      throw atRow(err, i + 1);
    }
  });
  return builder.build();
}

/** The row with its base64 strings in binary columns decoded. */
function withBytes(row: Row, binary: readonly string[]): Row {
  const out = { ...row };
  for (const name of binary) {
    const v = out[name];
    if (typeof v === 'string') {
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(v) || v.length % 4 !== 0) throw new TributaryError('INVALID_ROW', `column ${name}: ${shownValue(v)} is not base64`);
      out[name] = new Uint8Array(Buffer.from(v, 'base64'));
    }
  }
  return out;
}

function readIpcStream(bytes: Uint8Array): arrow.RecordBatch[] {
  try {
    return arrow.tableFromIPC(bytes).batches;
  } catch (err) {
    throw new TributaryError('CORRUPT_MESSAGE', `the body is not an Arrow IPC stream: ${(err as Error).message}`, { cause: err });
  }
}

/** JSON.stringify's replacer for result values (see the header). */
export function jsonValue(_key: string, v: unknown): unknown {
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number') return Number.isFinite(v) ? v : String(v);
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
  return v;
}

/** The JSON text of a result (see the header). */
export function resultJson(result: QueryResult): string {
  return JSON.stringify({ columns: result.columns, rows: result.rows }, jsonValue);
}

/** Arrow types of DuckDB result types, through the table type with that Arrow form (arrow-schema.ts). */
const ARROW_TYPES: Record<string, string> = {
  BOOLEAN: 'BOOLEAN',
  TINYINT: 'TINYINT',
  SMALLINT: 'SMALLINT',
  INTEGER: 'INT',
  BIGINT: 'BIGINT',
  UTINYINT: 'SMALLINT',
  USMALLINT: 'INT',
  UINTEGER: 'BIGINT',
  UBIGINT: 'DECIMAL(20, 0)',
  HUGEINT: 'DECIMAL(38, 0)',
  FLOAT: 'FLOAT',
  DOUBLE: 'DOUBLE',
  VARCHAR: 'STRING',
  BLOB: 'BYTES',
  DATE: 'DATE',
  TIME: 'TIME(6)',
  TIMESTAMP: 'TIMESTAMP(6)',
  TIMESTAMP_S: 'TIMESTAMP(6)',
  TIMESTAMP_MS: 'TIMESTAMP(6)',
  TIMESTAMP_NS: 'TIMESTAMP(6)',
  'TIMESTAMP WITH TIME ZONE': 'TIMESTAMP_LTZ(6)',
};

function resultColumnType(duckType: string): DataType | undefined {
  if (/^DECIMAL\(\d+,\s*\d+\)$/.test(duckType)) return parseDataType(duckType);
  const name = ARROW_TYPES[duckType];
  return name === undefined ? undefined : parseDataType(name);
}

/** The Arrow IPC stream of a result (see the header). */
export function resultArrowStream(result: QueryResult): Uint8Array {
  const text: boolean[] = [];
  const columns: Column[] = result.columns.map((c, i) => {
    const type = resultColumnType(c.type);
    text.push(type === undefined);
    return { name: c.name, type: type ?? { kind: 'STRING' }, nullable: true, fieldId: i };
  });
  const builder = new ColumnBatchBuilder({ columns, highestFieldId: columns.length - 1 });
  const payloads: Uint8Array[] = [];
  const internal = new Array<unknown>(columns.length);
  const flush = (): void => {
    payloads.push(encodeArrowPayload(builder.build(), 'NONE'));
  };
  for (const row of result.rows) {
    for (let c = 0; c < columns.length; c++) {
      const v = row[c];
      internal[c] = v === null || v === undefined ? null : text[c] ? (typeof v === 'string' ? v : JSON.stringify(v, jsonValue)) : toInternal(columns[c], v);
    }
    builder.appendInternalRow(internal);
    if (builder.rowCount === RESULT_BATCH_ROWS) flush();
  }
  if (builder.rowCount > 0 || payloads.length === 0) flush();
  return arrowIpcStream(builder.arrowSchema, payloads);
}
