/**
 * Schemas, table descriptors and table metadata as the coordinator stores them and the
 * client sees them. Columns carry stable field ids; each schema change makes a new schema id.
 */
import { TributaryError } from './errors.js';
import { isLakeSystemColumn } from './lake.js';
import { type DataType, formatDataType, isPartitionKeyType, parseDataType } from './types.js';

export interface Column {
  name: string;
  type: DataType;
  nullable: boolean;
  /** Stable id of the column across schema versions (Iceberg field id later). */
  fieldId: number;
  comment?: string;
}

export interface Schema {
  columns: Column[];
  /** Present for primary-key tables. */
  primaryKey?: string[];
  highestFieldId: number;
}

/** How a user declares a column: the field id is assigned by the schema builder. */
export interface ColumnSpec {
  name: string;
  type: DataType | string;
  nullable?: boolean;
  comment?: string;
}

export interface TablePath {
  database: string;
  table: string;
}

export interface TableDescriptor {
  columns: ColumnSpec[];
  primaryKey?: string[];
  partitionKeys?: string[];
  /** `bucket.num`; defaults to the cluster's `default.bucket.number`. */
  bucketCount?: number;
  /** `bucket.key`; empty for keyless (sticky) log tables. */
  bucketKeys?: string[];
  properties?: Record<string, string>;
  comment?: string;
}

export interface TableInfo {
  path: TablePath;
  tableId: number;
  schemaId: number;
  schema: Schema;
  partitionKeys: string[];
  bucketCount: number;
  bucketKeys: string[];
  /** Table options (Fluss names); validated against the option declaration. */
  properties: Record<string, string>;
  comment?: string;
  createdTime: number;
  modifiedTime: number;
}

export interface PartitionInfo {
  partitionId: number;
  partitionName: string;
  /** Partition key → value, in partition-key order. */
  spec: Record<string, string>;
}

/** The database every server has; created when the cluster starts empty. */
export const DEFAULT_DATABASE = 'tributary';

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Whether `name` can name a database, table or column (what metadata paths and files are made of). */
export function isIdentifier(name: unknown): name is string {
  return typeof name === 'string' && name.length <= 200 && NAME.test(name);
}

/** `where` says where the name came from in error messages, e.g. `CreateTable: table_path.table_name`. */
export function validateIdentifier(kind: 'database' | 'table' | 'column', name: unknown, where?: string): asserts name is string {
  if (isIdentifier(name)) return;
  const code = kind === 'database' ? 'INVALID_DATABASE_EXCEPTION' : 'INVALID_TABLE_EXCEPTION';
  if (name === undefined || name === '') throw new TributaryError(code, `${where ?? `${kind} name`} is required`);
  const shown = typeof name === 'string' ? `'${name.length > 60 ? `${name.slice(0, 60)}…` : name}'` : `of type ${name === null ? 'null' : typeof name}`;
  throw new TributaryError(code, `invalid ${kind} name ${shown}${where ? ` (${where})` : ''}: use letters, digits and '_', starting with a letter or '_', at most 200 characters`);
}

export function tablePathString(p: TablePath): string {
  return `${p.database}.${p.table}`;
}

/** Builds a schema from column specs, numbering field ids from 0 and validating names and keys. */
export function buildSchema(columns: ColumnSpec[], primaryKey?: string[]): Schema {
  if (columns.length === 0) throw new TributaryError('INVALID_TABLE_EXCEPTION', 'a table needs at least one column');
  const seen = new Set<string>();
  const built: Column[] = columns.map((c, i) => {
    checkColumnSpec(c, `columns[${i}]`);
    const lower = c.name.toLowerCase();
    if (seen.has(lower)) throw new TributaryError('DUPLICATE_COLUMN', `duplicate column '${c.name}'`);
    seen.add(lower);
    return { name: c.name, type: columnType(c), nullable: c.nullable ?? true, fieldId: i, ...(c.comment ? { comment: c.comment } : {}) };
  });
  const schema: Schema = { columns: built, highestFieldId: built.length - 1 };
  if (primaryKey && primaryKey.length > 0) {
    const pkSeen = new Set<string>();
    for (const k of primaryKey) {
      const col = built.find((c) => c.name === k);
      if (!col) throw new TributaryError('INVALID_TABLE_EXCEPTION', `primary key column '${k}' is not a column of the table`);
      if (pkSeen.has(k)) throw new TributaryError('DUPLICATE_COLUMN', `primary key column '${k}' listed twice`);
      pkSeen.add(k);
      col.nullable = false;
    }
    schema.primaryKey = [...primaryKey];
  }
  return schema;
}

/**
 * A table descriptor from JSON (CreateTable's table_json, camelCase fields as TableDescriptor), its
 * shape checked field by field so that each wrong part gets an error naming it under `where`.
 * Names, types and keys are validated later, when the schema is built.
 */
export function tableDescriptorFromJson(json: unknown, where: string): TableDescriptor {
  const fail = (field: string, problem: string): never => {
    throw new TributaryError('INVALID_TABLE_EXCEPTION', `${where}.${field} ${problem}`);
  };
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new TributaryError('INVALID_TABLE_EXCEPTION', `${where} must be a JSON object`);
  const d = json as Record<string, unknown>;
  if (!Array.isArray(d.columns)) fail('columns', 'must be an array of columns');
  const names = (field: string): void => {
    const v = d[field];
    if (v !== undefined && (!Array.isArray(v) || v.some((k) => typeof k !== 'string'))) fail(field, 'must be an array of column names');
  };
  names('primaryKey');
  names('partitionKeys');
  names('bucketKeys');
  if (d.bucketCount !== undefined && typeof d.bucketCount !== 'number') fail('bucketCount', 'must be a number');
  if (d.comment !== undefined && typeof d.comment !== 'string') fail('comment', 'must be a string');
  if (d.properties !== undefined) {
    if (d.properties === null || typeof d.properties !== 'object' || Array.isArray(d.properties)) fail('properties', 'must be an object of option names and values');
    for (const [key, value] of Object.entries(d.properties as object)) if (typeof value !== 'string') fail(`properties['${key}']`, 'must be a string');
  }
  (d.columns as unknown[]).forEach((c, i) => checkColumnSpec(c as ColumnSpec, `${where}.columns[${i}]`));
  return d as unknown as TableDescriptor;
}

/**
 * A column spec as it may come from a request's JSON: an object with a valid name, a type in its
 * SQL spelling (or a DataType), and nullable and comment of their types when given.
 */
function checkColumnSpec(c: ColumnSpec, where: string): void {
  if (c === null || typeof c !== 'object' || Array.isArray(c)) throw new TributaryError('INVALID_TABLE_EXCEPTION', `${where} must be a column object`);
  validateIdentifier('column', c.name, `${where}.name`);
  if (typeof c.type !== 'string' && (c.type === null || typeof c.type !== 'object')) throw new TributaryError('INVALID_TYPE', `${where}.type is required (a type such as 'INT' or 'STRING')`);
  if (c.nullable !== undefined && typeof c.nullable !== 'boolean') throw new TributaryError('INVALID_TABLE_EXCEPTION', `${where}.nullable must be true or false`);
  if (c.comment !== undefined && typeof c.comment !== 'string') throw new TributaryError('INVALID_TABLE_EXCEPTION', `${where}.comment must be a string`);
}

function columnType(c: ColumnSpec): DataType {
  const type = typeof c.type === 'string' ? parseDataType(c.type) : c.type;
  parseDataType(formatDataType(type)); // validates hand-built types too
  return type;
}

/**
 * The schema after ADD COLUMN (Fluss's schema evolution, fluss.md §2.7): `specs` appended after the
 * existing columns, nullable (rows written before read them as NULL), with field ids after
 * `highestFieldId`. Existing columns keep their place and field id, so a column index of an older
 * schema names the same column in every later one.
 */
export function addColumns(schema: Schema, specs: readonly ColumnSpec[]): Schema {
  if (specs.length === 0) throw new TributaryError('INVALID_ALTER_TABLE_EXCEPTION', 'ADD COLUMN names no column');
  const seen = new Set(schema.columns.map((c) => c.name.toLowerCase()));
  let fieldId = schema.highestFieldId;
  const added = specs.map((c, i): Column => {
    checkColumnSpec(c, `add_columns[${i}]`);
    const lower = c.name.toLowerCase();
    if (isLakeSystemColumn(c.name)) throw new TributaryError('INVALID_ALTER_TABLE_EXCEPTION', `column name '${c.name}' is reserved for the lake table's system column ${lower}`);
    if (seen.has(lower)) throw new TributaryError('DUPLICATE_COLUMN', `column '${c.name}' already exists`);
    seen.add(lower);
    if (c.nullable === false) {
      throw new TributaryError('INVALID_ALTER_TABLE_EXCEPTION', `added column '${c.name}' must be nullable: rows written before it was added read it as NULL`);
    }
    return { name: c.name, type: columnType(c), nullable: true, fieldId: ++fieldId, ...(c.comment ? { comment: c.comment } : {}) };
  });
  return { ...schema, columns: [...schema.columns, ...added], highestFieldId: fieldId };
}

/**
 * Where each of `wanted` (columns of one schema of a table) sits among `columns` (of another schema
 * of the same table), matched by field id: its index, or -1 where `columns` lacks it (an older
 * schema, from before the column was added).
 */
export function fieldIndexes(columns: readonly Column[], wanted: readonly Column[]): Int32Array {
  const out = new Int32Array(wanted.length);
  for (let i = 0; i < wanted.length; i++) out[i] = columns.findIndex((c) => c.fieldId === wanted[i].fieldId);
  return out;
}

/**
 * What a batch written with `schema` holds of a projection on `wanted`: the indexes in `schema` of
 * the wanted columns it has, in the order of `wanted`. The server projects a stored batch on them
 * and a reader decodes that projection with them, so both must derive it from here.
 */
export function projectionIn(schema: Schema, wanted: readonly Column[]): number[] {
  return Array.from(fieldIndexes(schema.columns, wanted)).filter((i) => i >= 0);
}

export function columnIndex(schema: Schema, name: string): number {
  return schema.columns.findIndex((c) => c.name === name);
}

export function requireColumn(schema: Schema, name: string, errorName: 'INVALID_PARTITION_KEY' | 'INVALID_BUCKET_KEY' | 'INVALID_COLUMN_PROJECTION', role: string): Column {
  const col = schema.columns.find((c) => c.name === name);
  if (!col) throw new TributaryError(errorName, `${role} '${name}' is not a column of the table`);
  return col;
}

/** Validates partition and bucket keys against the schema (DESIGN.md §2). */
export function validateKeys(schema: Schema, partitionKeys: string[], bucketKeys: string[]): void {
  const seen = new Set<string>();
  for (const k of partitionKeys) {
    const col = requireColumn(schema, k, 'INVALID_PARTITION_KEY', 'partition key');
    if (seen.has(k)) throw new TributaryError('INVALID_PARTITION_KEY', `partition key '${k}' listed twice`);
    seen.add(k);
    if (!isPartitionKeyType(col.type)) {
      throw new TributaryError('INVALID_PARTITION_KEY', `partition key '${k}' has type ${formatDataType(col.type)}, which cannot be a partition key`);
    }
    if (schema.primaryKey && !schema.primaryKey.includes(k)) {
      throw new TributaryError('INVALID_PARTITION_KEY', `partition key '${k}' must be part of the primary key`);
    }
  }
  const bseen = new Set<string>();
  for (const k of bucketKeys) {
    requireColumn(schema, k, 'INVALID_BUCKET_KEY', 'bucket key');
    if (bseen.has(k)) throw new TributaryError('INVALID_BUCKET_KEY', `bucket key '${k}' listed twice`);
    bseen.add(k);
    if (partitionKeys.includes(k)) throw new TributaryError('INVALID_BUCKET_KEY', `bucket key '${k}' is a partition key; partitions already split by it`);
    if (schema.primaryKey && !schema.primaryKey.includes(k)) {
      throw new TributaryError('INVALID_BUCKET_KEY', `bucket key '${k}' must be part of the primary key`);
    }
  }
}

/** Schema JSON as stored in metadata and sent over the wire (types in their SQL spelling). */
export function schemaToJson(schema: Schema): unknown {
  return {
    columns: schema.columns.map((c) => ({
      name: c.name,
      type: formatDataType(c.type),
      nullable: c.nullable,
      field_id: c.fieldId,
      ...(c.comment ? { comment: c.comment } : {}),
    })),
    ...(schema.primaryKey ? { primary_key: schema.primaryKey } : {}),
    highest_field_id: schema.highestFieldId,
  };
}

export function schemaFromJson(json: unknown): Schema {
  const j = json as { columns: { name: string; type: string; nullable: boolean; field_id: number; comment?: string }[]; primary_key?: string[]; highest_field_id: number };
  return {
    columns: j.columns.map((c) => ({
      name: c.name,
      type: parseDataType(c.type),
      nullable: c.nullable,
      fieldId: c.field_id,
      ...(c.comment ? { comment: c.comment } : {}),
    })),
    ...(j.primary_key ? { primaryKey: j.primary_key } : {}),
    highestFieldId: j.highest_field_id,
  };
}

export function tableInfoToJson(info: TableInfo): unknown {
  return {
    database: info.path.database,
    table: info.path.table,
    table_id: info.tableId,
    schema_id: info.schemaId,
    schema: schemaToJson(info.schema),
    partition_keys: info.partitionKeys,
    bucket_count: info.bucketCount,
    bucket_keys: info.bucketKeys,
    properties: info.properties,
    ...(info.comment ? { comment: info.comment } : {}),
    created_time: info.createdTime,
    modified_time: info.modifiedTime,
  };
}

export function tableInfoFromJson(json: unknown): TableInfo {
  const j = json as Record<string, unknown>;
  return {
    path: { database: j.database as string, table: j.table as string },
    tableId: j.table_id as number,
    schemaId: j.schema_id as number,
    schema: schemaFromJson(j.schema),
    partitionKeys: j.partition_keys as string[],
    bucketCount: j.bucket_count as number,
    bucketKeys: j.bucket_keys as string[],
    properties: j.properties as Record<string, string>,
    ...(j.comment ? { comment: j.comment as string } : {}),
    createdTime: j.created_time as number,
    modifiedTime: j.modified_time as number,
  };
}
