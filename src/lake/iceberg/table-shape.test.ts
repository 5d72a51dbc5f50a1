import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import type { ColumnSpec } from '../../common/schema.js';
import { testTableInfo } from '../../common/fixtures/table-info.js';
import { parseDataType } from '../../common/types.js';
import { checkLakeColumnNames, evolveLakeSchema, icebergTypeOf, lakePartitionSpec, lakeSortOrder, newLakeSchema } from './table-shape.js';

const tableInfo = testTableInfo;

const rejects = (errorName: string) => (err: unknown) => err instanceof TributaryError && err.errorName === errorName;

test('Tributary types map to Iceberg primitives', () => {
  const expected: [string, string][] = [
    ['BOOLEAN', 'boolean'],
    ['TINYINT', 'int'],
    ['SMALLINT', 'int'],
    ['INT', 'int'],
    ['BIGINT', 'long'],
    ['FLOAT', 'float'],
    ['DOUBLE', 'double'],
    ['DECIMAL(38, 10)', 'decimal(38,10)'],
    ['DECIMAL(5, 0)', 'decimal(5,0)'],
    ['CHAR(3)', 'string'],
    ['STRING', 'string'],
    ['BINARY(16)', 'binary'],
    ['BYTES', 'binary'],
    ['DATE', 'date'],
    ['TIME(3)', 'time'],
    ['TIMESTAMP(6)', 'timestamp'],
    ['TIMESTAMP_LTZ(3)', 'timestamptz'],
  ];
  for (const [tributary, iceberg] of expected) assert.equal(icebergTypeOf(parseDataType(tributary)), iceberg, tributary);
});

test('a new lake schema numbers the columns from 1 and appends the system columns', () => {
  const info = tableInfo([
    { name: 'id', type: 'BIGINT', nullable: false },
    { name: 'name', type: 'STRING', comment: 'who' },
    { name: 'small', type: 'TINYINT' },
  ]);
  assert.deepEqual(newLakeSchema(info), {
    type: 'struct',
    'schema-id': 0,
    fields: [
      { id: 1, name: 'id', required: true, type: 'long' },
      { id: 2, name: 'name', required: false, type: 'string', doc: 'who' },
      { id: 3, name: 'small', required: false, type: 'int' },
      { id: 4, name: '__bucket', required: true, type: 'int' },
      { id: 5, name: '__offset', required: true, type: 'long' },
      { id: 6, name: '__timestamp', required: true, type: 'timestamptz' },
    ],
  });
});

test('a primary-key table names its primary key as identifier fields', () => {
  const info = tableInfo(
    [
      { name: 'region', type: 'STRING' },
      { name: 'v', type: 'DOUBLE' },
      { name: 'id', type: 'INT' },
    ],
    { primaryKey: ['id', 'region'], partitionKeys: ['region'], bucketKeys: ['id'] },
  );
  const schema = newLakeSchema(info);
  assert.deepEqual(schema['identifier-field-ids'], [3, 1]);
  assert.deepEqual(
    schema.fields.filter((f) => f.required).map((f) => f.name),
    ['region', 'id', '__bucket', '__offset', '__timestamp'],
  );
});

test('columns named like the system columns are rejected, in any case', () => {
  for (const name of ['__bucket', '__offset', '__timestamp', '__Offset']) {
    const info = tableInfo([
      { name: 'a', type: 'INT' },
      { name, type: 'BIGINT' },
    ]);
    assert.throws(() => checkLakeColumnNames(info.schema), rejects('INVALID_TABLE_EXCEPTION'), name);
    assert.throws(() => newLakeSchema(info), rejects('INVALID_TABLE_EXCEPTION'), name);
  }
  assert.doesNotThrow(() => checkLakeColumnNames(tableInfo([{ name: '__bucket_id', type: 'INT' }]).schema));
});

test('added columns get new ids and sit before the system columns, optional', () => {
  const v0 = newLakeSchema(tableInfo([{ name: 'id', type: 'BIGINT', nullable: false }], { primaryKey: ['id'] }));
  const info = tableInfo(
    [
      { name: 'id', type: 'BIGINT', nullable: false },
      { name: 'note', type: 'STRING' },
      { name: 'score', type: 'DECIMAL(10, 2)', nullable: false },
    ],
    { primaryKey: ['id'] },
  );
  const v1 = evolveLakeSchema(v0, info);
  assert.deepEqual(v1, {
    type: 'struct',
    'schema-id': 1,
    'identifier-field-ids': [1],
    fields: [
      { id: 1, name: 'id', required: true, type: 'long' },
      { id: 5, name: 'note', required: false, type: 'string' },
      { id: 6, name: 'score', required: false, type: 'decimal(10,2)' },
      { id: 2, name: '__bucket', required: true, type: 'int' },
      { id: 3, name: '__offset', required: true, type: 'long' },
      { id: 4, name: '__timestamp', required: true, type: 'timestamptz' },
    ],
  });
  assert.equal(evolveLakeSchema(v1!, info), undefined);
  const v2 = evolveLakeSchema(v1!, tableInfo([...info.schema.columns, { name: 'flag', type: 'BOOLEAN' }], { primaryKey: ['id'] }));
  assert.equal(v2!['schema-id'], 2);
  assert.deepEqual(
    v2!.fields.map((f) => `${f.id}:${f.name}`),
    ['1:id', '5:note', '6:score', '7:flag', '2:__bucket', '3:__offset', '4:__timestamp'],
  );
});

test('a column whose lake type would change is rejected', () => {
  const v0 = newLakeSchema(tableInfo([{ name: 'n', type: 'INT' }]));
  assert.equal(evolveLakeSchema(v0, tableInfo([{ name: 'n', type: 'SMALLINT' }])), undefined, 'SMALLINT is int in the lake as well');
  assert.throws(() => evolveLakeSchema(v0, tableInfo([{ name: 'n', type: 'BIGINT' }])), rejects('INVALID_ALTER_TABLE_EXCEPTION'));
  assert.throws(
    () =>
      evolveLakeSchema(
        v0,
        tableInfo([
          { name: 'n', type: 'INT' },
          { name: '__timestamp', type: 'INT' },
        ]),
      ),
    rejects('INVALID_TABLE_EXCEPTION'),
  );
});

test('partition spec: identity of partition keys, then bucket of a single bucket key', () => {
  const info = tableInfo(
    [
      { name: 'day', type: 'DATE' },
      { name: 'region', type: 'STRING' },
      { name: 'id', type: 'BIGINT' },
      { name: 'v', type: 'DOUBLE' },
    ],
    { primaryKey: ['day', 'region', 'id'], partitionKeys: ['day', 'region'], bucketKeys: ['id'], bucketCount: 8, properties: { 'table.datalake.format': 'iceberg' } },
  );
  assert.deepEqual(lakePartitionSpec(info, newLakeSchema(info)), {
    'spec-id': 0,
    fields: [
      { 'source-id': 1, 'field-id': 1000, name: 'day', transform: 'identity' },
      { 'source-id': 2, 'field-id': 1001, name: 'region', transform: 'identity' },
      { 'source-id': 3, 'field-id': 1002, name: 'id_bucket', transform: 'bucket[8]' },
    ],
  });
});

test('partition spec: identity of __bucket without a single bucketable bucket key or Iceberg bucketing', () => {
  const columns: ColumnSpec[] = [
    { name: 'a', type: 'INT' },
    { name: 'b', type: 'STRING' },
    { name: 'x', type: 'DOUBLE' },
  ];
  const byBucket = { 'spec-id': 0, fields: [{ 'source-id': 4, 'field-id': 1000, name: '__bucket', transform: 'identity' }] };
  const iceberg = { 'table.datalake.format': 'iceberg' };
  for (const bucketKeys of [[], ['a', 'b'], ['x']]) {
    const info = tableInfo(columns, { bucketKeys, properties: iceberg });
    assert.deepEqual(lakePartitionSpec(info, newLakeSchema(info)), byBucket, bucketKeys.join(','));
  }
  // A table made lake-enabled after creation keeps Tributary's own bucketing: the lake partitions by __bucket.
  const later = tableInfo(columns, { bucketKeys: ['a'], properties: { 'table.datalake.enabled': 'true' } });
  assert.deepEqual(lakePartitionSpec(later, newLakeSchema(later)), byBucket);
});

test('the sort order is __offset ascending', () => {
  const schema = newLakeSchema(tableInfo([{ name: 'a', type: 'INT' }]));
  assert.deepEqual(lakeSortOrder(schema), {
    'order-id': 1,
    fields: [{ transform: 'identity', 'source-id': 3, direction: 'asc', 'null-order': 'nulls-first' }],
  });
});
