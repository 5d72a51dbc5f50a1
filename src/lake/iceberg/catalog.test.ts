import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import { FileSystemCatalog } from './catalog.js';
import { type TableMetadata, newTableMetadata, withSnapshot } from './table-metadata.js';
import type { IcebergSchema } from './types.js';

const schema: IcebergSchema = { type: 'struct', 'schema-id': 0, fields: [{ id: 1, name: 'id', required: true, type: 'long' }] };

async function assertRejects(promise: Promise<unknown>, name: string): Promise<TributaryError> {
  let caught: unknown;
  await promise.catch((err: unknown) => {
    caught = err;
  });
  assert.ok(caught instanceof TributaryError, `expected ${name}, got ${String(caught)}`);
  assert.equal(caught.errorName, name, caught.message);
  return caught;
}

function appended(base: TableMetadata, id: bigint): TableMetadata {
  return withSnapshot(base, {
    snapshotId: id,
    parentSnapshotId: base.currentSnapshotId,
    sequenceNumber: base.lastSequenceNumber + 1n,
    timestampMs: Date.now(),
    manifestList: `${base.location}/metadata/snap-${id}.avro`,
    summary: { operation: 'append' },
  });
}

describe('FileSystemCatalog', () => {
  let warehouse: string;
  let catalog: FileSystemCatalog;
  const metadataDir = () => path.join(warehouse, 'db', 't', 'metadata');
  const create = () => catalog.createTable('db', 't', newTableMetadata({ location: catalog.tableLocation('db', 't'), schema, spec: { 'spec-id': 0, fields: [] }, sortOrder: { 'order-id': 0, fields: [] } }));

  beforeEach(() => {
    warehouse = fs.mkdtempSync(path.join(os.tmpdir(), 'iceberg-catalog-'));
    catalog = new FileSystemCatalog(warehouse);
  });
  afterEach(() => fs.rmSync(warehouse, { recursive: true, force: true }));

  it('creates, lists and loads tables in the hadoop layout', async () => {
    assert.deepEqual(await catalog.listNamespaces(), []);
    await assertRejects(catalog.loadTable('db', 't'), 'TABLE_NOT_EXIST');
    const created = await create();
    assert.equal(created.version, 1);
    assert.deepEqual(fs.readdirSync(metadataDir()).sort(), ['v1.metadata.json', 'version-hint.text']);
    assert.equal(fs.readFileSync(path.join(metadataDir(), 'version-hint.text'), 'utf8'), '1');
    const loaded = await catalog.loadTable('db', 't');
    assert.deepEqual(loaded, created);
    assert.equal(loaded.metadataLocation, path.join(metadataDir(), 'v1.metadata.json'));
    assert.equal(await catalog.tableExists('db', 't'), true);
    assert.equal(await catalog.tableExists('db', 'other'), false);
    assert.deepEqual(await catalog.listNamespaces(), ['db']);
    assert.deepEqual(await catalog.listTables('db'), ['t']);
    await assertRejects(catalog.listTables('nodb'), 'DATABASE_NOT_EXIST');
    await assertRejects(create(), 'TABLE_ALREADY_EXIST');
    const elsewhere = newTableMetadata({ location: '/elsewhere', schema, spec: { 'spec-id': 0, fields: [] }, sortOrder: { 'order-id': 0, fields: [] } });
    await assertRejects(catalog.createTable('db', 'u', elsewhere), 'INVALID_ARGUMENT');
    await assertRejects(catalog.loadTable('db', '../db'), 'INVALID_TABLE_EXCEPTION');
    await assertRejects(catalog.loadTable('a/b', 't'), 'INVALID_DATABASE_EXCEPTION');
  });

  it('commits the next version, logging the previous metadata file', async () => {
    const base = await create();
    const committed = await catalog.commit('db', 't', base.version, appended(base.metadata, 7n));
    assert.equal(committed.version, 2);
    assert.ok(committed.metadata.lastUpdatedMs >= base.metadata.lastUpdatedMs);
    assert.deepEqual(committed.metadata.metadataLog, [{ timestampMs: base.metadata.lastUpdatedMs, metadataFile: base.metadataLocation }]);
    const loaded = await catalog.loadTable('db', 't');
    assert.deepEqual(loaded, committed);
    assert.equal(loaded.metadata.currentSnapshotId, 7n);
    assert.equal(fs.readFileSync(path.join(metadataDir(), 'version-hint.text'), 'utf8'), '2');
    assert.deepEqual(fs.readdirSync(metadataDir()).filter((n) => n.endsWith('.tmp')), [], 'no temp files left');
    await assertRejects(catalog.commit('db', 't', 5, appended(loaded.metadata, 8n)), 'TABLE_NOT_EXIST');
  });

  it('lets exactly one of two commits from the same base win; the other gets a retriable COMMIT_FAILED', async () => {
    const base = await create();
    const results = await Promise.allSettled([
      catalog.commit('db', 't', base.version, appended(base.metadata, 1n)),
      catalog.commit('db', 't', base.version, appended(base.metadata, 2n)),
    ]);
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    assert.equal(won.length, 1);
    assert.equal(lost.length, 1);
    assert.ok(lost[0].reason instanceof TributaryError);
    assert.equal(lost[0].reason.errorName, 'COMMIT_FAILED');
    assert.equal(lost[0].reason.retriable, true);
    const winner = (won[0] as PromiseFulfilledResult<{ metadata: TableMetadata }>).value.metadata.currentSnapshotId;
    const loaded = await catalog.loadTable('db', 't');
    assert.equal(loaded.version, 2);
    assert.equal(loaded.metadata.currentSnapshotId, winner, 'the winner is not overwritten');
    // The loser reloads and commits on the new version.
    const retried = await catalog.commit('db', 't', loaded.version, appended(loaded.metadata, winner === 1n ? 2n : 1n));
    assert.equal(retried.version, 3);
    assert.equal(retried.metadata.snapshots.length, 2);
  });

  it('finds versions a writer committed without updating the hint, and survives a missing, damaged or empty hint', async () => {
    const base = await create();
    const hint = path.join(metadataDir(), 'version-hint.text');
    const v2 = await catalog.commit('db', 't', base.version, appended(base.metadata, 1n));
    await catalog.commit('db', 't', v2.version, appended(v2.metadata, 2n));
    fs.writeFileSync(hint, '1'); // as if the writers had died between the link and the hint
    assert.equal((await catalog.loadTable('db', 't')).version, 3);
    assert.equal((await catalog.loadTable('db', 't')).metadata.currentSnapshotId, 2n);
    fs.rmSync(hint);
    assert.equal((await catalog.loadTable('db', 't')).version, 3);
    fs.writeFileSync(hint, '9');
    assert.equal((await catalog.loadTable('db', 't')).version, 3);
    fs.writeFileSync(hint, 'garbage');
    assert.equal((await catalog.loadTable('db', 't')).version, 3);
    fs.writeFileSync(hint, ''); // the hint is not fsynced: a crash may leave it empty
    assert.equal((await catalog.loadTable('db', 't')).version, 3);
    // A commit on a stale base loses even though the hint is behind.
    await assertRejects(catalog.commit('db', 't', 2, appended(v2.metadata, 3n)), 'COMMIT_FAILED');
  });

  it('drops the metadata only, or everything with purge', async () => {
    await create();
    const dataFile = path.join(catalog.tableLocation('db', 't'), 'data', 'f.parquet');
    fs.mkdirSync(path.dirname(dataFile));
    fs.writeFileSync(dataFile, 'x');
    await catalog.dropTable('db', 't');
    assert.equal(await catalog.tableExists('db', 't'), false);
    assert.ok(fs.existsSync(dataFile));
    assert.deepEqual(await catalog.listTables('db'), []);
    await assertRejects(catalog.dropTable('db', 't'), 'TABLE_NOT_EXIST');
    await create();
    await catalog.dropTable('db', 't', { purge: true });
    assert.equal(fs.existsSync(catalog.tableLocation('db', 't')), false);
  });
});
