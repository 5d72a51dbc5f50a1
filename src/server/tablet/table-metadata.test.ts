import assert from 'node:assert/strict';
import { test } from 'node:test';
import { testTableInfo } from '../../common/fixtures/table-info.js';
import { addColumns, buildSchema, type Schema, type TablePath } from '../../common/schema.js';
import { ClusterTables } from './table-metadata.js';

const v0 = buildSchema([{ name: 'id', type: 'INT' }]);
const v1 = addColumns(v0, [{ name: 'a', type: 'STRING' }]);
const v2 = addColumns(v1, [{ name: 'b', type: 'STRING' }]);

test('a table is learned with every older schema, each read from the coordinator once', async () => {
  const asked: number[] = [];
  const tables = new ClusterTables(async (_path: TablePath, schemaId: number): Promise<Schema> => {
    asked.push(schemaId);
    return [v0, v1][schemaId];
  });
  const table = testTableInfo([{ name: 'id', type: 'INT' }], { tableId: 3, partitionKeys: ['id'] });
  const current = { ...table, schemaId: 2, schema: v2 };
  await tables.learn(current, { partitionId: 11, partitionName: '5', spec: { id: '5' } });
  await tables.learn(current);
  assert.deepEqual(asked, [0, 1]);
  assert.deepEqual(tables.schemaById(3, 0), v0);
  assert.deepEqual(tables.schemaById(3, 1), v1);
  assert.deepEqual(tables.schemaById(3, 2), v2);
  assert.equal(tables.schemaById(3, 3), undefined);
  assert.deepEqual(tables.partitionById(11), { partitionId: 11, partitionName: '5', spec: { id: '5' }, tableId: 3 });

  // A request that still names the older table info does not replace the newer one.
  await tables.learn({ ...table, schemaId: 1, schema: v1 });
  assert.equal(tables.getTableInfoById(3)?.schemaId, 2);
});

test('a schema the coordinator cannot give fails the learning', async () => {
  const tables = new ClusterTables(async () => {
    throw new Error('coordinator unavailable');
  });
  await assert.rejects(tables.learn({ ...testTableInfo([{ name: 'id', type: 'INT' }]), schemaId: 1, schema: v1 }), /coordinator unavailable/);
});
