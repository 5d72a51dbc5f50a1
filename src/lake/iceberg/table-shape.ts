/**
 * The Iceberg table shape of a Tributary table (DESIGN.md §5): its Iceberg schema, partition spec
 * and sort order.
 *
 * Schema: the table's columns in order with fresh field ids 1..n, then three system columns
 *   __bucket int (required)  __offset long (required)  __timestamp timestamptz (required)
 * holding the Tributary bucket, log offset and commit timestamp of each row. Primary-key tables
 * name their primary key as identifier fields. Columns added later get new ids after the highest
 * one and sit before the system columns; they are optional, as older data files lack them.
 *
 * Partition spec: identity of each partition key, then bucket[N] of the bucket key when it is one
 * column, else identity(__bucket): either way all rows of one key share a lake partition, and lake
 * bucket b is Tributary bucket b. Sort order: __offset ascending.
 */
import { TributaryError } from '../../common/errors.js';
import type { Schema, TableInfo } from '../../common/schema.js';
import type { DataType } from '../../common/types.js';
import { icebergBucketColumn } from '../../common/bucketing.js';
import { LAKE_SYSTEM_COLUMNS } from '../../common/lake.js';
import type { PartitionField, PartitionSpec, SortOrder } from './table-metadata.js';
import type { LakeColumn } from '../lake-format.js';
import { decimalOf, fixedLengthOf, type IcebergField, type IcebergPrimitive, type IcebergSchema } from './types.js';

export const [BUCKET_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN] = LAKE_SYSTEM_COLUMNS;

const SYSTEM_COLUMNS: readonly { name: string; type: IcebergPrimitive }[] = [
  { name: BUCKET_COLUMN, type: 'int' },
  { name: OFFSET_COLUMN, type: 'long' },
  { name: TIMESTAMP_COLUMN, type: 'timestamptz' },
];
const SYSTEM_NAMES = new Set(SYSTEM_COLUMNS.map((c) => c.name));

/** Partition field ids start here (the spec's convention, clear of schema field ids). */
const FIRST_PARTITION_FIELD_ID = 1000;
export function icebergTypeOf(t: DataType): IcebergPrimitive {
  switch (t.kind) {
    case 'BOOLEAN':
      return 'boolean';
    case 'TINYINT':
    case 'SMALLINT':
    case 'INT':
      return 'int';
    case 'BIGINT':
      return 'long';
    case 'FLOAT':
      return 'float';
    case 'DOUBLE':
      return 'double';
    case 'DECIMAL':
      return `decimal(${t.precision},${t.scale})`;
    case 'CHAR':
    case 'STRING':
      return 'string';
    case 'BINARY':
    case 'BYTES':
      return 'binary';
    case 'DATE':
      return 'date';
    case 'TIME':
      return 'time';
    case 'TIMESTAMP':
      return 'timestamp';
    case 'TIMESTAMP_LTZ':
      return 'timestamptz';
  }
}

/** Whether `name` is one of the system columns the lake table appends. */
export function isSystemColumn(name: string): boolean {
  return SYSTEM_NAMES.has(name);
}

/** Rejects columns named like the lake's system columns (compared case-insensitively, as engines do). */
export function checkLakeColumnNames(schema: Schema): void {
  for (const c of schema.columns) {
    const lower = c.name.toLowerCase();
    if (SYSTEM_NAMES.has(lower)) {
      throw new TributaryError('INVALID_TABLE_EXCEPTION', `column '${c.name}' is reserved for the lake table's system column ${lower}`);
    }
  }
}

function userField(id: number, name: string, required: boolean, type: DataType, doc: string | undefined): IcebergField {
  return { id, name, required, type: icebergTypeOf(type), ...(doc ? { doc } : {}) };
}

export function newLakeSchema(info: TableInfo): IcebergSchema {
  checkLakeColumnNames(info.schema);
  const fields = info.schema.columns.map((c, i) => userField(i + 1, c.name, !c.nullable, c.type, c.comment));
  let id = fields.length;
  for (const s of SYSTEM_COLUMNS) fields.push({ id: ++id, name: s.name, required: true, type: s.type });
  const primaryKey = info.schema.primaryKey ?? [];
  return {
    type: 'struct',
    'schema-id': 0,
    ...(primaryKey.length > 0 ? { 'identifier-field-ids': primaryKey.map((k) => fieldIdOf(fields, k)) } : {}),
    fields,
  };
}

/**
 * The lake schema after the table's added columns, or undefined when the lake schema already has
 * them all. Columns are matched by name (Tributary does not rename); an existing column whose type
 * changed is rejected.
 */
export function evolveLakeSchema(current: IcebergSchema, info: TableInfo): IcebergSchema | undefined {
  checkLakeColumnNames(info.schema);
  const byName = new Map(current.fields.map((f) => [f.name, f]));
  let highestId = current.fields.reduce((max, f) => Math.max(max, f.id), 0);
  const added: IcebergField[] = [];
  for (const c of info.schema.columns) {
    const existing = byName.get(c.name);
    if (!existing) {
      added.push(userField(++highestId, c.name, false, c.type, c.comment));
    } else if (existing.type !== icebergTypeOf(c.type)) {
      throw new TributaryError(
        'INVALID_ALTER_TABLE_EXCEPTION',
        `column '${c.name}' is ${icebergTypeOf(c.type)} in the table and ${existing.type} in its lake table; lake column types cannot change`,
      );
    }
  }
  if (added.length === 0) return undefined;
  const user = current.fields.filter((f) => !isSystemColumn(f.name));
  const system = current.fields.filter((f) => isSystemColumn(f.name));
  return { ...current, 'schema-id': current['schema-id'] + 1, fields: [...user, ...added, ...system] };
}

function fieldIdOf(fields: readonly IcebergField[], name: string): number {
  const field = fields.find((f) => f.name === name);
  if (!field) throw new TributaryError('INVALID_TABLE_EXCEPTION', `column '${name}' is not in the lake schema`);
  return field.id;
}

export function lakePartitionSpec(info: TableInfo, schema: IcebergSchema): PartitionSpec {
  let fieldId = FIRST_PARTITION_FIELD_ID;
  const fields: PartitionField[] = info.partitionKeys.map((k) => ({ 'source-id': fieldIdOf(schema.fields, k), 'field-id': fieldId++, name: k, transform: 'identity' }));
  // bucket(key, N) only where Tributary buckets rows the same way (fixed at creation); else __bucket.
  const bucketColumn = icebergBucketColumn(info);
  const bucketKey = bucketColumn && schema.fields.find((f) => f.name === bucketColumn.name);
  if (bucketKey) {
    fields.push({ 'source-id': bucketKey.id, 'field-id': fieldId, name: `${bucketKey.name}_bucket`, transform: `bucket[${info.bucketCount}]` });
  } else {
    fields.push({ 'source-id': fieldIdOf(schema.fields, BUCKET_COLUMN), 'field-id': fieldId, name: BUCKET_COLUMN, transform: 'identity' });
  }
  return { 'spec-id': 0, fields };
}

export function lakeSortOrder(schema: IcebergSchema): SortOrder {
  return { 'order-id': 1, fields: [{ transform: 'identity', 'source-id': fieldIdOf(schema.fields, OFFSET_COLUMN), direction: 'asc', 'null-order': 'nulls-first' }] };
}

/** Tributary's type of an Iceberg primitive (the widest one it maps from, for int). */
function dataTypeOfIceberg(type: IcebergPrimitive): DataType {
  switch (type) {
    case 'boolean':
      return { kind: 'BOOLEAN' };
    case 'int':
      return { kind: 'INT' };
    case 'long':
      return { kind: 'BIGINT' };
    case 'float':
      return { kind: 'FLOAT' };
    case 'double':
      return { kind: 'DOUBLE' };
    case 'string':
      return { kind: 'STRING' };
    case 'binary':
      return { kind: 'BYTES' };
    case 'uuid':
      return { kind: 'BINARY', length: 16 };
    case 'date':
      return { kind: 'DATE' };
    case 'time':
      return { kind: 'TIME', precision: 6 };
    case 'timestamp':
      return { kind: 'TIMESTAMP', precision: 6 };
    case 'timestamptz':
      return { kind: 'TIMESTAMP_LTZ', precision: 6 };
  }
  const decimal = decimalOf(type);
  if (decimal) return { kind: 'DECIMAL', ...decimal };
  const length = fixedLengthOf(type);
  if (length !== undefined) return { kind: 'BINARY', length };
  throw new TributaryError('INVALID_TYPE', `Iceberg type ${type} has no Tributary type`);
}

/** The columns of an Iceberg schema in Tributary's terms. */
export function lakeColumnsOf(schema: IcebergSchema): LakeColumn[] {
  return schema.fields.map((f) => ({ id: f.id, name: f.name, type: dataTypeOfIceberg(f.type), nullable: !f.required }));
}
