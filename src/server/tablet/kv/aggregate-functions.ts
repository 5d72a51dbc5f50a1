/**
 * Aggregate functions of the aggregation merge engine: how the stored value of a column (the
 * accumulator) combines with the value a write brings. Values are internal values (values.ts);
 * which function takes which column type is checked when the table is created (pk-table.ts).
 *
 *   sum, product        nulls ignored; integers and DECIMAL exact, a result outside the column's
 *                       range (DECIMAL: its precision) fails with INVALID_ROW and changes nothing;
 *                       FLOAT rounds to 32 bits, DOUBLE as IEEE; DECIMAL product rounds half up
 *                       to the column's scale
 *   max, min            nulls ignored; strings by code point (= UTF-8 byte order, as Fluss);
 *                       FLOAT/DOUBLE as Java's compare (NaN above everything, -0 below 0); a tie
 *                       keeps the stored value
 *   last_value          the written value, null included
 *   last_value_ignore_nulls   the written value unless it is null
 *   first_value         the stored value, null included: the key's first write set it
 *   first_value_ignore_nulls  the stored value unless it is null
 *   listagg             nulls ignored; stored + delimiter + written ('' is a value)
 *   bool_and, bool_or   nulls ignored
 *
 * first_value follows Fluss's documentation ("null values are retained if received first"); Fluss's
 * code makes it the same as first_value_ignore_nulls. A new key stores the written row as it is,
 * without calling these functions.
 */
import { TributaryError } from '../../../common/errors.js';
import type { AggFunction } from '../../../common/pk-table.js';
import type { Column } from '../../../common/schema.js';
import { formatDataType } from '../../../common/types.js';

/** Combines a stored value with a written one; either may be null. */
export type Aggregator = (stored: unknown, written: unknown) => unknown;

type Binary<T> = (stored: T, written: T) => T;

const INT_RANGE = { TINYINT: [-128, 127], SMALLINT: [-32768, 32767], INT: [-2147483648, 2147483647] } as const;
const BIGINT_MIN = -(2n ** 63n);
const BIGINT_MAX = 2n ** 63n - 1n;

/** Applies `f` to two non-null values; a null on either side yields the other one. */
function ignoringNulls<T>(f: Binary<T>): Aggregator {
  return (stored, written) => (stored == null ? written : written == null ? stored : f(stored as T, written as T));
}

export function createAggregator(fn: AggFunction, column: Column, delimiter: string): Aggregator {
  switch (fn) {
    case 'sum':
    case 'product':
      return arithmetic(fn, column);
    case 'max': {
      const compare = comparator(column);
      return ignoringNulls((stored, written) => (compare(written, stored) > 0 ? written : stored));
    }
    case 'min': {
      const compare = comparator(column);
      return ignoringNulls((stored, written) => (compare(written, stored) < 0 ? written : stored));
    }
    case 'last_value':
      return (_stored, written) => written;
    case 'last_value_ignore_nulls':
      return (stored, written) => (written == null ? stored : written);
    case 'first_value':
      return (stored) => stored;
    case 'first_value_ignore_nulls':
      return (stored, written) => (stored == null ? written : stored);
    case 'listagg':
      return ignoringNulls<string>((stored, written) => stored + delimiter + written);
    case 'bool_and':
      return ignoringNulls<boolean>((stored, written) => stored && written);
    case 'bool_or':
      return ignoringNulls<boolean>((stored, written) => stored || written);
  }
}

function overflow(fn: string, column: Column): TributaryError {
  return new TributaryError('INVALID_ROW', `${fn} of column '${column.name}' overflows ${formatDataType(column.type)}`);
}

function arithmetic(fn: 'sum' | 'product', column: Column): Aggregator {
  const sum = fn === 'sum';
  const t = column.type;
  switch (t.kind) {
    case 'TINYINT':
    case 'SMALLINT':
    case 'INT': {
      const [lo, hi] = INT_RANGE[t.kind];
      // A product beyond 2^53 is inexact but still far outside the range, so the check holds.
      return ignoringNulls<number>((a, b) => {
        const r = sum ? a + b : a * b;
        if (r < lo || r > hi) throw overflow(fn, column);
        return r === 0 ? 0 : r; // 0 * -1 is -0
      });
    }
    case 'BIGINT':
      return ignoringNulls<bigint>((a, b) => {
        const r = sum ? a + b : a * b;
        if (r < BIGINT_MIN || r > BIGINT_MAX) throw overflow(fn, column);
        return r;
      });
    case 'FLOAT':
      return ignoringNulls<number>((a, b) => Math.fround(sum ? a + b : a * b));
    case 'DOUBLE':
      return ignoringNulls<number>((a, b) => (sum ? a + b : a * b));
    case 'DECIMAL': {
      const limit = 10n ** BigInt(t.precision);
      const unit = 10n ** BigInt(t.scale);
      return ignoringNulls<bigint>((a, b) => {
        const r = sum ? a + b : roundHalfUp(a * b, unit);
        if (r <= -limit || r >= limit) throw overflow(fn, column);
        return r;
      });
    }
    default:
      throw new TributaryError('INVALID_CONFIG_EXCEPTION', `${fn} cannot aggregate column '${column.name}' of type ${formatDataType(t)}`);
  }
}

/** n / d rounded to the nearest integer, halves away from zero (Java's HALF_UP); d > 0. */
function roundHalfUp(n: bigint, d: bigint): bigint {
  const q = n / d;
  const r = n % d;
  const twice = 2n * (r < 0n ? -r : r);
  return twice >= d ? q + (n < 0n ? -1n : 1n) : q;
}

type Compare = (a: unknown, b: unknown) => number;

function comparator(column: Column): Compare {
  switch (column.type.kind) {
    case 'CHAR':
    case 'STRING':
      return compareCodePoints as Compare;
    case 'FLOAT':
    case 'DOUBLE':
      return compareFloating as Compare;
    case 'TINYINT':
    case 'SMALLINT':
    case 'INT':
    case 'BIGINT':
    case 'DECIMAL':
    case 'DATE':
    case 'TIME':
    case 'TIMESTAMP':
    case 'TIMESTAMP_LTZ':
      // numbers or bigints (a DECIMAL column's values share its scale)
      return (a, b) => ((a as number) < (b as number) ? -1 : (a as number) > (b as number) ? 1 : 0);
    default:
      throw new TributaryError('INVALID_CONFIG_EXCEPTION', `max and min cannot compare column '${column.name}' of type ${formatDataType(column.type)}`);
  }
}

/**
 * Code point order, which is UTF-8 byte order. UTF-16 units order differently only between a
 * surrogate (D800–DFFF, part of a code point above FFFF) and a unit in E000–FFFF, so those two
 * ranges swap places before comparing.
 */
function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x - y;
  }
  return a.length - b.length;
}

/** Java's Double.compare: NaN equals itself and sorts above everything, -0 sorts below 0. */
function compareFloating(a: number, b: number): number {
  if (a < b) return -1;
  if (a > b) return 1;
  if (a === b) return Object.is(a, b) ? 0 : Object.is(a, -0) ? -1 : 1;
  return Number.isNaN(a) ? (Number.isNaN(b) ? 0 : 1) : -1;
}
