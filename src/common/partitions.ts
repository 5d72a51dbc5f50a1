/**
 * Partition names, partition specs and automatic time partitions (DESIGN.md §2).
 *
 * Partition name:
 *   name  = value *("$" value)      one value per partition key, in partition-key order
 *   value = 1*[A-Za-z0-9_-]
 *   at most 200 characters in all, and never starting with "__" (reserved for system names)
 *
 * String form of a row's value per partition-key type (Fluss's forms, so names carry over):
 *   BOOLEAN                     true | false
 *   TINYINT, SMALLINT, INT,     decimal digits, '-' before negatives
 *   BIGINT
 *   CHAR, STRING                the string itself (it must already be name-safe)
 *   BINARY, BYTES               lowercase hex, two digits a byte
 *   DATE                        yyyy-MM-dd
 *   TIME                        HH-mm-ss_SSS, or HH-mm-ss_SSSSSS when the value has microseconds
 *   TIMESTAMP, TIMESTAMP_LTZ    yyyy-MM-dd-HH-mm-ss_F in UTC, F = the fraction of the second
 *                               without trailing zeros (empty for whole seconds: "...-05_")
 *
 * Automatic partition value of a time, in the table's IANA time zone:
 *   HOUR yyyyMMddHH | DAY yyyyMMdd | MONTH yyyyMM | QUARTER yyyyQ (Q = 1..4) | YEAR yyyy
 * Periods step by absolute hours for HOUR (a repeated wall-clock hour is one partition, a skipped
 * one has none) and by calendar days, months, quarters and years for the others.
 */
import { TributaryError } from './errors.js';
import type { Schema, TableInfo } from './schema.js';
import { tableOption } from './config.js';
import { type DataType, formatDataType, isPartitionKeyType } from './types.js';
import { formatDate } from './values.js';

const MAX_NAME_LENGTH = 200;
const VALUE_CHARS = /^[A-Za-z0-9_-]+$/;
const SEPARATOR = '$';

function invalidSpec(message: string): TributaryError {
  return new TributaryError('PARTITION_SPEC_INVALID_EXCEPTION', message);
}

/** Joins partition values (in partition-key order) into the partition name, validating them. */
export function partitionName(values: readonly string[]): string {
  if (values.length === 0) throw invalidSpec('a partition needs one value per partition key, got none');
  for (const v of values) {
    if (!VALUE_CHARS.test(v)) {
      throw invalidSpec(v === '' ? 'partition value must not be empty' : `partition value '${v}' may only contain letters, digits, '_' and '-'`);
    }
  }
  const name = values.join(SEPARATOR);
  if (name.length > MAX_NAME_LENGTH) throw invalidSpec(`partition name '${name}' is longer than ${MAX_NAME_LENGTH} characters`);
  if (name.startsWith('__')) throw invalidSpec(`partition name '${name}' must not start with '__'`);
  return name;
}

/** A validated partition: its values in partition-key order and its name. */
export interface ResolvedPartitionSpec {
  values: string[];
  name: string;
}

/** Checks a user's spec (key → value) against the table's partition keys. */
export function parsePartitionSpec(partitionKeys: readonly string[], spec: Readonly<Record<string, string>>): ResolvedPartitionSpec {
  if (partitionKeys.length === 0) throw new TributaryError('TABLE_NOT_PARTITIONED_EXCEPTION', 'the table is not partitioned');
  for (const k of Object.keys(spec)) {
    if (!partitionKeys.includes(k)) throw invalidSpec(`'${k}' is not a partition key (partition keys: ${partitionKeys.join(', ')})`);
  }
  const values = partitionKeys.map((k) => {
    const v = spec[k];
    if (typeof v !== 'string') throw invalidSpec(`the partition spec has no value for partition key '${k}'`);
    return v;
  });
  return { values, name: partitionName(values) };
}

/** The spec (key → value) of a partition name; the inverse of `partitionName`. */
export function partitionSpecFromName(partitionKeys: readonly string[], name: string): Record<string, string> {
  const values = name.split(SEPARATOR);
  if (values.length !== partitionKeys.length) {
    throw invalidSpec(`partition name '${name}' has ${values.length} value(s) but the table has ${partitionKeys.length} partition key(s)`);
  }
  partitionName(values);
  return Object.fromEntries(partitionKeys.map((k, i) => [k, values[i]]));
}

const pad = (n: number, width: number): string => String(n).padStart(width, '0');

function hex(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i++) s += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
  return s;
}

function timeString(micros: number): string {
  const millis = Math.floor(micros / 1000);
  const sub = micros - millis * 1000;
  const base = `${pad(Math.floor(millis / 3_600_000), 2)}-${pad(Math.floor(millis / 60_000) % 60, 2)}-${pad(Math.floor(millis / 1000) % 60, 2)}`;
  return sub === 0 ? `${base}_${pad(millis % 1000, 3)}` : `${base}_${pad(micros % 1_000_000, 6)}`;
}

function timestampString(micros: bigint): string {
  let seconds = micros / 1_000_000n;
  if (seconds * 1_000_000n > micros) seconds -= 1n;
  const fraction = Number(micros - seconds * 1_000_000n);
  const iso = new Date(Number(seconds) * 1000).toISOString(); // yyyy-MM-ddTHH:mm:ss.000Z
  const digits = fraction === 0 ? '' : pad(fraction, 6).replace(/0+$/, '');
  return `${iso.slice(0, 10)}-${iso.slice(11, 13)}-${iso.slice(14, 16)}-${iso.slice(17, 19)}_${digits}`;
}

/** The string form (see the header) of an internal value of a partition-key column. */
export function partitionValueOf(type: DataType, value: unknown): string {
  if (value === null || value === undefined) throw invalidSpec('a partition key value must not be null');
  switch (type.kind) {
    case 'BOOLEAN':
    case 'TINYINT':
    case 'SMALLINT':
    case 'INT':
    case 'BIGINT':
    case 'CHAR':
    case 'STRING':
      return String(value);
    case 'BINARY':
    case 'BYTES':
      return hex(value as Uint8Array);
    case 'DATE':
      return formatDate(value as number);
    case 'TIME':
      return timeString(value as number);
    case 'TIMESTAMP':
    case 'TIMESTAMP_LTZ':
      return timestampString(value as bigint);
    default:
      throw new TributaryError('INVALID_PARTITION_KEY', `a ${formatDataType(type)} column cannot be a partition key`);
  }
}

/** The partition name of rows of one table, built once per table. */
export class PartitionGetter {
  private readonly types: DataType[];
  private readonly positions: number[];
  private readonly values: string[];
  /** Rows written together mostly share a partition: the last row's key values and name. Byte
   *  arrays are never taken as unchanged, since a caller may refill the same array. */
  private readonly lastRaw: unknown[];
  private lastName: string | undefined;

  constructor(schema: Schema, partitionKeys: readonly string[]) {
    if (partitionKeys.length === 0) throw new TributaryError('TABLE_NOT_PARTITIONED_EXCEPTION', 'the table is not partitioned');
    this.positions = partitionKeys.map((k) => {
      const i = schema.columns.findIndex((c) => c.name === k);
      if (i < 0) throw new TributaryError('INVALID_PARTITION_KEY', `partition key '${k}' is not a column of the table`);
      if (!isPartitionKeyType(schema.columns[i].type)) {
        throw new TributaryError('INVALID_PARTITION_KEY', `partition key '${k}' has type ${formatDataType(schema.columns[i].type)}, which cannot be a partition key`);
      }
      return i;
    });
    this.types = this.positions.map((i) => schema.columns[i].type);
    this.values = new Array<string>(this.positions.length);
    this.lastRaw = new Array<unknown>(this.positions.length);
  }

  /** The partition name of a row of internal values in schema column order. */
  nameOf(row: readonly unknown[]): string {
    const n = this.positions.length;
    if (this.lastName !== undefined) {
      let same = true;
      for (let i = 0; i < n && same; i++) {
        const raw = row[this.positions[i]];
        same = raw === this.lastRaw[i] && typeof raw !== 'object';
      }
      if (same) return this.lastName;
    }
    this.lastName = undefined; // stays unset when this row's values are rejected
    for (let i = 0; i < n; i++) {
      const raw = row[this.positions[i]];
      this.values[i] = partitionValueOf(this.types[i], raw);
      this.lastRaw[i] = raw;
    }
    const name = partitionName(this.values);
    this.lastName = name;
    return name;
  }
}

// ---- automatic time partitions

export type AutoPartitionTimeUnit = 'HOUR' | 'DAY' | 'MONTH' | 'QUARTER' | 'YEAR';

export interface AutoPartitionStrategy {
  /** The partition key holding the time value. */
  key: string;
  timeUnit: AutoPartitionTimeUnit;
  /** Partitions created ahead, starting with the current period. */
  numPrecreate: number;
  /** Past periods kept; older ones are dropped. 0 keeps all. */
  numRetention: number;
  /** IANA time zone the periods are computed in. */
  timeZone: string;
}

function invalidOption(message: string): TributaryError {
  return new TributaryError('INVALID_CONFIG_EXCEPTION', message);
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (f === undefined) {
    try {
      f = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric' });
    } catch {
      throw invalidOption(`unknown time zone '${timeZone}'; use an IANA name such as 'UTC' or 'Asia/Shanghai'`);
    }
    formatters.set(timeZone, f);
  }
  return f;
}

interface WallClockHour {
  year: number;
  month: number;
  day: number;
  hour: number;
}

function wallClockHour(epochMs: number, timeZone: string): WallClockHour {
  const t: WallClockHour = { year: 0, month: 0, day: 0, hour: 0 };
  for (const p of formatterFor(timeZone).formatToParts(epochMs)) {
    if (p.type === 'year' || p.type === 'month' || p.type === 'day' || p.type === 'hour') t[p.type] = Number(p.value);
  }
  return t;
}

/** The value of the period `offset` periods after the one holding `epochMs`. */
function periodValue(unit: AutoPartitionTimeUnit, epochMs: number, timeZone: string, offset: number): string {
  if (unit === 'HOUR') {
    const t = wallClockHour(epochMs + offset * 3_600_000, timeZone);
    return `${pad(t.year, 4)}${pad(t.month, 2)}${pad(t.day, 2)}${pad(t.hour, 2)}`;
  }
  const t = wallClockHour(epochMs, timeZone);
  switch (unit) {
    case 'DAY': {
      const d = new Date(0);
      d.setUTCFullYear(t.year, t.month - 1, t.day + offset);
      return `${pad(d.getUTCFullYear(), 4)}${pad(d.getUTCMonth() + 1, 2)}${pad(d.getUTCDate(), 2)}`;
    }
    case 'MONTH': {
      const m = t.year * 12 + t.month - 1 + offset;
      return `${pad(Math.floor(m / 12), 4)}${pad((m % 12) + 1, 2)}`;
    }
    case 'QUARTER': {
      const q = t.year * 4 + Math.floor((t.month - 1) / 3) + offset;
      return `${pad(Math.floor(q / 4), 4)}${(q % 4) + 1}`;
    }
    case 'YEAR':
      return pad(t.year + offset, 4);
  }
}

/** The automatic partition value of the period holding `epochMs` in `timeZone`. */
export function autoPartitionValue(timeUnit: AutoPartitionTimeUnit, epochMs: number, timeZone: string): string {
  return periodValue(timeUnit, epochMs, timeZone, 0);
}

const PERIOD_SHAPES: Record<AutoPartitionTimeUnit, RegExp> = {
  HOUR: /^(\d{4})(\d{2})(\d{2})(\d{2})$/,
  DAY: /^(\d{4})(\d{2})(\d{2})$/,
  MONTH: /^\d{4}(0[1-9]|1[0-2])$/,
  QUARTER: /^\d{4}[1-4]$/,
  YEAR: /^\d{4}$/,
};

/** Whether `value` is a value of `unit`'s format naming a real period (no 20240230, no hour 24). */
function isPeriodValue(unit: AutoPartitionTimeUnit, value: string): boolean {
  const m = PERIOD_SHAPES[unit].exec(value);
  if (!m) return false;
  if (unit !== 'HOUR' && unit !== 'DAY') return true;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  const realDay = d.getUTCFullYear() === year && d.getUTCMonth() === month - 1 && d.getUTCDate() === day;
  return realDay && (unit === 'DAY' || Number(m[4]) < 24);
}

export interface AutoPartitionPlan {
  /** Values of the current and following periods that do not exist yet, oldest first. */
  toCreate: string[];
  /** Existing values of this unit's format older than the retained periods, oldest first. */
  toDrop: string[];
}

/**
 * What one auto-partition check does at `nowMs`: create the current period and the next
 * `numPrecreate - 1` ones, and drop values older than `numRetention` periods before the current
 * one. `existingValues` are the time values of the existing partitions (for tables with several
 * partition keys, the caller drops every partition whose time value is in `toDrop`); values not
 * in this unit's format, e.g. made by hand, are left alone.
 */
export function autoPartitionPlan(
  strategy: Pick<AutoPartitionStrategy, 'timeUnit' | 'numPrecreate' | 'numRetention' | 'timeZone'>,
  nowMs: number,
  existingValues: Iterable<string>,
): AutoPartitionPlan {
  const { timeUnit, numPrecreate, numRetention, timeZone } = strategy;
  const existing = new Set(existingValues);
  const toCreate: string[] = [];
  for (let k = 0; k < numPrecreate; k++) {
    const v = periodValue(timeUnit, nowMs, timeZone, k);
    if (!existing.has(v) && !toCreate.includes(v)) toCreate.push(v);
  }
  const toDrop: string[] = [];
  if (numRetention > 0) {
    // Values of one unit have one fixed width, so string order is time order.
    const oldestKept = periodValue(timeUnit, nowMs, timeZone, -numRetention);
    for (const v of existing) if (v < oldestKept && isPeriodValue(timeUnit, v)) toDrop.push(v);
    toDrop.sort();
  }
  return { toCreate, toDrop };
}

/**
 * The auto-partition settings of a table from its `table.auto-partition.*` options, or undefined
 * when they are off. `defaultTimeZone` (the server's zone) applies when the table names none.
 * As in Fluss, tables with several partition keys get no partitions created ahead, only expired.
 */
export function autoPartitionStrategy(
  table: Pick<TableInfo, 'schema' | 'partitionKeys' | 'properties'>,
  defaultTimeZone: string = Intl.DateTimeFormat().resolvedOptions().timeZone,
): AutoPartitionStrategy | undefined {
  const props = table.properties;
  if (tableOption(props, 'table.auto-partition.enabled')?.trim().toLowerCase() !== 'true') return undefined;
  const keys = table.partitionKeys;
  if (keys.length === 0) throw invalidOption('table.auto-partition.enabled needs a partitioned table');
  const key = tableOption(props, 'table.auto-partition.key')?.trim() || (keys.length === 1 ? keys[0] : undefined);
  if (key === undefined) throw invalidOption(`table.auto-partition.key must name the time partition key among ${keys.join(', ')}`);
  if (!keys.includes(key)) throw invalidOption(`table.auto-partition.key '${key}' is not a partition key (partition keys: ${keys.join(', ')})`);
  const column = table.schema.columns.find((c) => c.name === key);
  if (column?.type.kind !== 'STRING') {
    throw invalidOption(`automatic partitioning needs a STRING partition key; '${key}' is ${column ? formatDataType(column.type) : 'not a column'}`);
  }
  // Option values were checked against their declarations (config.ts) when the table was created.
  const timeUnit = String(tableOption(props, 'table.auto-partition.time-unit')).trim().toUpperCase() as AutoPartitionTimeUnit;
  const timeZone = tableOption(props, 'table.auto-partition.time-zone')?.trim() || defaultTimeZone;
  formatterFor(timeZone); // rejects unknown zones now rather than at the first check
  return {
    key,
    timeUnit,
    numPrecreate: keys.length > 1 ? 0 : Number(tableOption(props, 'table.auto-partition.num-precreate')),
    numRetention: Number(tableOption(props, 'table.auto-partition.num-retention')),
    timeZone,
  };
}
