/**
 * The data types of Tributary tables (DESIGN.md §2), their SQL spelling and their JSON form.
 *
 * Nullability lives on the column, not the type. ARRAY, MAP and ROW are not supported yet.
 */
import { TributaryError } from './errors.js';

export type DataType =
  | { kind: 'BOOLEAN' }
  | { kind: 'TINYINT' }
  | { kind: 'SMALLINT' }
  | { kind: 'INT' }
  | { kind: 'BIGINT' }
  | { kind: 'FLOAT' }
  | { kind: 'DOUBLE' }
  | { kind: 'DECIMAL'; precision: number; scale: number }
  | { kind: 'CHAR'; length: number }
  | { kind: 'STRING' }
  | { kind: 'BINARY'; length: number }
  | { kind: 'BYTES' }
  | { kind: 'DATE' }
  | { kind: 'TIME'; precision: number }
  | { kind: 'TIMESTAMP'; precision: number }
  | { kind: 'TIMESTAMP_LTZ'; precision: number };

export type TypeKind = DataType['kind'];

/** Highest fractional-second precision stored exactly (microseconds). */
export const MAX_TIME_PRECISION = 6;
export const MAX_DECIMAL_PRECISION = 38;

const SIMPLE: Record<string, DataType> = {
  BOOLEAN: { kind: 'BOOLEAN' },
  BOOL: { kind: 'BOOLEAN' },
  TINYINT: { kind: 'TINYINT' },
  SMALLINT: { kind: 'SMALLINT' },
  INT: { kind: 'INT' },
  INTEGER: { kind: 'INT' },
  BIGINT: { kind: 'BIGINT' },
  FLOAT: { kind: 'FLOAT' },
  REAL: { kind: 'FLOAT' },
  DOUBLE: { kind: 'DOUBLE' },
  'DOUBLE PRECISION': { kind: 'DOUBLE' },
  STRING: { kind: 'STRING' },
  VARCHAR: { kind: 'STRING' },
  TEXT: { kind: 'STRING' },
  BYTES: { kind: 'BYTES' },
  VARBINARY: { kind: 'BYTES' },
  BLOB: { kind: 'BYTES' },
  DATE: { kind: 'DATE' },
};

function invalid(text: string, why: string): TributaryError {
  return new TributaryError('INVALID_TYPE', `invalid type '${text}': ${why}`);
}

function checkPrecision(text: string, p: number): number {
  if (!Number.isInteger(p) || p < 0 || p > 9) throw invalid(text, 'precision must be between 0 and 9');
  if (p > MAX_TIME_PRECISION) throw invalid(text, `precision above ${MAX_TIME_PRECISION} (microseconds) is not supported yet`);
  return p;
}

/** Parses a type as written in SQL or in the client API, e.g. `DECIMAL(10, 2)`, `VARCHAR(20)`, `TIMESTAMP_LTZ(3)`. */
export function parseDataType(text: string): DataType {
  const norm = text.trim().replace(/\s+/g, ' ').toUpperCase();
  const m = /^([A-Z_ ]+?)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*(WITH(?:OUT)? (?:LOCAL )?TIME ZONE)?$/.exec(norm);
  if (!m) throw invalid(text, 'unknown type');
  const name = m[1].trim();
  const a = m[2] === undefined ? undefined : Number(m[2]);
  const b = m[3] === undefined ? undefined : Number(m[3]);
  const zone = m[4];
  const noArgs = (): void => {
    if (a !== undefined && name !== 'VARCHAR' && name !== 'VARBINARY') throw invalid(text, `${name} takes no parameters`);
  };
  if (zone && name !== 'TIMESTAMP' && name !== 'TIME') throw invalid(text, 'unknown type');
  if (SIMPLE[name]) {
    noArgs();
    return SIMPLE[name];
  }
  switch (name) {
    case 'DECIMAL':
    case 'NUMERIC':
    case 'DEC': {
      const precision = a ?? 10;
      const scale = b ?? 0;
      if (precision < 1 || precision > MAX_DECIMAL_PRECISION) throw invalid(text, 'precision must be between 1 and 38');
      if (scale > precision) throw invalid(text, 'scale must not exceed precision');
      return { kind: 'DECIMAL', precision, scale };
    }
    case 'CHAR':
    case 'CHARACTER': {
      const length = a ?? 1;
      if (b !== undefined || length < 1) throw invalid(text, 'length must be a positive integer');
      return { kind: 'CHAR', length };
    }
    case 'BINARY': {
      const length = a ?? 1;
      if (b !== undefined || length < 1) throw invalid(text, 'length must be a positive integer');
      return { kind: 'BINARY', length };
    }
    case 'TIME':
      if (b !== undefined) throw invalid(text, 'TIME takes one precision');
      if (zone) throw invalid(text, 'TIME with a time zone is not supported');
      return { kind: 'TIME', precision: checkPrecision(text, a ?? 0) };
    case 'TIMESTAMP':
      if (b !== undefined) throw invalid(text, 'TIMESTAMP takes one precision');
      if (zone === 'WITH LOCAL TIME ZONE') return { kind: 'TIMESTAMP_LTZ', precision: checkPrecision(text, a ?? 6) };
      if (zone && zone !== 'WITHOUT TIME ZONE') throw invalid(text, 'use TIMESTAMP_LTZ or TIMESTAMP WITH LOCAL TIME ZONE');
      return { kind: 'TIMESTAMP', precision: checkPrecision(text, a ?? 6) };
    case 'TIMESTAMP_LTZ':
      if (b !== undefined) throw invalid(text, 'TIMESTAMP_LTZ takes one precision');
      return { kind: 'TIMESTAMP_LTZ', precision: checkPrecision(text, a ?? 6) };
    case 'ARRAY':
    case 'MAP':
    case 'ROW':
      throw invalid(text, `${name} is not supported yet`);
    default:
      throw invalid(text, 'unknown type');
  }
}

/** The canonical SQL spelling, which `parseDataType` reads back to the same type. */
export function formatDataType(t: DataType): string {
  switch (t.kind) {
    case 'DECIMAL':
      return `DECIMAL(${t.precision}, ${t.scale})`;
    case 'CHAR':
    case 'BINARY':
      return `${t.kind}(${t.length})`;
    case 'TIME':
    case 'TIMESTAMP':
    case 'TIMESTAMP_LTZ':
      return `${t.kind}(${t.precision})`;
    default:
      return t.kind;
  }
}

export function sameType(a: DataType, b: DataType): boolean {
  return formatDataType(a) === formatDataType(b);
}

/** Types allowed as partition keys: scalar values with a stable, name-safe string form. */
export function isPartitionKeyType(t: DataType): boolean {
  return ['BOOLEAN', 'TINYINT', 'SMALLINT', 'INT', 'BIGINT', 'CHAR', 'STRING', 'DATE', 'TIME', 'TIMESTAMP', 'BINARY', 'BYTES'].includes(t.kind);
}
