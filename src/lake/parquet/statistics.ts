/**
 * What each row group of a Parquet file holds of its columns, from the statistics in its footer
 * (parquet-format, "Statistics" and "Logical Types"), by field id: its row count, and per column
 * chunk the null count and the smallest and largest value.
 *
 * Only what leaves no doubt is decoded; anything else says nothing (a reader then keeps the row
 * group):
 *   - min_value and max_value (fields 6 and 5), and only for a column whose column order is
 *     TypeDefinedOrder: the deprecated min and max compare signed bytes for strings;
 *   - these types, as the lake writer (and DuckDB) writes them:
 *       INT32   plain, INT(8|16|32, signed), DATE (days)                    → number
 *       INT64   plain, INT(64, signed), TIMESTAMP and TIME of any unit      → bigint
 *       INT32, INT64, FIXED_LEN_BYTE_ARRAY, BYTE_ARRAY  DECIMAL           → bigint (unscaled)
 *       BYTE_ARRAY  STRING (UTF8)                                          → string, strict UTF-8
 *     Unsigned integers, floats (NaN), booleans, INT96, binary and the rest are not decoded.
 *   - a value whose bytes have the wrong length, or a string that is not valid UTF-8 (a truncated
 *     bound cut inside a character) is unknown. Truncated bounds are still bounds: the writer
 *     cuts a min_value to a prefix and rounds a max_value up.
 */
import { decodeStruct, fieldOf, type TList, type TStruct } from './thrift-compact.js';

/** The type of a column's values, as statistics decode them. */
export type StatisticType =
  | { kind: 'int' | 'long' | 'date' | 'string' }
  | { kind: 'timestamp' | 'time'; unit: 'millis' | 'micros' | 'nanos'; utc: boolean }
  | { kind: 'decimal'; precision: number; scale: number };

/** What a row group holds of one column; a bound absent is unknown. */
export interface ColumnStatistics {
  type: StatisticType;
  nullCount?: number;
  min?: number | bigint | string;
  max?: number | bigint | string;
}

export interface RowGroupStatistics {
  rows: number;
  /** By field id, the columns with a decodable type. */
  columns: Map<number, ColumnStatistics>;
}

// Field ids and enum values of parquet.thrift.
const FILE_SCHEMA = 2;
const FILE_ROW_GROUPS = 4;
const FILE_COLUMN_ORDERS = 7;
const SCHEMA_TYPE = 1;
const SCHEMA_NUM_CHILDREN = 5;
const SCHEMA_CONVERTED_TYPE = 6;
const SCHEMA_SCALE = 7;
const SCHEMA_PRECISION = 8;
const SCHEMA_FIELD_ID = 9;
const SCHEMA_LOGICAL_TYPE = 10;
const GROUP_COLUMNS = 1;
const GROUP_NUM_ROWS = 3;
const CHUNK_META = 3;
const META_STATISTICS = 12;
const STATS_NULL_COUNT = 3;
const STATS_MAX_VALUE = 5;
const STATS_MIN_VALUE = 6;
const ORDER_TYPE_DEFINED = 1;

const enum Physical {
  INT32 = 1,
  INT64 = 2,
  BYTE_ARRAY = 6,
  FIXED_LEN_BYTE_ARRAY = 7,
}
const enum Converted {
  UTF8 = 0,
  DECIMAL = 5,
  DATE = 6,
  TIME_MILLIS = 7,
  TIME_MICROS = 8,
  TIMESTAMP_MILLIS = 9,
  TIMESTAMP_MICROS = 10,
  INT_8 = 15,
  INT_16 = 16,
  INT_32 = 17,
  INT_64 = 18,
}
// LogicalType union members.
const LOGICAL_STRING = 1;
const LOGICAL_DECIMAL = 5;
const LOGICAL_DATE = 6;
const LOGICAL_TIME = 7;
const LOGICAL_TIMESTAMP = 8;
const LOGICAL_INTEGER = 10;
const UNITS = { 1: 'millis', 2: 'micros', 3: 'nanos' } as const;

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The statistics of each row group of FileMetaData `metadata`, in order; undefined when the footer
 * is not one this code follows (then nothing is known of any row group).
 */
export function rowGroupStatistics(metadata: Uint8Array): RowGroupStatistics[] | undefined {
  try {
    const { struct: file } = decodeStruct(metadata);
    const schema = ((fieldOf(file, FILE_SCHEMA) as TList | undefined)?.items ?? []) as TStruct[];
    const [root, ...leaves] = schema;
    if (!root || fieldOf(root, SCHEMA_NUM_CHILDREN) !== leaves.length || leaves.some((l) => fieldOf(l, SCHEMA_NUM_CHILDREN) !== undefined)) return undefined;
    const orders = ((fieldOf(file, FILE_COLUMN_ORDERS) as TList | undefined)?.items ?? []) as TStruct[];
    const types = leaves.map((leaf, i) => (orders[i] && fieldOf(orders[i], ORDER_TYPE_DEFINED) !== undefined ? typeOf(leaf) : undefined));
    const groups = ((fieldOf(file, FILE_ROW_GROUPS) as TList | undefined)?.items ?? []) as TStruct[];
    return groups.map((group) => {
      const chunks = ((fieldOf(group, GROUP_COLUMNS) as TList | undefined)?.items ?? []) as TStruct[];
      const columns = new Map<number, ColumnStatistics>();
      if (chunks.length === leaves.length) {
        chunks.forEach((chunk, i) => {
          const type = types[i];
          const id = fieldOf(leaves[i], SCHEMA_FIELD_ID) as number | undefined;
          const stats = fieldOf((fieldOf(chunk, CHUNK_META) as TStruct | undefined) ?? { fields: [] }, META_STATISTICS) as TStruct | undefined;
          if (!type || id === undefined || !stats) return;
          const physical = fieldOf(leaves[i], SCHEMA_TYPE) as number;
          const nullCount = fieldOf(stats, STATS_NULL_COUNT) as bigint | undefined;
          const min = valueOf(type, physical, fieldOf(stats, STATS_MIN_VALUE) as Uint8Array | undefined);
          const max = valueOf(type, physical, fieldOf(stats, STATS_MAX_VALUE) as Uint8Array | undefined);
          columns.set(id, { type, ...(nullCount !== undefined ? { nullCount: Number(nullCount) } : {}), ...(min !== undefined ? { min } : {}), ...(max !== undefined ? { max } : {}) });
        });
      }
      return { rows: Number(fieldOf(group, GROUP_NUM_ROWS) as bigint), columns };
    });
  } catch {
    return undefined;
  }
}

/** The type of a schema leaf's values (see the header); undefined when not decoded. */
function typeOf(leaf: TStruct): StatisticType | undefined {
  const physical = fieldOf(leaf, SCHEMA_TYPE) as number | undefined;
  const logical = fieldOf(leaf, SCHEMA_LOGICAL_TYPE) as TStruct | undefined;
  const converted = fieldOf(leaf, SCHEMA_CONVERTED_TYPE) as number | undefined;
  const decimal = (precision: unknown, scale: unknown): StatisticType | undefined =>
    typeof precision === 'number' && typeof scale === 'number' && (physical === Physical.INT32 || physical === Physical.INT64 || physical === Physical.FIXED_LEN_BYTE_ARRAY || physical === Physical.BYTE_ARRAY) ? { kind: 'decimal', precision, scale } : undefined;
  const integer = (bits: number, signed: boolean): StatisticType | undefined => {
    if (!signed) return undefined;
    if (physical === Physical.INT32 && bits <= 32) return { kind: 'int' };
    return physical === Physical.INT64 && bits === 64 ? { kind: 'long' } : undefined;
  };
  if (logical) {
    const [member] = logical.fields;
    const inner = member?.value as TStruct;
    switch (member?.id) {
      case LOGICAL_STRING:
        return physical === Physical.BYTE_ARRAY ? { kind: 'string' } : undefined;
      case LOGICAL_DECIMAL:
        return decimal(fieldOf(inner, 2), fieldOf(inner, 1));
      case LOGICAL_DATE:
        return physical === Physical.INT32 ? { kind: 'date' } : undefined;
      case LOGICAL_INTEGER:
        return integer(fieldOf(inner, 1) as number, fieldOf(inner, 2) === true);
      case LOGICAL_TIME:
      case LOGICAL_TIMESTAMP: {
        const unit = UNITS[(fieldOf(inner, 2) as TStruct | undefined)?.fields[0]?.id as 1 | 2 | 3];
        // TIME in milliseconds is INT32; only the INT64 ones are decoded.
        return physical === Physical.INT64 && unit ? { kind: member.id === LOGICAL_TIME ? 'time' : 'timestamp', unit, utc: fieldOf(inner, 1) === true } : undefined;
      }
      default:
        return undefined;
    }
  }
  switch (converted) {
    case undefined:
      return physical === Physical.INT32 ? { kind: 'int' } : physical === Physical.INT64 ? { kind: 'long' } : undefined;
    case Converted.UTF8:
      return physical === Physical.BYTE_ARRAY ? { kind: 'string' } : undefined;
    case Converted.DECIMAL:
      return decimal(fieldOf(leaf, SCHEMA_PRECISION), fieldOf(leaf, SCHEMA_SCALE));
    case Converted.DATE:
      return physical === Physical.INT32 ? { kind: 'date' } : undefined;
    case Converted.INT_8:
    case Converted.INT_16:
    case Converted.INT_32:
      return integer(32, true);
    case Converted.INT_64:
      return integer(64, true);
    case Converted.TIME_MICROS:
    case Converted.TIMESTAMP_MILLIS:
    case Converted.TIMESTAMP_MICROS:
      // Converted types predate the UTC flag: they are UTC.
      return physical === Physical.INT64 ? { kind: converted === Converted.TIME_MICROS ? 'time' : 'timestamp', unit: converted === Converted.TIMESTAMP_MILLIS ? 'millis' : 'micros', utc: true } : undefined;
    case Converted.TIME_MILLIS:
    default:
      return undefined;
  }
}

/** The value of plain-encoded statistic `bytes` of type `type`; undefined when absent or not decodable. */
function valueOf(type: StatisticType, physical: number, bytes: Uint8Array | undefined): number | bigint | string | undefined {
  if (!bytes) return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const int32 = (): number | undefined => (bytes.length === 4 ? view.getInt32(0, true) : undefined);
  const int64 = (): bigint | undefined => (bytes.length === 8 ? view.getBigInt64(0, true) : undefined);
  switch (type.kind) {
    case 'int':
    case 'date':
      return int32();
    case 'long':
    case 'time':
    case 'timestamp':
      return int64();
    case 'string':
      try {
        return UTF8.decode(bytes);
      } catch {
        return undefined;
      }
    case 'decimal': {
      if (physical === Physical.INT32) return int32() === undefined ? undefined : BigInt(int32()!);
      if (physical === Physical.INT64) return int64();
      // Big-endian two's complement, as long as the writer made it.
      if (bytes.length === 0 || bytes.length > 16) return undefined;
      return BigInt.asIntN(bytes.length * 8, BigInt(`0x${Buffer.from(bytes).toString('hex')}`));
    }
  }
}
