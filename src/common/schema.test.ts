import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TributaryError } from './errors.js';
import { addColumns, buildSchema, fieldIndexes, projectionIn, schemaFromJson, schemaToJson } from './schema.js';
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
