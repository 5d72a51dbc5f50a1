/**
 * Pruning before a read: which lake data files, and which partitions of the log, may hold a row
 * that passes a query's column filters (duckdb/query-shapes.ts). What a candidate holds of a
 * column is a span [lower, upper], either end unknown:
 *
 *   lake data file   what the lake format says the file holds of the column (LakeSplit.span:
 *                    partition values, column bounds, all null), as plain values
 *   part of a file   what a row group's statistics say of the column (LakeSpans.span), when the
 *                    lake format copies a remote file (LakeReadPlan.rowsSql's filter)
 *   log partition    a partition key: [value, value], read from the partition's string form
 *
 * DuckDB compares the spans with the literals as written, so literal types and casts are the
 * query's own (a condition with an unknown end holds):
 *
 *   = l    lower <= l AND l <= upper         < l    lower < l        <= l   lower <= l
 *   IN (…) any of the = conditions           > l    upper > l        >= l   upper >= l
 *
 * An all-null span fails every filter, since NULL compares to nothing. Float columns are pruned
 * only in files the format knows to hold no NaN (NaN sorts above every value in DuckDB, and bounds
 * leave it out); binary columns are never pruned. Pruning is an optimisation: the query still runs as written, and
 * when DuckDB cannot evaluate the comparisons (a literal of the wrong type, say) nothing is pruned
 * and the query reports its own error.
 */
import { TributaryError } from '../common/errors.js';
import type { PartitionInfo, TableInfo } from '../common/schema.js';
import type { DataType } from '../common/types.js';
import { formatDecimal } from '../common/values.js';
import type { LakeColumn, LakePartFilter, LakeSpans, LakeValue } from '../lake/lake-format.js';
import type { ColumnFilter } from './duckdb/query-shapes.js';
import type { DuckSession } from './duckdb/session.js';
import { duckTypeName } from './duckdb/type-name.js';

/** What a candidate holds of a column: SQL literals of its ends (absent when unknown), or only nulls. */
type Range = { lower?: string; upper?: string };
type Span = 'null' | Range;

const UNKNOWN: Range = {};
const literal = (s: string): string => `'${s.replaceAll("'", "''")}'`;

/** The splits (files, or parts of one) that may hold a row passing `filters` (on `columns`, the read's lake schema, by name). */
export async function pruneLakeSplits<T extends LakeSpans>(duck: DuckSession, columns: readonly LakeColumn[], splits: readonly T[], filters: readonly ColumnFilter[]): Promise<T[]> {
  const byName = new Map<string, LakeColumn>();
  for (const c of columns) byName.set(c.name.toLowerCase(), c);
  const types = new Map<string, string>();
  for (const f of filters) {
    const column = byName.get(f.column.toLowerCase());
    if (column && column.type.kind !== 'BINARY' && column.type.kind !== 'BYTES') types.set(f.column, duckTypeName(column.type));
  }
  return survivors(duck, splits, types, filters, (split, name) => {
    const column = byName.get(name.toLowerCase())!;
    const span = split.span(column.id);
    if (span === undefined) return UNKNOWN;
    if (span === 'null') return 'null';
    const lower = span.lower === undefined ? undefined : sqlOfLakeValue(column.type, span.lower);
    const upper = span.upper === undefined ? undefined : sqlOfLakeValue(column.type, span.upper);
    return { ...(lower ? { lower } : {}), ...(upper ? { upper } : {}) };
  });
}

/** `filters` as a test of the parts of a lake file (LakePartFilter); undefined when there are none. */
export function lakePartFilter(duck: DuckSession, columns: readonly LakeColumn[], filters: readonly ColumnFilter[]): LakePartFilter | undefined {
  return filters.length === 0 ? undefined : (parts) => pruneLakeSplits(duck, columns, parts, filters);
}

/** The partitions that may hold a row passing `filters`, judged by their partition key values. */
export async function prunePartitions(duck: DuckSession, info: TableInfo, partitions: readonly PartitionInfo[], filters: readonly ColumnFilter[]): Promise<PartitionInfo[]> {
  const keys = new Map<string, DataType>();
  for (const k of info.partitionKeys) keys.set(k, info.schema.columns.find((c) => c.name === k)!.type);
  const columns = new Map<string, string>();
  for (const f of filters) {
    const type = keys.get(f.column);
    if (type && type.kind !== 'BINARY' && type.kind !== 'BYTES') columns.set(f.column, duckTypeName(type));
  }
  return survivors(duck, partitions, columns, filters, (p, column) => point(partitionValueSql(keys.get(column)!, p.spec[column])));
}

const point = (sql: string | undefined): Span => (sql === undefined ? UNKNOWN : { lower: sql, upper: sql });

/** A SQL literal of DuckDB's type for a lake value (LakeValue) of a column of type `type`; undefined when not comparable. */
function sqlOfLakeValue(type: DataType, v: LakeValue): string | undefined {
  if (v === null) return undefined;
  switch (type.kind) {
    case 'BOOLEAN':
      return v ? 'TRUE' : 'FALSE';
    case 'TINYINT':
    case 'SMALLINT':
    case 'INT':
      return `CAST(${Number(v)} AS INTEGER)`;
    case 'BIGINT':
      return `CAST(${BigInt(v as number | bigint)} AS BIGINT)`;
    case 'FLOAT':
    case 'DOUBLE':
      return Number.isFinite(v) ? `CAST('${Number(v)}' AS ${type.kind})` : undefined;
    case 'DATE':
      return `(DATE '1970-01-01' + CAST(${Number(v)} AS INTEGER))`;
    case 'TIME':
      return `(TIME '00:00:00' + to_microseconds(CAST(${BigInt(v as number | bigint)} AS BIGINT)))`;
    case 'TIMESTAMP':
      return `make_timestamp(CAST(${BigInt(v as number | bigint)} AS BIGINT))`;
    case 'TIMESTAMP_LTZ':
      return `make_timestamptz(CAST(${BigInt(v as number | bigint)} AS BIGINT))`;
    case 'CHAR':
    case 'STRING':
      return literal(String(v));
    case 'DECIMAL':
      return `CAST('${formatDecimal(BigInt(v as bigint), type.scale)}' AS DECIMAL(${type.precision},${type.scale}))`;
    case 'BINARY':
    case 'BYTES':
      return undefined;
  }
}

/** The SQL value of a partition's string form (common/partitions.ts) of a key of type `type`. */
function partitionValueSql(type: DataType, text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  switch (type.kind) {
    case 'TIME': {
      const m = /^(\d{2})-(\d{2})-(\d{2})_(\d*)$/.exec(text);
      return m ? `TRY_CAST('${m[1]}:${m[2]}:${m[3]}${m[4] ? `.${m[4]}` : ''}' AS TIME)` : undefined;
    }
    case 'TIMESTAMP':
    case 'TIMESTAMP_LTZ': {
      const m = /^(\d{4,}-\d{2}-\d{2})-(\d{2})-(\d{2})-(\d{2})_(\d*)$/.exec(text);
      if (!m) return undefined;
      const value = `${m[1]} ${m[2]}:${m[3]}:${m[4]}${m[5] ? `.${m[5]}` : ''}`;
      return type.kind === 'TIMESTAMP' ? `TRY_CAST('${value}' AS TIMESTAMP)` : `TRY_CAST('${value}+00' AS TIMESTAMPTZ)`;
    }
    default:
      return `TRY_CAST(${literal(text)} AS ${duckTypeName(type)})`;
  }
}

/** The condition (see the header) that a span `l`, `h` may hold a row passing `f`. */
function condition(f: ColumnFilter, l: string, h: string): string {
  const lit = (i: number): string => f.literals[i] ?? 'NULL';
  const low = (op: string, i: number): string => `(${l} IS NULL OR ${l} ${op} ${lit(i)})`;
  const high = (op: string, i: number): string => `(${h} IS NULL OR ${h} ${op} ${lit(i)})`;
  const equal = (i: number): string => `(${low('<=', i)} AND ${high('>=', i)})`;
  switch (f.op) {
    case '=':
      return equal(0);
    case 'in':
      return f.literals.length === 0 ? 'FALSE' : `(${f.literals.map((_, i) => equal(i)).join(' OR ')})`;
    case '<':
    case '<=':
      return low(f.op, 0);
    case '>':
    case '>=':
      return high(f.op, 0);
  }
}

/**
 * The candidates whose spans (per column of `columns`: name → DuckDB type) may hold a row passing
 * every filter on those columns, in their order; filters on other columns are left out.
 */
async function survivors<T>(duck: DuckSession, candidates: readonly T[], columns: ReadonlyMap<string, string>, filters: readonly ColumnFilter[], spanOf: (candidate: T, column: string) => Span): Promise<T[]> {
  const used = filters.filter((f) => columns.has(f.column));
  if (used.length === 0 || candidates.length === 0) return [...candidates];
  const names = [...columns.keys()];
  const rows: string[] = [];
  const kept: number[] = [];
  let known = false;
  candidates.forEach((candidate, i) => {
    const spans = names.map((n) => spanOf(candidate, n));
    if (spans.includes('null')) return; // every column of `columns` has a filter, which no null passes
    const values = spans.flatMap((s, c) => {
      const typedNull = `CAST(NULL AS ${columns.get(names[c])})`;
      const span = s as Range; // no 'null' left
      known ||= span.lower !== undefined || span.upper !== undefined;
      return [span.lower ?? typedNull, span.upper ?? typedNull];
    });
    kept.push(i);
    rows.push(`(${i}, ${values.join(', ')})`);
  });
  if (!known || kept.length === 0) return kept.map((i) => candidates[i]);
  const aliases = names.flatMap((_, c) => [`l${c}`, `h${c}`]);
  const where = used.map((f) => {
    const c = names.indexOf(f.column);
    return condition(f, `l${c}`, `h${c}`);
  });
  const sql = `SELECT i FROM (VALUES ${rows.join(', ')}) AS v(i, ${aliases.join(', ')}) WHERE ${where.join(' AND ')}`;
  try {
    const result = await duck.run(sql);
    return result.rows.map((r) => Number(r[0])).sort((a, b) => a - b).map((i) => candidates[i]);
  } catch (err) {
    if (err instanceof TributaryError) return kept.map((i) => candidates[i]);
    throw err;
  }
}
