/**
 * Row values: what users write and read (external form) and the exact internal form that
 * Arrow columns hold.
 *
 * | type               | external (read)               | accepted on write                          | internal              |
 * |--------------------|-------------------------------|--------------------------------------------|-----------------------|
 * | BOOLEAN            | boolean                       | boolean                                    | boolean               |
 * | TINYINT/SMALLINT/INT | number                      | number, bigint (integral, in range)        | number                |
 * | BIGINT             | bigint                        | bigint, safe integer number, digit string  | bigint                |
 * | FLOAT/DOUBLE       | number                        | number                                     | number                |
 * | DECIMAL(p,s)       | string, exact ("12.30")       | string, number, bigint                     | bigint (unscaled)     |
 * | CHAR/STRING        | string                        | string                                     | string                |
 * | BINARY/BYTES       | Uint8Array                    | Uint8Array                                 | Uint8Array            |
 * | DATE               | string 'YYYY-MM-DD'           | string, Date, number (days since epoch)    | number (days)         |
 * | TIME(p)            | string 'HH:MM:SS[.ffffff]'    | string, number (ms of day)                 | number (µs of day)    |
 * | TIMESTAMP(p)       | Timestamp                     | Timestamp, Date, ISO string, bigint (µs)   | bigint (µs since epoch) |
 * | TIMESTAMP_LTZ(p)   | Timestamp (an instant)        | same                                       | bigint (µs since epoch) |
 */
import { TributaryError } from './errors.js';
import type { Column } from './schema.js';
import { type DataType, formatDataType } from './types.js';

export type Row = Record<string, unknown>;

/** `YYYY-MM-DD[ T]HH:MM:SS[.ffffff][Z|±HH:MM]`. */
const TIMESTAMP_TEXT = /^(-?\d{4,6})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?\s*(Z|[+-]\d{2}:?\d{2})?$/i;

/** A timestamp with microsecond precision. For TIMESTAMP it is a wall-clock time read as UTC. */
export class Timestamp {
  constructor(readonly epochMicros: bigint) {}

  static fromDate(d: Date): Timestamp {
    return new Timestamp(BigInt(d.getTime()) * 1000n);
  }

  /** Parses `YYYY-MM-DD[ T]HH:MM:SS[.ffffff][Z|±HH:MM]`; without a zone the time is read as UTC. */
  static parse(text: string): Timestamp {
    const m = TIMESTAMP_TEXT.exec(text.trim());
    if (!m) throw new TributaryError('INVALID_ROW', `cannot read '${text}' as a timestamp`);
    const ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4] ?? 0), Number(m[5] ?? 0), Number(m[6] ?? 0));
    if (Number.isNaN(ms)) throw new TributaryError('INVALID_ROW', `cannot read '${text}' as a timestamp`);
    let micros = BigInt(ms) * 1000n + BigInt((m[7] ?? '').padEnd(6, '0').slice(0, 6) || '0');
    if (m[8] && m[8].toUpperCase() !== 'Z') {
      const sign = m[8][0] === '-' ? -1n : 1n;
      const digits = m[8].slice(1).replace(':', '');
      const offsetMin = BigInt(Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2)));
      micros -= sign * offsetMin * 60_000_000n;
    }
    return new Timestamp(micros);
  }

  toDate(): Date {
    return new Date(Number(floorDiv(this.epochMicros, 1000n)));
  }

  /** ISO-8601 with six fractional digits and a trailing Z. */
  toISOString(): string {
    const ms = floorDiv(this.epochMicros, 1000n);
    const frac = this.epochMicros - ms * 1000n;
    const iso = new Date(Number(ms)).toISOString(); // ...sss Z
    return `${iso.slice(0, -1)}${frac.toString().padStart(3, '0')}Z`;
  }

  toJSON(): string {
    return this.toISOString();
  }

  toString(): string {
    return this.toISOString();
  }
}

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && (a < 0n) !== (b < 0n) ? q - 1n : q;
}

/** A value as a message shows it: strings quoted as SQL writes them, numbers as digits, long ones cut. */
export function shownValue(value: unknown): string {
  let text: string;
  if (typeof value === 'string') text = `'${value.replaceAll("'", "''")}'`;
  else if (value instanceof Uint8Array) return `${value.length} bytes`;
  else if (value instanceof Date) text = Number.isNaN(value.getTime()) ? 'an invalid Date' : value.toISOString();
  else if (value !== null && typeof value === 'object' && !(value instanceof Timestamp)) text = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) ?? String(value);
  else text = String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

function bad(col: Column, value: unknown, why: string): TributaryError {
  return new TributaryError('INVALID_ROW', `column ${col.name}: ${shownValue(value)} ${why}`);
}

/** `is not a T`, in the type's SQL spelling, with the written form it takes when given. */
export const notA = (t: DataType, form = ''): string => `is not a${/^[AEIOU]/.test(t.kind) ? 'n' : ''} ${formatDataType(t)}${form ? ` (${form})` : ''}`;

/** A row naming a column the table does not have. */
export function unknownColumn(name: string, columns: readonly Column[]): TributaryError {
  return new TributaryError('INVALID_ROW', `unknown column ${name} (the columns are ${columns.map((c) => c.name).join(', ')})`);
}

/**
 * The error of the `n`-th row (from 1) of a statement or request: `row 2, column amount: 'x' is
 * not a BIGINT`. Other errors pass as they are.
 */
export function atRow(err: unknown, n: number): unknown {
  return err instanceof TributaryError && err.errorName === 'INVALID_ROW' ? new TributaryError('INVALID_ROW', `row ${n}, ${err.message}`, { cause: err }) : err;
}

const INT_RANGE: Record<string, [number, number]> = {
  TINYINT: [-128, 127],
  SMALLINT: [-32768, 32767],
  INT: [-2147483648, 2147483647],
};
const BIGINT_MIN = -(2n ** 63n);
const BIGINT_MAX = 2n ** 63n - 1n;

/** Parses a decimal literal into its unscaled value at `scale`, rejecting lost digits. */
export function parseDecimal(text: string, precision: number, scale: number): bigint | undefined {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text.trim());
  if (!m || (m[2] === '' && (m[3] ?? '') === '')) return undefined;
  let digits = m[2] + (m[3] ?? '');
  let exp = -(m[3] ?? '').length + Number(m[4] ?? 0);
  // Bring to the target scale.
  const shift = exp + scale;
  if (shift >= 0) digits += '0'.repeat(shift);
  else {
    const cut = digits.slice(digits.length + shift);
    if (/[1-9]/.test(cut)) return undefined; // would lose digits
    digits = digits.slice(0, digits.length + shift);
  }
  exp = 0;
  const unscaled = BigInt(digits === '' ? '0' : digits) * (m[1] === '-' ? -1n : 1n);
  const abs = unscaled < 0n ? -unscaled : unscaled;
  if (abs >= 10n ** BigInt(precision)) return undefined;
  return unscaled;
}

export function formatDecimal(unscaled: bigint, scale: number): string {
  const neg = unscaled < 0n;
  let s = (neg ? -unscaled : unscaled).toString();
  if (scale > 0) {
    s = s.padStart(scale + 1, '0');
    s = `${s.slice(0, s.length - scale)}.${s.slice(s.length - scale)}`;
  }
  return neg ? `-${s}` : s;
}

function daysFromDateString(text: string): number | undefined {
  const m = /^(-?\d{4,6})-(\d{2})-(\d{2})$/.exec(text.trim());
  if (!m) return undefined;
  const ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  const d = new Date(ms);
  if (Number.isNaN(ms) || d.getUTCDate() !== Number(m[3])) return undefined;
  return ms / 86_400_000;
}

export function formatDate(days: number): string {
  return new Date(days * 86_400_000).toISOString().slice(0, 10);
}

function timeMicrosFromString(text: string): number | undefined {
  const m = /^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$/.exec(text.trim());
  if (!m) return undefined;
  const [h, mi, s] = [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)];
  if (h > 23 || mi > 59 || s > 59) return undefined;
  return ((h * 60 + mi) * 60 + s) * 1_000_000 + Number((m[4] ?? '').padEnd(6, '0').slice(0, 6) || '0');
}

export function formatTime(micros: number, precision: number): string {
  const totalSec = Math.floor(micros / 1_000_000);
  const frac = micros % 1_000_000;
  const hh = String(Math.floor(totalSec / 3600)).padStart(2, '0');
  const mm = String(Math.floor(totalSec / 60) % 60).padStart(2, '0');
  const ss = String(totalSec % 60).padStart(2, '0');
  const base = `${hh}:${mm}:${ss}`;
  return precision > 0 ? `${base}.${String(frac).padStart(6, '0').slice(0, precision)}` : base;
}

/** Microseconds per unit of each precision, 0 (seconds) to 6 (microseconds). */
const PRECISION_UNITS = Array.from({ length: 7 }, (_, p) => 10n ** BigInt(6 - p));

function truncateMicros(micros: bigint, precision: number): bigint {
  // Microsecond precision, the common case, keeps the value as it is: no bigint arithmetic per row.
  if (precision >= 6) return micros;
  const unit = PRECISION_UNITS[precision];
  return floorDiv(micros, unit) * unit;
}

/**
 * Checks a user value against a column and returns its internal form; null/undefined stays null.
 * Throws INVALID_ROW with the column name and reason when the value does not fit.
 */
export function toInternal(col: Column, value: unknown): unknown {
  if (value === null || value === undefined) {
    if (!col.nullable) throw new TributaryError('INVALID_ROW', `column ${col.name}: ${value === null ? 'null' : 'missing'}, but the column is NOT NULL`);
    return null;
  }
  const t = col.type;
  switch (t.kind) {
    case 'BOOLEAN':
      if (typeof value !== 'boolean') throw bad(col, value, notA(t));
      return value;
    case 'TINYINT':
    case 'SMALLINT':
    case 'INT': {
      const n = typeof value === 'bigint' ? Number(value) : value;
      const [lo, hi] = INT_RANGE[t.kind];
      if (typeof n !== 'number' || !Number.isInteger(n)) throw bad(col, value, notA(t));
      if (n < lo || n > hi) throw bad(col, value, `is out of the range of ${t.kind}, [${lo}, ${hi}]`);
      return n;
    }
    case 'BIGINT': {
      let b: bigint;
      if (typeof value === 'bigint') b = value;
      else if (typeof value === 'number' && Number.isSafeInteger(value)) b = BigInt(value);
      else if (typeof value === 'string' && /^[+-]?\d+$/.test(value.trim())) b = BigInt(value.trim());
      else if (typeof value === 'number' && Number.isInteger(value)) throw bad(col, value, `${notA(t)} exactly: a number beyond 2^53 has lost digits, give it as a string or a bigint`);
      else throw bad(col, value, notA(t));
      if (b < BIGINT_MIN || b > BIGINT_MAX) throw bad(col, value, `is out of the range of BIGINT, [${BIGINT_MIN}, ${BIGINT_MAX}]`);
      return b;
    }
    case 'FLOAT':
    case 'DOUBLE':
      if (typeof value !== 'number') throw bad(col, value, notA(t));
      return value;
    case 'DECIMAL': {
      const text = typeof value === 'string' ? value : typeof value === 'bigint' ? value.toString() : typeof value === 'number' && Number.isFinite(value) ? String(value) : undefined;
      const unscaled = text === undefined ? undefined : parseDecimal(text, t.precision, t.scale);
      if (unscaled === undefined) throw bad(col, value, `does not fit DECIMAL(${t.precision}, ${t.scale}) exactly`);
      return unscaled;
    }
    case 'CHAR':
    case 'STRING':
      if (typeof value !== 'string') throw bad(col, value, notA(t));
      if (t.kind === 'CHAR' && [...value].length > t.length) throw bad(col, value, `is longer than ${t.length} characters`);
      return value;
    case 'BINARY':
    case 'BYTES':
      if (!(value instanceof Uint8Array)) throw bad(col, value, notA(t, 'bytes'));
      if (t.kind === 'BINARY' && value.length !== t.length) throw bad(col, value, `is not exactly ${t.length} bytes`);
      return value;
    case 'DATE': {
      if (typeof value === 'number' && Number.isInteger(value)) return value;
      if (value instanceof Date && !Number.isNaN(value.getTime())) return Math.floor(value.getTime() / 86_400_000);
      const days = typeof value === 'string' ? daysFromDateString(value) : undefined;
      if (days === undefined) throw bad(col, value, notA(t, "'YYYY-MM-DD'"));
      return days;
    }
    case 'TIME': {
      let micros: number | undefined;
      if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value < 86_400_000) micros = value * 1000;
      else if (typeof value === 'string') micros = timeMicrosFromString(value);
      if (micros === undefined) throw bad(col, value, notA(t, "'HH:MM:SS[.ffffff]'"));
      return Number(truncateMicros(BigInt(micros), t.precision));
    }
    case 'TIMESTAMP':
    case 'TIMESTAMP_LTZ': {
      let micros: bigint;
      if (value instanceof Timestamp) micros = value.epochMicros;
      else if (value instanceof Date && !Number.isNaN(value.getTime())) micros = BigInt(value.getTime()) * 1000n;
      else if (typeof value === 'bigint') micros = value;
      else if (typeof value === 'string' && TIMESTAMP_TEXT.test(value.trim())) micros = Timestamp.parse(value).epochMicros;
      else throw bad(col, value, notA(t, "'YYYY-MM-DD HH:MM:SS[.ffffff]', a Timestamp, a Date or bigint microseconds"));
      return truncateMicros(micros, t.precision);
    }
  }
}

/** Turns an internal value back into the external form documented above. */
export function toExternal(t: DataType, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (t.kind) {
    case 'DECIMAL':
      return formatDecimal(value as bigint, t.scale);
    case 'DATE':
      return formatDate(value as number);
    case 'TIME':
      return formatTime(value as number, t.precision);
    case 'TIMESTAMP':
    case 'TIMESTAMP_LTZ':
      return new Timestamp(value as bigint);
    default:
      return value;
  }
}

/**
 * Reads row objects of one schema into internal values in column order: unknown columns and
 * values that do not fit are INVALID_ROW. Built once per schema (writers, builders).
 */
export class RowReader {
  private readonly names: Set<string>;

  constructor(private readonly columns: readonly Column[]) {
    this.names = new Set(columns.map((c) => c.name));
  }

  /**
   * Fills `out` (a new array by default). With `only`, just those columns are read and the others
   * are null; columns in `required` must have a value.
   */
  read(row: Row, out: unknown[] = new Array(this.columns.length), only?: ReadonlySet<string>, required?: ReadonlySet<string>): unknown[] {
    if (row === null || typeof row !== 'object') throw new TributaryError('INVALID_ROW', 'a row must be an object of column names to values');
    for (const name in row) {
      if (!this.names.has(name)) throw unknownColumn(name, this.columns);
    }
    for (let i = 0; i < this.columns.length; i++) {
      const c = this.columns[i];
      if (only && !only.has(c.name)) {
        out[i] = null;
        continue;
      }
      const v = row[c.name];
      if (required?.has(c.name) && (v === undefined || v === null)) throw new TributaryError('INVALID_ROW', `column ${c.name}: ${v === null ? 'null' : 'missing'}, but a key column must have a value`);
      out[i] = toInternal(c, v);
    }
    return out;
  }
}
