import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { createTestTable, DB, TABLE, type TestTable } from './fixtures/catalog-table.js';
import { expireSnapshots, removeOrphanFiles } from './maintenance.js';
import { planScan, readManifestList } from './scan.js';
import { commitAppend, commitRewrite, commitRowDelta } from './snapshot-producer.js';
import { snapshotById } from './table-metadata.js';

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name)).sort();
}

describe('table maintenance', () => {
  let t: TestTable;
  afterEach(() => t.remove());

  /** s1 append d1 d2; s2 row delta d3 e1; s3 rewrite d1 e1 → c1; s4 append d4. */
  async function history() {
    const [d1, d2, d3, e1, c1, d4] = [t.data('d1', 0, 5), t.data('d2', 1, 5), t.data('d3', 0, 5), t.equalityDeletes('e1', 0, 1), t.data('c1', 0, 4), t.data('d4', 1, 5)].map(t.touch);
    const s1 = await commitAppend(t.catalog, DB, TABLE, { dataFiles: [d1, d2] });
    const s2 = await commitRowDelta(t.catalog, DB, TABLE, { dataFiles: [d3], deleteFiles: [e1] });
    const s3 = await commitRewrite(t.catalog, DB, TABLE, { removed: [d1, e1], added: [c1], startingSequenceNumber: 2n });
    const s4 = await commitAppend(t.catalog, DB, TABLE, { dataFiles: [d4] });
    return { s1, s2, s3, s4, d1, e1 };
  }

  const listOf = async (snapshotId: bigint) => snapshotById((await t.catalog.loadTable(DB, TABLE)).metadata, snapshotId)!.manifestList;

  it('expires snapshots past the bounds and deletes exactly the files only they reached', async () => {
    t = await createTestTable();
    const { s1, s2, s3, s4, d1, e1 } = await history();
    const [list1, list2, list3, list4] = await Promise.all([s1, s2, s3, s4].map(listOf));
    const manifests = async (list: string) => (await readManifestList(list)).map((m) => m.manifestPath);
    const kept = new Set([...(await manifests(list3)), ...(await manifests(list4))]);
    const onlyExpired = [...new Set([...(await manifests(list1)), ...(await manifests(list2))])].filter((m) => !kept.has(m));
    assert.equal(onlyExpired.length, 2, "s1's data manifest and s2's delete manifest were rewritten by s3");

    assert.deepEqual(await expireSnapshots(t.catalog, DB, TABLE, { olderThanMs: 0, retainLast: 1 }), { expiredSnapshotIds: [], deletedFiles: [] });
    const version = (await t.catalog.loadTable(DB, TABLE)).version;
    const result = await expireSnapshots(t.catalog, DB, TABLE, { olderThanMs: Date.now() + 1000, retainLast: 2 });
    assert.deepEqual(result.expiredSnapshotIds, [s1, s2]);
    assert.deepEqual(result.deletedFiles, [d1.filePath, e1.filePath, list1, list2, ...onlyExpired].sort());
    for (const f of result.deletedFiles) assert.equal(fs.existsSync(f), false, f);
    const after = await t.catalog.loadTable(DB, TABLE);
    assert.equal(after.version, version + 1);
    assert.deepEqual(after.metadata.snapshots.map((s) => s.snapshotId), [s3, s4]);
    assert.deepEqual(after.metadata.snapshotLog.map((e) => e.snapshotId), [s3, s4]);
    const plan = await planScan(after);
    assert.deepEqual(plan.dataFiles.map((task) => path.basename(task.file.filePath)).sort(), ['c1', 'd2', 'd3', 'd4']);
    for (const task of plan.dataFiles) assert.ok(fs.existsSync(task.file.filePath));

    // Never the current snapshot: with everything old and one to keep, s3 goes and s4 stays.
    const list4Manifests = new Set(await manifests(list4));
    const s3Only = (await manifests(list3)).filter((m) => !list4Manifests.has(m));
    assert.equal(s3Only.length, 1, 's3’s delete manifest with e1 DELETED is not carried into s4');
    const again = await expireSnapshots(t.catalog, DB, TABLE, { olderThanMs: Date.now() + 1000, retainLast: 1 });
    assert.deepEqual(again.expiredSnapshotIds, [s3]);
    assert.deepEqual(again.deletedFiles, [list3, ...s3Only].sort(), 'no content file: all of s3’s live files are live in s4');
    assert.deepEqual((await t.catalog.loadTable(DB, TABLE)).metadata.snapshots.map((s) => s.snapshotId), [s4]);
  });

  it('removes old files that no metadata references, and nothing young or referenced', async () => {
    t = await createTestTable({ properties: { 'write.metadata.previous-versions-max': '2' } });
    await history();
    const metadataDir = path.join(t.location, 'metadata');
    const orphans = [
      path.join(t.location, 'data', '__bucket=0', 'from-a-failed-round.parquet'),
      path.join(metadataDir, 'abandoned-m0.avro'),
      path.join(metadataDir, '0d7c-crashed.metadata.json.tmp'),
    ];
    for (const f of orphans) fs.writeFileSync(f, 'x');
    const tenDaysAgo = new Date(Date.now() - 10 * 86_400_000);
    for (const f of filesUnder(t.location)) fs.utimesSync(f, tenDaysAgo, tenDaysAgo);
    const young = path.join(t.location, 'data', '__bucket=1', 'being-written.parquet');
    fs.writeFileSync(young, 'x');

    const loaded = await t.catalog.loadTable(DB, TABLE);
    assert.equal(loaded.version, 5);
    assert.deepEqual(loaded.metadata.metadataLog.map((e) => path.basename(e.metadataFile)), ['v3.metadata.json', 'v4.metadata.json']);
    const outOfLog = ['v1.metadata.json', 'v2.metadata.json'].map((n) => path.join(metadataDir, n));
    const before = filesUnder(t.location);

    const { deletedFiles } = await removeOrphanFiles(t.catalog, DB, TABLE);
    assert.deepEqual(deletedFiles, [...orphans, ...outOfLog].sort());
    assert.deepEqual(filesUnder(t.location), before.filter((f) => !deletedFiles.includes(f)));
    assert.ok(fs.existsSync(young));
    assert.ok(fs.existsSync(path.join(metadataDir, 'version-hint.text')));
    // The table still reads, down to every file of every snapshot.
    const after = await t.catalog.loadTable(DB, TABLE);
    for (const s of after.metadata.snapshots) {
      for (const task of (await planScan(after, { snapshotId: s.snapshotId })).dataFiles) assert.ok(fs.existsSync(task.file.filePath));
    }
    assert.deepEqual((await removeOrphanFiles(t.catalog, DB, TABLE, { olderThanMs: Date.now() + 1000 })).deletedFiles, [young]);
  });
});
