import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import { ManifestContent, ManifestEntryStatus } from './data-file.js';
import { createTestTable, DB, TABLE, type TestTable } from './fixtures/catalog-table.js';
import { planScan, readManifest, readManifestList, type ScanPlan } from './scan.js';
import { commitAppend, commitRewrite, commitRowDelta } from './snapshot-producer.js';
import { fromSingleValue } from './single-value.js';
import { currentSnapshot, snapshotById } from './table-metadata.js';

/** Each planned data file as "name@sequence delete…", sorted. */
function describePlan(plan: ScanPlan): string[] {
  return plan.dataFiles
    .map((t) => [`${path.basename(t.file.filePath)}@${t.dataSequenceNumber}`, ...t.deletes.map((d) => path.basename(d.filePath))].join(' '))
    .sort();
}

async function assertRejects(promise: Promise<unknown>, name: string, pattern?: RegExp): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof TributaryError, String(err));
    assert.equal(err.errorName, name, err.message);
    if (pattern) assert.match(err.message, pattern);
    return true;
  });
}

function metadataFiles(t: TestTable): string[] {
  return fs.readdirSync(path.join(t.location, 'metadata')).filter((n) => n.endsWith('.avro'));
}

describe('snapshot operations', () => {
  let t: TestTable;
  beforeEach(async () => {
    t = await createTestTable();
  });
  afterEach(() => t.remove());

  const load = () => t.catalog.loadTable(DB, TABLE);
  const scan = async (snapshotId?: bigint) => planScan(await load(), { snapshotId });

  it('append, row delta, rewrite: snapshots, summaries, sequence numbers and the deletes each data file gets', async () => {
    const d1 = t.data('d1.parquet', 0, 10);
    const d2 = t.data('d2.parquet', 1, 5);
    const s1 = await commitAppend(t.catalog, DB, TABLE, { dataFiles: [d1, d2], summary: { 'tributary.table-id': '7' } });
    let m = (await load()).metadata;
    assert.equal(m.currentSnapshotId, s1);
    assert.deepEqual(currentSnapshot(m)?.summary, {
      'tributary.table-id': '7',
      'added-data-files': '2',
      'added-records': '15',
      'added-files-size': '2015',
      'total-data-files': '2',
      'total-records': '15',
      'total-files-size': '2015',
      'total-delete-files': '0',
      'total-equality-deletes': '0',
      'total-position-deletes': '0',
      'changed-partition-count': '2',
      operation: 'append',
    });
    assert.equal(currentSnapshot(m)?.sequenceNumber, 1n);
    assert.equal(currentSnapshot(m)?.parentSnapshotId, null);

    const d3 = t.data('d3.parquet', 0, 3);
    const e1 = t.equalityDeletes('e1.parquet', 0, 2);
    const p1 = t.positionDeletes('p1.parquet', 0, 1, d3);
    const s2 = await commitRowDelta(t.catalog, DB, TABLE, { dataFiles: [d3], deleteFiles: [e1, p1] });
    m = (await load()).metadata;
    const summary2 = snapshotById(m, s2)!.summary;
    assert.equal(summary2.operation, 'overwrite');
    assert.equal(summary2['added-delete-files'], '2');
    assert.equal(summary2['added-equality-delete-files'], '1');
    assert.equal(summary2['added-position-delete-files'], '1');
    assert.equal(summary2['added-equality-deletes'], '2');
    assert.equal(summary2['added-position-deletes'], '1');
    assert.equal(summary2['total-records'], '18');
    assert.equal(summary2['total-delete-files'], '2');
    // Equality deletes reach older data only; the position delete's path bounds name d3 alone.
    assert.deepEqual(describePlan(await scan()), ['d1.parquet@1 e1.parquet', 'd2.parquet@1', 'd3.parquet@2 p1.parquet']);

    const e2 = t.equalityDeletes('e2.parquet', 1, 1);
    const s3 = await commitRowDelta(t.catalog, DB, TABLE, { dataFiles: [], deleteFiles: [e2] });
    assert.equal(snapshotById((await load()).metadata, s3)!.summary.operation, 'delete');
    const compactionPlan = await scan();
    assert.equal(compactionPlan.snapshotId, s3);
    assert.equal(compactionPlan.sequenceNumber, 3n);

    // An equality delete commits while the compaction of bucket 0 runs.
    const e3 = t.equalityDeletes('e3.parquet', 0, 1);
    await commitRowDelta(t.catalog, DB, TABLE, { dataFiles: [], deleteFiles: [e3] });
    const c1 = t.data('c1.parquet', 0, 12);
    const s5 = await commitRewrite(t.catalog, DB, TABLE, { removed: [d1, d3, p1], added: [c1], startingSequenceNumber: compactionPlan.sequenceNumber });
    m = (await load()).metadata;
    const summary5 = snapshotById(m, s5)!.summary;
    assert.equal(summary5.operation, 'replace');
    assert.equal(summary5['deleted-data-files'], '2');
    assert.equal(summary5['deleted-records'], '13');
    assert.equal(summary5['removed-delete-files'], '1');
    assert.equal(summary5['removed-position-deletes'], '1');
    assert.equal(summary5['added-data-files'], '1');
    assert.equal(summary5['total-data-files'], '2');
    assert.equal(summary5['total-records'], '17');
    assert.equal(summary5['total-delete-files'], '3');
    assert.equal(summary5['total-position-deletes'], '0');
    assert.equal(summary5['changed-partition-count'], '1');
    // c1 keeps the compaction's starting sequence number: e3 (committed later) applies, e1 does not again.
    assert.deepEqual(describePlan(await scan()), ['c1.parquet@3 e3.parquet', 'd2.parquet@1 e2.parquet']);
    // Time travel still sees the old files.
    assert.deepEqual(describePlan(await scan(s1)), ['d1.parquet@1', 'd2.parquet@1']);

    const s5Manifests = await readManifestList(snapshotById(m, s5)!.manifestList);
    const d4 = t.data('d4.parquet', 1, 4);
    const s6 = await commitAppend(t.catalog, DB, TABLE, { dataFiles: [d4] });
    m = (await load()).metadata;
    assert.deepEqual(describePlan(await scan()), ['c1.parquet@3 e3.parquet', 'd2.parquet@1 e2.parquet', 'd4.parquet@6']);
    assert.equal(snapshotById(m, s6)!.parentSnapshotId, s5);
    assert.equal(m.lastSequenceNumber, 6n);

    // The rewrite's new version of s1's data manifest: d1 DELETED, d2 EXISTING with its sequence number.
    const rewritten = s5Manifests.find((f) => f.addedSnapshotId === s5 && f.content === ManifestContent.DATA && f.existingFilesCount === 1)!;
    assert.equal(rewritten.deletedFilesCount, 1);
    assert.equal(rewritten.sequenceNumber, 5n);
    assert.equal(rewritten.minSequenceNumber, 1n);
    const entries = (await readManifest(rewritten)).entries.map((e) => [path.basename(e.dataFile.filePath), e.status, e.snapshotId, e.sequenceNumber]);
    assert.deepEqual(entries, [
      ['d1.parquet', ManifestEntryStatus.DELETED, s5, 1n],
      ['d2.parquet', ManifestEntryStatus.EXISTING, s1, 1n],
    ]);
    // The manifest of c1: explicit data sequence number 3, min sequence number 3, bucket bounds [0, 0].
    const added = s5Manifests.find((f) => f.addedSnapshotId === s5 && f.addedFilesCount === 1)!;
    assert.equal(added.minSequenceNumber, 3n);
    assert.deepEqual(added.partitions?.map((p) => [p.containsNull, fromSingleValue('int', p.lowerBound!), fromSingleValue('int', p.upperBound!)]), [[false, 0, 0]]);
    // The new version of s2's data manifest lists d3 as DELETED only: s6 no longer carries it.
    const onlyDeleted = s5Manifests.filter((f) => f.addedFilesCount + f.existingFilesCount === 0);
    assert.equal(onlyDeleted.length, 1);
    const s6Paths = (await readManifestList(snapshotById(m, s6)!.manifestList)).map((f) => f.manifestPath);
    assert.ok(!s6Paths.includes(onlyDeleted[0].manifestPath));
    assert.equal(s6Paths.length, s5Manifests.length);

    await assertRejects(commitRewrite(t.catalog, DB, TABLE, { removed: [d1], added: [], startingSequenceNumber: 5n }), 'INVALID_ARGUMENT', /d1\.parquet/);
  });

  it('retries a commit that lost a race, on the new version, reusing its manifests', async () => {
    // Both writers load version 1 before either commits: the validate hook holds them until both have.
    let arrived = 0;
    let release!: () => void;
    const bothLoaded = new Promise<void>((resolve) => {
      release = resolve;
    });
    const attempts: number[] = [];
    const validate = (writer: number) => async () => {
      attempts.push(writer);
      if (++arrived === 2) release();
      await bothLoaded;
    };
    const [a, b] = await Promise.all([
      commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('a.parquet', 0, 1)], validate: validate(1) }),
      commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('b.parquet', 1, 2)], validate: validate(2) }),
    ]);
    assert.equal(attempts.length, 3, 'the loser validated the new version again');
    const { metadata, version } = await load();
    assert.equal(version, 3);
    const loser = attempts[2] === 1 ? a : b;
    const winner = loser === a ? b : a;
    assert.equal(metadata.currentSnapshotId, loser);
    assert.equal(snapshotById(metadata, loser)!.parentSnapshotId, winner);
    assert.equal(snapshotById(metadata, loser)!.sequenceNumber, 2n);
    assert.equal(snapshotById(metadata, loser)!.summary['total-records'], '3');
    assert.deepEqual(describePlan(await scan()), ['a.parquet@' + (loser === a ? 2 : 1), 'b.parquet@' + (loser === b ? 2 : 1)]);
    // Two manifests and two manifest lists: the loser's first list was deleted, its manifest reused.
    assert.equal(metadataFiles(t).length, 4);
  });

  it('gives up after commit.retry.num-retries, leaving no files behind', async () => {
    t.remove();
    t = await createTestTable({ properties: { 'commit.retry.num-retries': '0' } });
    let arrived = 0;
    let release!: () => void;
    const bothLoaded = new Promise<void>((resolve) => {
      release = resolve;
    });
    const validate = async () => {
      if (++arrived === 2) release();
      await bothLoaded;
    };
    const results = await Promise.allSettled([
      commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('a.parquet', 0, 1)], validate }),
      commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('b.parquet', 1, 2)], validate }),
    ]);
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    assert.equal(failed.length, 1);
    assert.equal((failed[0].reason as TributaryError).errorName, 'COMMIT_FAILED');
    assert.equal((await load()).version, 2);
    assert.equal(metadataFiles(t).length, 2, 'only the winner’s manifest and manifest list remain');
  });

  it('aborts without retrying when validate throws, and deletes what the attempt wrote', async () => {
    await commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('a.parquet', 0, 1)] });
    const before = metadataFiles(t);
    let calls = 0;
    await assertRejects(
      commitRowDelta(t.catalog, DB, TABLE, {
        dataFiles: [t.data('b.parquet', 0, 1)],
        deleteFiles: [],
        validate: (metadata) => {
          calls++;
          if (metadata.snapshots.length > 0) throw new TributaryError('FENCED_TIERING_EPOCH_EXCEPTION', 'offsets already tiered');
        },
      }),
      'FENCED_TIERING_EPOCH_EXCEPTION',
    );
    assert.equal(calls, 1);
    assert.equal((await load()).version, 2);
    assert.deepEqual(metadataFiles(t), before);
  });

  it('commits an empty append, keeping the summary it is given', async () => {
    const id = await commitAppend(t.catalog, DB, TABLE, { dataFiles: [], summary: { offsets: '0:5' } });
    const s = currentSnapshot((await load()).metadata)!;
    assert.equal(s.snapshotId, id);
    assert.equal(s.summary.offsets, '0:5');
    assert.equal(s.summary['total-records'], '0');
    assert.deepEqual((await scan()).dataFiles, []);
    assert.deepEqual(await readManifestList(s.manifestList), []);
  });

  it('rejects files of the wrong kind', async () => {
    const del = t.equalityDeletes('e.parquet', 0, 1);
    await assert.rejects(commitAppend(t.catalog, DB, TABLE, { dataFiles: [del] }), /cannot be appended/);
    await assert.rejects(commitRowDelta(t.catalog, DB, TABLE, { dataFiles: [], deleteFiles: [t.data('d.parquet', 0, 1)] }), /cannot be added as deletes/);
    await assert.rejects(commitRowDelta(t.catalog, DB, TABLE, { dataFiles: [], deleteFiles: [{ ...del, equalityIds: [] }] }), /no equality field ids/);
    await assert.rejects(commitRewrite(t.catalog, DB, TABLE, { removed: [], added: [], startingSequenceNumber: 0n }), /must remove/);
  });
});
