/**
 * Appends Arrow record batches to a DuckDB table through data chunks of at most 2048 rows,
 * copying each column's Arrow buffer straight into the chunk's vector.
 *
 * The Node API has no Arrow import, so each column goes through the C API that
 * `@duckdb/node-api` wraps (`@duckdb/node-bindings`, installed with it): one memcpy per
 * fixed-width vector instead of a JS-side copy plus a flush, and string bytes handed over
 * without decoding them to JS strings.
 *
 * Arrow column → DuckDB column and how a vector is filled (`from`, `count` = rows of the chunk):
 *
 *   Bool                      BOOLEAN       bits unpacked to one byte per row
 *   Int8/16/32/64             TINYINT/SMALLINT/INTEGER/BIGINT   copied as they are
 *   Float32/64                FLOAT/DOUBLE                      copied as they are
 *   Decimal(p, s), 128-bit    DECIMAL(p, s) DuckDB keeps p ≤ 4 in int16, p ≤ 9 in int32,
 *                                           p ≤ 18 in int64 (the low words of Arrow's
 *                                           little-endian two's complement), else int128
 *                                           (Arrow's 16 bytes as they are)
 *   Utf8 / Binary             VARCHAR/BLOB  each value's bytes assigned to the vector
 *   DateDay                   DATE          int32 days, copied
 *   Time64 µs                 TIME          int64 µs of day, copied
 *   Timestamp µs              TIMESTAMP     int64 µs since the epoch, copied
 *   Timestamp µs with a zone  TIMESTAMPTZ   same (an instant)
 *
 * Validity: DuckDB's mask is 64-bit words with row i at bit i % 64 of word i / 64, which is
 * Arrow's LSB-first bitmap read as little-endian words, so a byte-aligned run is copied and
 * any other run is re-packed bit by bit.
 */
import duckdb, { type DuckDBConnection, type DuckDBType } from '@duckdb/node-api';
import bindings from '@duckdb/node-bindings';
import * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';

/** DuckDB's standard vector size: the most rows a data chunk holds. */
export const CHUNK_ROWS = 2048;

type Vector = bindings.Vector;

/** How one Arrow column lands in a DuckDB column. */
interface ColumnLoader {
  type: DuckDBType;
  /** Writes rows [from, from + count) of `data` into rows [0, count) of `vector` (values only). */
  write(data: arrow.Data, from: number, count: number, vector: Vector): void;
}

function copyFixed(bytesPerRow: number): ColumnLoader['write'] {
  return (data, from, count, vector) => {
    const values = data.values as ArrayBufferView;
    // The C API copies raw memory without bounds checks: refuse a buffer shorter than its rows.
    if ((from + count) * bytesPerRow > values.byteLength) throw new TributaryError('INVALID_ARGUMENT', `an Arrow ${String(data.type)} column holds fewer values than its ${data.length} rows`);
    bindings.copy_data_to_vector(vector, 0, values.buffer as ArrayBuffer, values.byteOffset + from * bytesPerRow, count * bytesPerRow);
  };
}

function writeBooleans(): ColumnLoader['write'] {
  const bytes = new Uint8Array(CHUNK_ROWS);
  return (data, from, count, vector) => {
    const bits = data.values as Uint8Array;
    const first = data.offset + from;
    for (let i = 0; i < count; i++) {
      const bit = first + i;
      bytes[i] = (bits[bit >> 3] >> (bit & 7)) & 1;
    }
    bindings.copy_data_to_vector(vector, 0, bytes.buffer, 0, count);
  };
}

/** DECIMAL(p ≤ 18): keeps the low 16, 32 or 64 bits of each 128-bit Arrow value. */
function writeNarrowDecimals(precision: number): ColumnLoader['write'] {
  const scratch = new Int32Array(CHUNK_ROWS * 2);
  const int16 = new Int16Array(scratch.buffer);
  return (data, from, count, vector) => {
    const words = data.values as Uint32Array; // four little-endian words per value
    let bytes: number;
    if (precision <= 4) {
      for (let i = 0; i < count; i++) int16[i] = words[(from + i) * 4];
      bytes = count * 2;
    } else if (precision <= 9) {
      for (let i = 0; i < count; i++) scratch[i] = words[(from + i) * 4];
      bytes = count * 4;
    } else {
      for (let i = 0; i < count; i++) {
        const w = (from + i) * 4;
        scratch[2 * i] = words[w];
        scratch[2 * i + 1] = words[w + 1];
      }
      bytes = count * 8;
    }
    bindings.copy_data_to_vector(vector, 0, scratch.buffer, 0, bytes);
  };
}

const isValid = (bitmap: Uint8Array, bit: number): boolean => ((bitmap[bit >> 3] >> (bit & 7)) & 1) === 1;

/** The validity bitmap of `data` when it has nulls, else undefined. */
function nullBitmap(data: arrow.Data): Uint8Array | undefined {
  return data.nullCount > 0 && data.nullBitmap && data.nullBitmap.length > 0 ? data.nullBitmap : undefined;
}

function writeVarLength(): ColumnLoader['write'] {
  return (data, from, count, vector) => {
    const offsets = data.valueOffsets as Int32Array;
    const bytes = data.values as Uint8Array;
    const bitmap = nullBitmap(data);
    for (let i = 0; i < count; i++) {
      const row = from + i;
      if (bitmap && !isValid(bitmap, data.offset + row)) continue;
      bindings.vector_assign_string_element_len(vector, i, bytes.subarray(offsets[row], offsets[row + 1]));
    }
  };
}

function unsupported(field: arrow.Field): TributaryError {
  return new TributaryError('INVALID_TYPE', `column '${field.name}': Arrow type ${String(field.type)} has no DuckDB mapping`);
}

function loaderFor(field: arrow.Field): ColumnLoader {
  const t = field.type as arrow.DataType;
  switch (t.typeId) {
    case arrow.Type.Bool:
      return { type: duckdb.BOOLEAN, write: writeBooleans() };
    case arrow.Type.Int: {
      const { bitWidth, isSigned } = t as arrow.Int;
      const type = { 8: duckdb.TINYINT, 16: duckdb.SMALLINT, 32: duckdb.INTEGER, 64: duckdb.BIGINT }[bitWidth];
      if (!isSigned || !type) break;
      return { type, write: copyFixed(bitWidth / 8) };
    }
    case arrow.Type.Float: {
      const { precision } = t as arrow.Float;
      if (precision === arrow.Precision.SINGLE) return { type: duckdb.FLOAT, write: copyFixed(4) };
      if (precision === arrow.Precision.DOUBLE) return { type: duckdb.DOUBLE, write: copyFixed(8) };
      break;
    }
    case arrow.Type.Decimal: {
      const { precision, scale, bitWidth } = t as arrow.Decimal;
      if (bitWidth !== 128 || precision < 1 || precision > 38) break;
      return { type: duckdb.DECIMAL(precision, scale), write: precision <= 18 ? writeNarrowDecimals(precision) : copyFixed(16) };
    }
    case arrow.Type.Utf8:
      return { type: duckdb.VARCHAR, write: writeVarLength() };
    case arrow.Type.Binary:
      return { type: duckdb.BLOB, write: writeVarLength() };
    case arrow.Type.Date:
      if ((t as arrow.Date_).unit !== arrow.DateUnit.DAY) break;
      return { type: duckdb.DATE, write: copyFixed(4) };
    case arrow.Type.Time:
      if ((t as arrow.Time).unit !== arrow.TimeUnit.MICROSECOND) break;
      return { type: duckdb.TIME, write: copyFixed(8) };
    case arrow.Type.Timestamp: {
      const { unit, timezone } = t as arrow.Timestamp;
      if (unit !== arrow.TimeUnit.MICROSECOND) break;
      return { type: timezone ? duckdb.TIMESTAMPTZ : duckdb.TIMESTAMP, write: copyFixed(8) };
    }
  }
  throw unsupported(field);
}

/** Copies the validity of rows [from, from + count) into the vector, when the column has nulls. */
function writeValidity(data: arrow.Data, from: number, count: number, vector: Vector, scratch: Uint8Array<ArrayBuffer>): void {
  const bitmap = nullBitmap(data);
  if (!bitmap) return;
  const first = data.offset + from;
  const byteCount = (count + 7) >> 3;
  if ((first & 7) === 0) {
    scratch.set(bitmap.subarray(first >> 3, (first >> 3) + byteCount));
  } else {
    scratch.fill(0, 0, byteCount);
    for (let i = 0; i < count; i++) if (isValid(bitmap, first + i)) scratch[i >> 3] |= 1 << (i & 7);
  }
  bindings.vector_ensure_validity_writable(vector);
  bindings.copy_data_to_vector_validity(vector, 0, scratch.buffer, scratch.byteOffset, Math.ceil(count / 64) * 8);
}

/** The DuckDB column types for an Arrow schema; throws INVALID_TYPE for a column without one. */
export function duckTypesOf(schema: arrow.Schema): DuckDBType[] {
  return schema.fields.map((f) => loaderFor(f).type);
}

/**
 * Appends all rows of `batches` (which must have `schema`'s columns, in order) to an existing
 * table whose columns have the types `duckTypesOf(schema)`.
 */
export async function appendArrowBatches(
  connection: DuckDBConnection,
  schemaName: string,
  tableName: string,
  schema: arrow.Schema,
  batches: Iterable<arrow.RecordBatch>,
): Promise<void> {
  const loaders = schema.fields.map(loaderFor);
  const chunk = duckdb.DuckDBDataChunk.create(loaders.map((l) => l.type));
  const vectors = loaders.map((_, i) => bindings.data_chunk_get_vector(chunk.chunk, i));
  const validity = new Uint8Array(CHUNK_ROWS / 8);
  const appender = await connection.createAppender(tableName, schemaName);
  try {
    for (const batch of batches) {
      if (batch.numCols !== loaders.length) {
        throw new TributaryError('INVALID_ARGUMENT', `a record batch has ${batch.numCols} columns where the schema has ${loaders.length}`);
      }
      const columns = batch.data.children;
      for (let c = 0; c < loaders.length; c++) {
        if (!arrow.util.compareTypes(columns[c].type, schema.fields[c].type)) throw new TributaryError('INVALID_ARGUMENT', `column '${schema.fields[c].name}' of a record batch has type ${String(columns[c].type)}, not ${String(schema.fields[c].type)}`);
      }
      for (let from = 0; from < batch.numRows; from += CHUNK_ROWS) {
        const count = Math.min(CHUNK_ROWS, batch.numRows - from);
        chunk.reset(); // all rows valid again, string heap emptied
        for (let c = 0; c < loaders.length; c++) {
          loaders[c].write(columns[c], from, count, vectors[c]);
          writeValidity(columns[c], from, count, vectors[c], validity);
        }
        chunk.rowCount = count;
        appender.appendDataChunk(chunk);
      }
    }
  } catch (err) {
    appender.clear();
    throw err;
  } finally {
    appender.closeSync();
  }
}
