/**
 * Primary-key tables: their keys and the options that decide how a write merges with the stored
 * row of its key (DESIGN.md §2–3). Validated once when a table is created; the KV write path reads
 * the same options back through `primaryKeyTableOptions`.
 *
 * Options (Fluss's names; enum values in any case):
 *
 *   table.merge-engine                         last_row (unset) | first_row | versioned | aggregation
 *   table.merge-engine.versioned.ver-column    versioned only: an INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ column
 *   table.delete.behavior                      ALLOW | IGNORE | DISABLE; unset = ALLOW for last_row, IGNORE
 *                                              otherwise; first_row and versioned cannot ALLOW (as Fluss)
 *   table.changelog.image                      FULL (default) | WAL; aggregation needs FULL (as Fluss: undoing
 *                                              an aggregate needs the old row)
 *   fields.<col>.agg                           aggregation only: the column's function, default
 *                                              last_value_ignore_nulls; never on a key column
 *   fields.<col>.<fn>.<param>                  aggregation only: a parameter of the column's function; the
 *                                              one there is is listagg's (string_agg's) `delimiter`
 *
 * Every `fields.*` key belongs to the aggregation engine: a malformed one, one naming an unknown
 * column, or one on a table with another engine is rejected rather than kept as a custom property.
 * Tributary is stricter than Fluss in two places: a ver-column on a non-versioned table and an
 * aggregate function on a key column are errors instead of being ignored. Key columns may have any
 * scalar type (Fluss rejects only nested types, which Tributary does not have yet).
 */
import { TributaryError } from './errors.js';
import { type Schema, validateKeys } from './schema.js';
import { type DataType, type TypeKind, formatDataType } from './types.js';

export type MergeEngineType = 'last_row' | 'first_row' | 'versioned' | 'aggregation';
export type DeleteBehavior = 'ALLOW' | 'IGNORE' | 'DISABLE';
export type ChangelogImage = 'FULL' | 'WAL';
export type AggFunction =
  | 'sum'
  | 'product'
  | 'max'
  | 'min'
  | 'last_value'
  | 'last_value_ignore_nulls'
  | 'first_value'
  | 'first_value_ignore_nulls'
  | 'listagg'
  | 'bool_and'
  | 'bool_or';

export interface ColumnAggregation {
  fn: AggFunction;
  /** listagg's separator (',' unless set); unused by the other functions. */
  delimiter: string;
}

export interface PrimaryKeyTableOptions {
  mergeEngine: MergeEngineType;
  deleteBehavior: DeleteBehavior;
  changelogImage: ChangelogImage;
  /** versioned: position of the version column. */
  versionColumn?: number;
  /** aggregation: the function of each column by position; undefined for key columns. */
  aggregations?: (ColumnAggregation | undefined)[];
}

const MERGE_ENGINE = 'table.merge-engine';
const VERSION_COLUMN = 'table.merge-engine.versioned.ver-column';
const DELETE_BEHAVIOR = 'table.delete.behavior';
const CHANGELOG_IMAGE = 'table.changelog.image';
/** Options that mean something only on a primary-key table. */
const PK_ONLY_OPTIONS = [MERGE_ENGINE, VERSION_COLUMN, DELETE_BEHAVIOR, CHANGELOG_IMAGE];

const MERGE_ENGINES: readonly MergeEngineType[] = ['last_row', 'first_row', 'versioned', 'aggregation'];
const DELETE_BEHAVIORS: readonly DeleteBehavior[] = ['ALLOW', 'IGNORE', 'DISABLE'];
const CHANGELOG_IMAGES: readonly ChangelogImage[] = ['FULL', 'WAL'];
const VERSION_TYPES: readonly TypeKind[] = ['INT', 'BIGINT', 'TIMESTAMP', 'TIMESTAMP_LTZ'];

const NUMERIC: readonly TypeKind[] = ['TINYINT', 'SMALLINT', 'INT', 'BIGINT', 'FLOAT', 'DOUBLE', 'DECIMAL'];
const ORDERED: readonly TypeKind[] = [...NUMERIC, 'CHAR', 'STRING', 'DATE', 'TIME', 'TIMESTAMP', 'TIMESTAMP_LTZ'];
const TEXT: readonly TypeKind[] = ['CHAR', 'STRING'];

/** The column types each function accepts; undefined = every type. */
const ACCEPTED_TYPES: Record<AggFunction, readonly TypeKind[] | undefined> = {
  sum: NUMERIC,
  product: NUMERIC,
  max: ORDERED,
  min: ORDERED,
  last_value: undefined,
  last_value_ignore_nulls: undefined,
  first_value: undefined,
  first_value_ignore_nulls: undefined,
  listagg: TEXT,
  bool_and: ['BOOLEAN'],
  bool_or: ['BOOLEAN'],
};
/** Other spellings of a function, as Fluss accepts them. */
const ALIASES: Record<string, AggFunction> = { string_agg: 'listagg' };
const DEFAULT_AGGREGATION: ColumnAggregation = Object.freeze({ fn: 'last_value_ignore_nulls', delimiter: ',' });

function invalidConfig(message: string): TributaryError {
  return new TributaryError('INVALID_CONFIG_EXCEPTION', message);
}

function enumOption<T extends string>(properties: Record<string, string>, key: string, allowed: readonly T[], normalize: (v: string) => string): T | undefined {
  const raw = properties[key];
  if (raw === undefined) return undefined;
  const value = normalize(raw.trim()) as T;
  if (!allowed.includes(value)) throw invalidConfig(`invalid value '${raw}' for option '${key}': expected one of ${allowed.join(', ')}`);
  return value;
}

/** Lower case with '-' read as '_', the spellings Fluss accepts for function names. */
function functionName(text: string): string {
  return text.trim().toLowerCase().replace(/-/g, '_');
}

/**
 * Reads and checks the merge options of a primary-key table; throws INVALID_CONFIG_EXCEPTION naming
 * the option (and column) at fault.
 */
export function primaryKeyTableOptions(schema: Schema, properties: Record<string, string>): PrimaryKeyTableOptions {
  const mergeEngine = enumOption(properties, MERGE_ENGINE, MERGE_ENGINES, (v) => v.toLowerCase()) ?? 'last_row';
  const changelogImage = enumOption(properties, CHANGELOG_IMAGE, CHANGELOG_IMAGES, (v) => v.toUpperCase()) ?? 'FULL';
  const deleteBehavior = enumOption(properties, DELETE_BEHAVIOR, DELETE_BEHAVIORS, (v) => v.toUpperCase()) ?? (mergeEngine === 'last_row' ? 'ALLOW' : 'IGNORE');
  if (deleteBehavior === 'ALLOW' && (mergeEngine === 'first_row' || mergeEngine === 'versioned')) {
    throw invalidConfig(`the ${mergeEngine} merge engine cannot delete rows: set '${DELETE_BEHAVIOR}' to IGNORE or DISABLE`);
  }
  if (mergeEngine === 'aggregation' && changelogImage === 'WAL') {
    throw invalidConfig(`the aggregation merge engine needs '${CHANGELOG_IMAGE}' = FULL`);
  }
  const options: PrimaryKeyTableOptions = { mergeEngine, deleteBehavior, changelogImage };

  const versionColumn = properties[VERSION_COLUMN]?.trim();
  if (mergeEngine === 'versioned') {
    if (!versionColumn) throw invalidConfig(`the versioned merge engine needs '${VERSION_COLUMN}'`);
    const position = schema.columns.findIndex((c) => c.name === versionColumn);
    if (position < 0) throw invalidConfig(`'${VERSION_COLUMN}' names '${versionColumn}', which is not a column of the table`);
    const type = schema.columns[position].type;
    if (!VERSION_TYPES.includes(type.kind)) {
      throw invalidConfig(`version column '${versionColumn}' has type ${formatDataType(type)}; it must be one of ${VERSION_TYPES.join(', ')}`);
    }
    options.versionColumn = position;
  } else if (versionColumn !== undefined) {
    throw invalidConfig(`'${VERSION_COLUMN}' applies only to the versioned merge engine, not ${mergeEngine}`);
  }

  const fieldKeys = Object.keys(properties).filter((k) => k.startsWith('fields.'));
  if (mergeEngine === 'aggregation') options.aggregations = columnAggregations(schema, properties, fieldKeys);
  else if (fieldKeys.length > 0) throw invalidConfig(`'${fieldKeys[0]}' applies only to the aggregation merge engine, not ${mergeEngine}`);
  return options;
}

function columnAggregations(schema: Schema, properties: Record<string, string>, fieldKeys: string[]): (ColumnAggregation | undefined)[] {
  const primaryKey = new Set(schema.primaryKey ?? []);
  const positionOf = (key: string, column: string): number => {
    const position = schema.columns.findIndex((c) => c.name === column);
    if (position < 0) throw invalidConfig(`option '${key}' names '${column}', which is not a column of the table`);
    if (primaryKey.has(column)) throw invalidConfig(`option '${key}': primary key column '${column}' cannot have an aggregate function`);
    return position;
  };

  // Functions first, so that parameters can be checked against them; names keep their spelling for that.
  const declared = new Map<number, { fn: AggFunction; name: string }>();
  const parameters: [key: string, parts: string[]][] = [];
  for (const key of fieldKeys) {
    const parts = key.split('.');
    if (parts.length === 3 && parts[2] === 'agg') {
      const position = positionOf(key, parts[1]);
      const name = functionName(properties[key]);
      const fn = Object.hasOwn(ACCEPTED_TYPES, name) ? (name as AggFunction) : ALIASES[name];
      if (fn === undefined) {
        throw invalidConfig(`option '${key}': unknown aggregate function '${properties[key]}'; expected one of ${[...Object.keys(ACCEPTED_TYPES), ...Object.keys(ALIASES)].join(', ')}`);
      }
      const type: DataType = schema.columns[position].type;
      const accepted = ACCEPTED_TYPES[fn];
      if (accepted && !accepted.includes(type.kind)) {
        throw invalidConfig(`option '${key}': ${name} cannot aggregate column '${parts[1]}' of type ${formatDataType(type)}; it takes ${accepted.join(', ')}`);
      }
      declared.set(position, { fn, name });
    } else if (parts.length === 4) {
      parameters.push([key, parts]);
    } else {
      throw invalidConfig(`unknown option '${key}': expected fields.<column>.agg or fields.<column>.<function>.<parameter>`);
    }
  }

  const aggregations: (ColumnAggregation | undefined)[] = schema.columns.map((c, i) => {
    if (primaryKey.has(c.name)) return undefined;
    const d = declared.get(i);
    return d ? { fn: d.fn, delimiter: DEFAULT_AGGREGATION.delimiter } : DEFAULT_AGGREGATION;
  });
  for (const [key, [, column, fnName, parameter]] of parameters) {
    const position = positionOf(key, column);
    const d = declared.get(position);
    if (!d || d.name !== functionName(fnName)) {
      throw invalidConfig(`option '${key}' is a parameter of ${fnName}, but column '${column}' is not aggregated with ${fnName}`);
    }
    if (d.fn !== 'listagg' || parameter !== 'delimiter') throw invalidConfig(`option '${key}': ${d.name} has no parameter '${parameter}'`);
    if (properties[key] === '') throw invalidConfig(`option '${key}': the delimiter must not be empty`);
    aggregations[position] = { fn: d.fn, delimiter: properties[key] };
  }
  return aggregations;
}

/**
 * Validates a primary-key table definition: its keys and its merge options. Partition keys must be
 * part of the primary key and leave at least one key column; the bucket key must lie within the
 * primary key minus the partition keys. Returns the bucket key: `bucketKeys`, or by default the
 * primary key minus the partition keys.
 */
export function validatePrimaryKeyTable(schema: Schema, partitionKeys: string[], bucketKeys: string[], properties: Record<string, string>): string[] {
  const primaryKey = schema.primaryKey;
  if (!primaryKey || primaryKey.length === 0) throw new TributaryError('INVALID_TABLE_EXCEPTION', 'a primary-key table needs a primary key');
  validateKeys(schema, partitionKeys, bucketKeys);
  const rest = primaryKey.filter((k) => !partitionKeys.includes(k));
  if (rest.length === 0) {
    throw new TributaryError('INVALID_TABLE_EXCEPTION', `the primary key (${primaryKey.join(', ')}) must have a column that is not a partition key`);
  }
  primaryKeyTableOptions(schema, properties);
  return bucketKeys.length > 0 ? [...bucketKeys] : rest;
}

/** Rejects the options that only primary-key tables have (merge engine, deletes, changelog, `fields.*`). */
export function validateLogTableOptions(properties: Record<string, string>): void {
  for (const key of Object.keys(properties)) {
    if (PK_ONLY_OPTIONS.includes(key) || key.startsWith('fields.')) {
      throw invalidConfig(`option '${key}' applies only to primary-key tables`);
    }
  }
}

/**
 * Checks the target columns (positions) of a partial update or partial delete: only last_row and
 * aggregation support them, they must be columns of the table, listed once, and include the whole
 * primary key, and every other column must be nullable, since a new key gets nulls there.
 */
export function validatePartialUpdate(schema: Schema, mergeEngine: MergeEngineType, targetColumns: readonly number[]): void {
  const fail = (message: string): TributaryError => new TributaryError('INVALID_TARGET_COLUMN', message);
  if (mergeEngine === 'first_row' || mergeEngine === 'versioned') throw fail(`the ${mergeEngine} merge engine does not support partial updates`);
  const columns = schema.columns;
  const targeted = new Uint8Array(columns.length);
  for (const p of targetColumns) {
    if (!Number.isInteger(p) || p < 0 || p >= columns.length) throw fail(`target column ${p} is not a column position of the table (0 to ${columns.length - 1})`);
    if (targeted[p]) throw fail(`target column '${columns[p].name}' is listed twice`);
    targeted[p] = 1;
  }
  const primaryKey = schema.primaryKey ?? [];
  columns.forEach((c, i) => {
    if (targeted[i]) return;
    if (primaryKey.includes(c.name)) throw fail(`target columns must include the primary key (${primaryKey.join(', ')}); '${c.name}' is missing`);
    if (!c.nullable) throw fail(`column '${c.name}' is NOT NULL, so a partial update must include it`);
  });
}
