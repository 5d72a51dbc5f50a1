import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TributaryError } from './errors.js';
import { addColumns, buildSchema, type ColumnSpec, fieldIndexes, projectionIn, schemaFromJson, schemaToJson, tableDescriptorFromJson } from './schema.js';
import { formatDataType } from './types.js';

const rejects = (name: string, fragment: string) => (e: unknown) => e instanceof TributaryError && e.errorName === name && e.message.includes(fragment);

describe('addColumns', () => {
  const v0 = buildSchema([{ name: 'id', type: 'BIGINT' }, { name: 'name', type: 'STRING' }], ['id']);

  it('appends nullable columns with the next field ids and keeps the existing ones', () => {
    const v1 = addColumns(v0, [{ name: 'price', type: 'DECIMAL(10, 2)', comment: 'in euro' }, { name: 'ts', type: 'TIMESTAMP_LTZ(3)', nullable: true }]);
    assert.deepEqual(
      v1.columns.map((c) => [c.name, formatDataType(c.type), c.nullable, c.fieldId, c.comment]),
      [
        ['id', 'BIGINT', false, 0, undefined],
        ['name', 'STRING', true, 1, undefined],
        ['price', 'DECIMAL(10, 2)', true, 2, 'in euro'],
        ['ts', 'TIMESTAMP_LTZ(3)', true, 3, undefined],
      ],
    );
    assert.equal(v1.highestFieldId, 3);
    assert.deepEqual(v1.primaryKey, ['id']);
    assert.equal(v0.columns.length, 2, 'the old schema is not changed');
    assert.deepEqual(schemaFromJson(schemaToJson(v1)), v1);
    // Field ids keep counting from the highest ever given, not from the column count.
    const v2 = addColumns({ ...v1, highestFieldId: 9 }, [{ name: 'x', type: 'INT' }]);
    assert.equal(v2.columns[4].fieldId, 10);
  });

  it('refuses NOT NULL, existing and reserved names, invalid names and types, and nothing to add', () => {
    assert.throws(() => addColumns(v0, [{ name: 'c', type: 'INT', nullable: false }]), rejects('INVALID_ALTER_TABLE_EXCEPTION', "added column 'c' must be nullable"));
    assert.throws(() => addColumns(v0, [{ name: 'NAME', type: 'INT' }]), rejects('DUPLICATE_COLUMN', "column 'NAME' already exists"));
    assert.throws(() => addColumns(v0, [{ name: 'a', type: 'INT' }, { name: 'A', type: 'INT' }]), rejects('DUPLICATE_COLUMN', "column 'A' already exists"));
    for (const name of ['__bucket', '__OFFSET', '__timestamp']) {
      assert.throws(() => addColumns(v0, [{ name, type: 'INT' }]), rejects('INVALID_ALTER_TABLE_EXCEPTION', 'reserved'), name);
    }
    assert.throws(() => addColumns(v0, [{ name: '1x', type: 'INT' }]), rejects('INVALID_TABLE_EXCEPTION', "invalid column name '1x'"));
    assert.throws(() => addColumns(v0, [{ name: 'c', type: 'MAP<INT, INT>' }]), rejects('INVALID_TYPE', 'MAP'));
    assert.throws(() => addColumns(v0, []), rejects('INVALID_ALTER_TABLE_EXCEPTION', 'names no column'));
  });
});

describe('fieldIndexes and projectionIn', () => {
  const v0 = buildSchema([{ name: 'a', type: 'INT' }, { name: 'b', type: 'STRING' }]);
  const v1 = addColumns(v0, [{ name: 'c', type: 'INT' }, { name: 'd', type: 'BOOLEAN' }]);

  it('match columns by field id, -1 where the other schema lacks them', () => {
    assert.deepEqual([...fieldIndexes(v0.columns, v1.columns)], [0, 1, -1, -1]);
    assert.deepEqual([...fieldIndexes(v1.columns, v0.columns)], [0, 1]);
    assert.deepEqual([...fieldIndexes(v1.columns, [v1.columns[3], v1.columns[0]])], [3, 0]);
    // A column re-added under the same name is another column: field ids, not names, decide.
    const renamed = { ...v1.columns[2], fieldId: 99 };
    assert.deepEqual([...fieldIndexes(v1.columns, [renamed])], [-1]);
  });

  it('keep the wanted columns a schema has, in the order wanted', () => {
    const wanted = [v1.columns[2], v1.columns[1], v1.columns[3], v1.columns[0]];
    assert.deepEqual(projectionIn(v1, wanted), [2, 1, 3, 0]);
    assert.deepEqual(projectionIn(v0, wanted), [1, 0]);
    assert.deepEqual(projectionIn(v0, [v1.columns[3]]), []);
  });
});

describe('table descriptors from JSON', () => {
  it('names the field of each wrong part, and a column without a name is refused by name, not by a TypeError', () => {
    const where = 'CreateTable: table_json';
    const columns = [{ name: 'id', type: 'INT' }];
    assert.throws(() => tableDescriptorFromJson({ columns: [{ name: 'id', type: 'INT' }, { type: 'STRING' }] }, where), rejects('INVALID_TABLE_EXCEPTION', 'CreateTable: table_json.columns[1].name is required'));
    assert.throws(() => buildSchema([{ name: 'id', type: 'INT' }, { type: 'STRING' } as unknown as ColumnSpec]), rejects('INVALID_TABLE_EXCEPTION', 'columns[1].name is required'));
    assert.throws(() => tableDescriptorFromJson({ columns: [{ name: 5, type: 'INT' }] }, where), rejects('INVALID_TABLE_EXCEPTION', 'invalid column name of type number (CreateTable: table_json.columns[0].name)'));
    assert.throws(() => tableDescriptorFromJson({ columns: [null] }, where), rejects('INVALID_TABLE_EXCEPTION', 'table_json.columns[0] must be a column object'));
    assert.throws(() => tableDescriptorFromJson({ columns: [{ name: 'id' }] }, where), rejects('INVALID_TYPE', 'table_json.columns[0].type is required'));
    assert.throws(() => tableDescriptorFromJson({ columns: [{ name: 'id', type: 'INT', nullable: 'no' }] }, where), rejects('INVALID_TABLE_EXCEPTION', 'columns[0].nullable must be true or false'));
    assert.throws(() => tableDescriptorFromJson({ columns: 'id INT' }, where), rejects('INVALID_TABLE_EXCEPTION', 'table_json.columns must be an array'));
    assert.throws(() => tableDescriptorFromJson(null, where), rejects('INVALID_TABLE_EXCEPTION', 'table_json must be a JSON object'));
    assert.throws(() => tableDescriptorFromJson({ columns, primaryKey: 'id' }, where), rejects('INVALID_TABLE_EXCEPTION', 'table_json.primaryKey must be an array of column names'));
    assert.throws(() => tableDescriptorFromJson({ columns, partitionKeys: [5] }, where), rejects('INVALID_TABLE_EXCEPTION', 'table_json.partitionKeys must be'));
    assert.throws(() => tableDescriptorFromJson({ columns, bucketCount: '2' }, where), rejects('INVALID_TABLE_EXCEPTION', 'table_json.bucketCount must be a number'));
    assert.throws(() => tableDescriptorFromJson({ columns, properties: { 'bucket.num': 2 } }, where), rejects('INVALID_TABLE_EXCEPTION', "table_json.properties['bucket.num'] must be a string"));
    assert.throws(() => tableDescriptorFromJson({ columns, comment: {} }, where), rejects('INVALID_TABLE_EXCEPTION', 'table_json.comment must be a string'));
    const d = tableDescriptorFromJson({ columns, primaryKey: ['id'], properties: { 'bucket.num': '2' }, comment: 'c' }, where);
    assert.deepEqual(buildSchema(d.columns, d.primaryKey).primaryKey, ['id']);
  });
});
