/**
 * Query results as exact JS values, read chunk by chunk from DuckDB's vectors as DuckDB streams them.
 *
 *   DuckDB type                       JS value
 *   BOOLEAN                           boolean
 *   TINYINT … INTEGER, FLOAT, DOUBLE  number
 *   BIGINT, HUGEINT (and unsigned)    bigint
 *   DECIMAL(p, s)                     string, exact ("12.30")
 *   VARCHAR, ENUM                     string
 *   BLOB                              Uint8Array
 *   DATE                              'YYYY-MM-DD'
 *   TIME                              'HH:MM:SS.ffffff'
 *   TIMESTAMP (_S, _MS, _NS)          'YYYY-MM-DDTHH:MM:SS.ffffff' (ISO-8601, no zone)
 *   TIMESTAMPTZ                       'YYYY-MM-DDTHH:MM:SS.ffffffZ' (the instant in UTC)
 *   LIST, ARRAY                       array;  STRUCT: object;  MAP: array of { key, value }
 *   anything else (INTERVAL, UUID…)   DuckDB's text for it
 *
 * Dates and timestamps outside years 0000–9999, and ±infinity, read as DuckDB's text.
 *
 * The common types are read from the raw vectors through the C API (`@duckdb/node-bindings`):
 * the node-api vectors test validity with BigInt arithmetic and wrap each temporal value in an
 * object, several times slower. Vector layouts used: fixed-width values little-endian, one per
 * row (DECIMAL in int16/int32/int64/int128 by precision, DATE int32 days, TIME and TIMESTAMP
 * int64 µs); VARCHAR and BLOB as 16-byte string_t = u32 length, then up to 12 inline bytes, or
 * a 4-byte prefix and a pointer to the bytes; validity as LSB-first bits, absent when all rows
 * are valid. Other types go through node-api's values.
 */
import duckdb, { type DuckDBDataChunk, type DuckDBDecimalType, type DuckDBResult, type DuckDBType, type DuckDBValue } from '@duckdb/node-api';
import bindings from '@duckdb/node-bindings';
import { formatDecimal, formatTime } from '../../common/values.js';

export interface QueryResult {
  /** Column names and DuckDB's spelling of their types, e.g. `DECIMAL(10,2)`, `TIMESTAMP WITH TIME ZONE`. */
  columns: { name: string; type: string }[];
  rows: unknown[][];
}

const TWO_DIGITS = Array.from({ length: 100 }, (_, i) => (i < 10 ? `0${i}` : String(i)));
const DAY_MICROS = 86_400_000_000;
/** 0000-01-01 and 9999-12-31 as days since the epoch: the range written as four-digit years. */
const FIRST_DAY = -719_528;
const LAST_DAY = 2_932_896;

/** 'YYYY-MM-DD' of a day in [FIRST_DAY, LAST_DAY] (the civil-from-days algorithm of H. Hinnant). */
function civilDate(days: number): string {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  return `${String(year).padStart(4, '0')}-${TWO_DIGITS[month]}-${TWO_DIGITS[day]}`;
}

/** DATE text; days outside years 0000–9999 read as DuckDB writes them. */
function dateValueText(days: number): string {
  if (days >= FIRST_DAY && days <= LAST_DAY) return civilDate(days);
  const value = new duckdb.DuckDBDateValue(days);
  return value.isFinite ? value.toString() : days > 0 ? 'infinity' : '-infinity';
}

/** ISO-8601 text of µs since the epoch, with or without a trailing Z; undefined outside years 0000–9999. */
function timestampText(micros: bigint, zone: boolean): string | undefined {
  let days: number;
  let rest: number;
  const m = Number(micros);
  if (Number.isSafeInteger(m)) {
    days = Math.floor(m / DAY_MICROS);
    rest = m - days * DAY_MICROS;
  } else {
    const d = micros / 86_400_000_000n - (micros % 86_400_000_000n < 0n ? 1n : 0n);
    days = Number(d);
    rest = Number(micros - d * 86_400_000_000n);
  }
  if (days < FIRST_DAY || days > LAST_DAY) return undefined;
  const seconds = Math.floor(rest / 1_000_000);
  const fraction = String(rest - seconds * 1_000_000 + 1_000_000).slice(1);
  const time = `${TWO_DIGITS[Math.floor(seconds / 3600)]}:${TWO_DIGITS[Math.floor(seconds / 60) % 60]}:${TWO_DIGITS[seconds % 60]}`;
  return `${civilDate(days)}T${time}.${fraction}${zone ? 'Z' : ''}`;
}

/** Converts one node-api value as the table in the header says. */
export function toJs(v: DuckDBValue): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (v instanceof duckdb.DuckDBDecimalValue) return formatDecimal(v.value, v.scale);
  if (v instanceof duckdb.DuckDBTimestampTZValue) return timestampText(v.micros, true) ?? v.toString();
  if (v instanceof duckdb.DuckDBTimestampValue) return timestampText(v.micros, false) ?? v.toString();
  if (v instanceof duckdb.DuckDBTimestampMillisecondsValue) return timestampText(v.millis * 1000n, false) ?? v.toString();
  if (v instanceof duckdb.DuckDBTimestampSecondsValue) return timestampText(v.seconds * 1_000_000n, false) ?? v.toString();
  if (v instanceof duckdb.DuckDBTimestampNanosecondsValue) return timestampText(v.nanos / 1000n - (v.nanos % 1000n < 0n ? 1n : 0n), false) ?? v.toString();
  if (v instanceof duckdb.DuckDBDateValue) return dateValueText(v.days);
  if (v instanceof duckdb.DuckDBTimeValue) return formatTime(Number(v.micros), 6);
  if (v instanceof duckdb.DuckDBBlobValue) return new Uint8Array(v.bytes); // a plain copy, not a Buffer
  if (v instanceof duckdb.DuckDBListValue || v instanceof duckdb.DuckDBArrayValue) return v.items.map(toJs);
  if (v instanceof duckdb.DuckDBStructValue) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v.entries)) out[k] = toJs(x);
    return out;
  }
  if (v instanceof duckdb.DuckDBMapValue) return v.entries.map((e) => ({ key: toJs(e.key), value: toJs(e.value) }));
  if (v instanceof duckdb.DuckDBUnionValue) return toJs(v.value);
  return v.toString();
}

type Vector = bindings.Vector;
/** Prepares one column of one chunk; returns the reader of its (valid) rows. */
type ColumnReader = (vector: Vector, rowCount: number, chunk: DuckDBDataChunk, column: number) => (row: number) => unknown;

function fixed<T>(width: number, view: (buffer: ArrayBuffer, byteOffset: number, length: number) => ArrayLike<T>, convert: (x: T) => unknown): ColumnReader {
  return (vector, rowCount) => {
    const bytes = bindings.vector_get_data(vector, rowCount * width);
    const values = view(bytes.buffer as ArrayBuffer, bytes.byteOffset, rowCount);
    return (row) => convert(values[row]);
  };
}

const same = <T>(x: T): T => x;
const int8 = (b: ArrayBuffer, o: number, n: number) => new Int8Array(b, o, n);
const uint8 = (b: ArrayBuffer, o: number, n: number) => new Uint8Array(b, o, n);
const int16 = (b: ArrayBuffer, o: number, n: number) => new Int16Array(b, o, n);
const uint16 = (b: ArrayBuffer, o: number, n: number) => new Uint16Array(b, o, n);
const int32 = (b: ArrayBuffer, o: number, n: number) => new Int32Array(b, o, n);
const uint32 = (b: ArrayBuffer, o: number, n: number) => new Uint32Array(b, o, n);
const int64 = (b: ArrayBuffer, o: number, n: number) => new BigInt64Array(b, o, n);
const uint64 = (b: ArrayBuffer, o: number, n: number) => new BigUint64Array(b, o, n);
const float32 = (b: ArrayBuffer, o: number, n: number) => new Float32Array(b, o, n);
const float64 = (b: ArrayBuffer, o: number, n: number) => new Float64Array(b, o, n);

const utf8 = new TextDecoder();

/** VARCHAR and BLOB: the bytes of each string_t, inline or behind its pointer. */
function strings(convert: (bytes: Uint8Array) => unknown): ColumnReader {
  return (vector, rowCount) => {
    const data = bindings.vector_get_data(vector, rowCount * 16);
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    return (row) => {
      const at = row * 16;
      const length = view.getUint32(at, true);
      return convert(length <= 12 ? data.subarray(at + 4, at + 4 + length) : bindings.get_data_from_pointer(data.buffer as ArrayBuffer, data.byteOffset + at + 8, length));
    };
  };
}

function decimal(type: DuckDBDecimalType): ColumnReader {
  const { width, scale } = type;
  if (width <= 4) return fixed(2, int16, (x: number) => formatDecimal(BigInt(x), scale));
  if (width <= 9) return fixed(4, int32, (x: number) => formatDecimal(BigInt(x), scale));
  if (width <= 18) return fixed(8, int64, (x: bigint) => formatDecimal(x, scale));
  return (vector, rowCount) => {
    const bytes = bindings.vector_get_data(vector, rowCount * 16);
    const words = new BigInt64Array(bytes.buffer, bytes.byteOffset, rowCount * 2);
    return (row) => formatDecimal((words[2 * row + 1] << 64n) | BigInt.asUintN(64, words[2 * row]), scale);
  };
}

const generic: ColumnReader = (_vector, _rowCount, chunk, column) => {
  const vector = chunk.getColumnVector(column);
  return (row) => toJs(vector.getItem(row));
};

function readerFor(type: DuckDBType): ColumnReader {
  const T = duckdb.DuckDBTypeId;
  switch (type.typeId) {
    case T.BOOLEAN:
      return fixed(1, uint8, (x: number) => x !== 0);
    case T.TINYINT:
      return fixed(1, int8, same);
    case T.UTINYINT:
      return fixed(1, uint8, same);
    case T.SMALLINT:
      return fixed(2, int16, same);
    case T.USMALLINT:
      return fixed(2, uint16, same);
    case T.INTEGER:
      return fixed(4, int32, same);
    case T.UINTEGER:
      return fixed(4, uint32, same);
    case T.BIGINT:
      return fixed(8, int64, same);
    case T.UBIGINT:
      return fixed(8, uint64, same);
    case T.FLOAT:
      return fixed(4, float32, same);
    case T.DOUBLE:
      return fixed(8, float64, same);
    case T.DECIMAL:
      return decimal(type as DuckDBDecimalType);
    case T.DATE:
      return fixed(4, int32, dateValueText);
    case T.TIME:
      return fixed(8, int64, (micros: bigint) => formatTime(Number(micros), 6));
    case T.TIMESTAMP:
    case T.TIMESTAMP_TZ: {
      const zone = type.typeId === T.TIMESTAMP_TZ;
      const Value = zone ? duckdb.DuckDBTimestampTZValue : duckdb.DuckDBTimestampValue;
      return fixed(8, int64, (micros: bigint) => timestampText(micros, zone) ?? new Value(micros).toString());
    }
    case T.VARCHAR:
      return strings((bytes) => utf8.decode(bytes));
    case T.BLOB:
      return strings((bytes) => new Uint8Array(bytes)); // a plain copy, not a Buffer view
    default:
      return generic;
  }
}

/** The rows of a result as they are read: its columns, then its rows chunk by chunk (DuckDB's vectors of up to 2048 rows). */
export interface RowStream {
  columns: QueryResult['columns'];
  chunks: AsyncIterable<unknown[][]>;
}

/** Reads the chunks of a result as they come, column vector by column vector. */
export function readRows(result: DuckDBResult, fetch: () => Promise<DuckDBDataChunk | null>): RowStream {
  const columnCount = result.columnCount;
  const names = result.columnNames();
  const types = result.columnTypes();
  const readers = types.map(readerFor);
  async function* chunks(): AsyncGenerator<unknown[][]> {
    for (;;) {
      const chunk = await fetch();
      if (!chunk || chunk.rowCount === 0) return;
      const n = chunk.rowCount;
      const rows: unknown[][] = [];
      for (let r = 0; r < n; r++) rows.push(new Array(columnCount).fill(null));
      for (let c = 0; c < columnCount; c++) {
        const vector = bindings.data_chunk_get_vector(chunk.chunk, c);
        const valid = bindings.vector_get_validity(vector, Math.ceil(n / 64) * 8) as Uint8Array | null;
        const read = readers[c](vector, n, chunk, c);
        for (let r = 0; r < n; r++) if (!valid || (valid[r >> 3] >> (r & 7)) & 1) rows[r][c] = read(r);
      }
      yield rows;
    }
  }
  return { columns: names.map((name, i) => ({ name, type: types[i].toString() })), chunks: chunks() };
}

/** Bytes a value counts for in a result's size: its text or bytes, 8 for any other scalar, nested values summed. */
export function valueBytes(v: unknown): number {
  if (typeof v === 'string') return v.length;
  if (v === null || typeof v !== 'object') return 8;
  if (v instanceof Uint8Array) return v.byteLength;
  let n = 0;
  for (const x of Array.isArray(v) ? v : Object.values(v)) n += valueBytes(x);
  return n;
}
