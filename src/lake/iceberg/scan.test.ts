import assert from 'node:assert/strict';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import { createTestTable, DB, TABLE, type TestTable } from './fixtures/catalog-table.js';
import { localPath, partitionKey, planScan } from './scan.js';
import { commitAppend, commitRowDelta } from './snapshot-producer.js';

describe('planScan', () => {
  let t: TestTable;
  beforeEach(async () => {
    t = await createTestTable();
  });
  afterEach(() => t.remove());

  /** Data file name → names of its delete files. */
  const deletesByFile = async (snapshotId?: bigint) => {
    const plan = await planScan(await t.catalog.loadTable(DB, TABLE), { snapshotId });
    return Object.fromEntries(plan.dataFiles.map((task) => [path.basename(task.file.filePath), task.deletes.map((d) => path.basename(d.filePath))]));
  };

  it('plans nothing for a table without snapshots and names a missing snapshot', async () => {
    assert.deepEqual(await planScan(await t.catalog.loadTable(DB, TABLE)), { snapshotId: null, sequenceNumber: 0n, dataFiles: [] });
    await assert.rejects(deletesByFile(42n), (err: unknown) => err instanceof TributaryError && err.errorName === 'LAKE_SNAPSHOT_NOT_EXIST');
  });

  it('applies equality deletes to older data of the same partition, position deletes also to data of the same commit', async () => {
    await commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('old0', 0, 5), t.data('old1', 1, 5)] });
    await commitRowDelta(t.catalog, DB, TABLE, {
      dataFiles: [t.data('new0', 0, 5)],
      deleteFiles: [t.equalityDeletes('eq0', 0, 1), t.positionDeletes('pos0', 0, 1)],
    });
    assert.deepEqual(await deletesByFile(), {
      old0: ['pos0', 'eq0'],
      old1: [],
      new0: ['pos0'],
    });
    await commitRowDelta(t.catalog, DB, TABLE, { dataFiles: [], deleteFiles: [t.equalityDeletes('eq1', 1, 1), t.equalityDeletes('eq0b', 0, 1)] });
    assert.deepEqual(await deletesByFile(), {
      old0: ['pos0', 'eq0', 'eq0b'],
      old1: ['eq1'],
      new0: ['pos0', 'eq0b'],
    });
  });

  it('applies equality deletes of an unpartitioned spec to every partition, position deletes of it to none of another spec', async () => {
    await commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('b0', 0, 5), t.data('b1', 1, 5)] });
    const base = await t.catalog.loadTable(DB, TABLE);
    await t.catalog.commit(DB, TABLE, base.version, {
      ...base.metadata,
      partitionSpecs: [...base.metadata.partitionSpecs, { 'spec-id': 1, fields: [] }],
      defaultSpecId: 1,
    });
    await commitRowDelta(t.catalog, DB, TABLE, {
      dataFiles: [t.data('flat', null, 5)],
      deleteFiles: [t.equalityDeletes('global', null, 1), t.positionDeletes('flatpos', null, 1)],
    });
    assert.deepEqual(await deletesByFile(), { flat: ['flatpos'], b0: ['global'], b1: ['global'] });
  });

  it('keys partitions by spec and exact value', () => {
    assert.notEqual(partitionKey(0, [0]), partitionKey(0, [-0]));
    assert.notEqual(partitionKey(0, [1]), partitionKey(0, [1n]));
    assert.notEqual(partitionKey(0, [1]), partitionKey(1, [1]));
    assert.notEqual(partitionKey(0, ['a|b']), partitionKey(0, ['a', 'b']));
    assert.notEqual(partitionKey(0, [null]), partitionKey(0, ['null']));
    assert.equal(partitionKey(0, [Uint8Array.of(1, 2), 'x', null]), partitionKey(0, [Uint8Array.of(1, 2), 'x', null]));
  });

  it('opens file: URIs as paths', () => {
    assert.equal(localPath('file:///wh/db/t/a%20b.avro'), '/wh/db/t/a b.avro');
    assert.equal(localPath('file:/wh/x.avro'), '/wh/x.avro');
    assert.equal(localPath('/wh/x.avro'), '/wh/x.avro');
  });
});
