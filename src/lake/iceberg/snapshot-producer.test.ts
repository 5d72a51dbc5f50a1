import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import { ManifestContent, ManifestEntryStatus } from './data-file.js';
import { createTestTable, DB, TABLE, type TestTable } from './fixtures/catalog-table.js';
import { decodeManifest } from './manifest.js';
import { planScan, readManifest, readManifestList, type ScanPlan } from './scan.js';
import { commitAppend, commitRewrite, commitRowDelta } from './snapshot-producer.js';
import { fromSingleValue } from './single-value.js';
import { currentSnapshot, snapshotById, type TableMetadata } from './table-metadata.js';

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

/** Avro files under metadata/ that are neither a snapshot's manifest list nor listed in one. */
async function unreferencedMetadataFiles(t: TestTable): Promise<string[]> {
  const { metadata } = await t.catalog.loadTable(DB, TABLE);
  const referenced = new Set<string>();
  for (const s of metadata.snapshots) {
    referenced.add(path.basename(s.manifestList));
    for (const m of await readManifestList(s.manifestList)) referenced.add(path.basename(m.manifestPath));
  }
  return metadataFiles(t).filter((n) => !referenced.has(n));
}


/**
 * A `validate` hook that holds each of two commits until both have loaded the table, so they race
 * from one version; `arrivals` counts its calls (a retry calls it again).
 */
function bothLoadTheSameVersion(): { validate: () => Promise<void>; arrivals: () => number } {
  let arrived = 0;
  let release!: () => void;
  const bothLoaded = new Promise<void>((resolve) => {
    release = resolve;
  });
  const validate = async () => {
    if (++arrived === 2) release();
    await bothLoaded;
  };
  return { validate, arrivals: () => arrived };
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
    const race = bothLoadTheSameVersion();
    const attempts: number[] = [];
    const validate = (writer: number) => () => {
      attempts.push(writer);
      return race.validate();
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

  it('starts from the base it is given while that is current, and from the latest version once it is not', async () => {
    const stale = await load();
    const first = await commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('a.parquet', 0, 1)], base: stale });
    const seen: (bigint | null)[] = [];
    const validate = (metadata: TableMetadata) => void seen.push(metadata.currentSnapshotId);
    // The base is a version behind: the commit must not write over the snapshot committed since.
    const second = await commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('b.parquet', 1, 2)], base: stale, validate });
    assert.deepEqual(seen, [first], 'a version was committed after the base: the attempt starts from it');
    const { metadata, version } = await load();
    assert.equal(version, 3);
    assert.equal(snapshotById(metadata, second)!.parentSnapshotId, first);
    assert.deepEqual(describePlan(await scan()), ['a.parquet@1', 'b.parquet@2']);
    // A current base is used as it is, not read again: a mark made in memory only is seen.
    const current = await load();
    const marked = { ...current, metadata: { ...current.metadata, properties: { ...current.metadata.properties, 'test.mark': 'in memory' } } };
    let mark: string | undefined;
    await commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('c.parquet', 2, 3)], base: marked, validate: (m) => void (mark = m.properties['test.mark']) });
    assert.equal(mark, 'in memory');
  });

  it('gives up after commit.retry.num-retries, leaving no files behind', async () => {
    t.remove();
    t = await createTestTable({ properties: { 'commit.retry.num-retries': '0' } });
    const { validate } = bothLoadTheSameVersion();
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

describe('manifest merging on commit', () => {
  let merging: TestTable;
  let plain: TestTable;
  beforeEach(async () => {
    merging = await createTestTable({ properties: { 'commit.manifest.min-count-to-merge': '3' } });
    plain = await createTestTable({ properties: { 'commit.manifest-merge.enabled': 'false' } });
  });
  afterEach(() => {
    merging.remove();
    plain.remove();
  });

  const loadOf = (t: TestTable) => t.catalog.loadTable(DB, TABLE);
  const scan = async (t: TestTable, snapshotId?: bigint) => planScan(await loadOf(t), { snapshotId });
  const currentList = async (t: TestTable) => readManifestList(currentSnapshot((await loadOf(t)).metadata)!.manifestList);
  /** Snapshot id → place in the table's history from 1: what compares across tables, whose ids differ. */
  const placesOf = (metadata: TableMetadata) => new Map(metadata.snapshots.map((s, i) => [s.snapshotId, i + 1]));

  /**
   * Each live entry of a snapshot as "name content seq/file-seq by s<place>", sorted.
   */
  async function liveEntries(t: TestTable, snapshotId: bigint): Promise<string[]> {
    const { metadata } = await loadOf(t);
    const place = placesOf(metadata);
    const out: string[] = [];
    for (const m of await readManifestList(snapshotById(metadata, snapshotId)!.manifestList)) {
      for (const e of (await readManifest(m)).entries) {
        if (e.status !== ManifestEntryStatus.DELETED) out.push(`${path.basename(e.dataFile.filePath)} ${e.dataFile.content} ${e.sequenceNumber}/${e.fileSequenceNumber} by s${place.get(e.snapshotId)}`);
      }
    }
    return out.sort();
  }

  /** The merged manifest of the current snapshot: written by it, listing entries of earlier ones. */
  async function mergedManifest(t: TestTable, content: ManifestContent) {
    const { metadata } = await loadOf(t);
    const current = metadata.currentSnapshotId!;
    const merged = (await currentList(t)).filter((m) => m.content === content && m.addedSnapshotId === current && m.existingFilesCount > 0);
    assert.equal(merged.length, 1);
    const place = placesOf(metadata);
    const { entries } = await decodeManifest(fs.readFileSync(merged[0].manifestPath));
    return {
      listed: merged[0],
      entries: entries.map((e) => [path.basename(e.dataFile.filePath), e.status, e.snapshotId === null ? null : `s${place.get(e.snapshotId)}`, e.sequenceNumber, e.fileSequenceNumber]),
    };
  }

  it('bounds the manifest list without changing what any snapshot holds', async () => {
    const steps: ((t: TestTable) => Promise<bigint>)[] = [
      (t) => commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('d1', 0, 5), t.data('d2', 1, 5)] }),
      (t) => commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('d3', 0, 4)] }),
      (t) => commitRowDelta(t.catalog, DB, TABLE, { dataFiles: [t.data('d4', 0, 3)], deleteFiles: [t.equalityDeletes('e1', 0, 1), t.positionDeletes('p1', 0, 1, t.data('d3', 0, 4))] }),
      (t) => commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('d5', 1, 2)] }),
      (t) => commitRowDelta(t.catalog, DB, TABLE, { dataFiles: [], deleteFiles: [t.equalityDeletes('e2', 1, 1)] }),
      (t) => commitRowDelta(t.catalog, DB, TABLE, { dataFiles: [t.data('d6', 1, 6)], deleteFiles: [t.equalityDeletes('e3', 0, 1)] }),
      (t) => commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('d7', 0, 7)] }),
      // Compaction of bucket 0 as of snapshot 6; its result takes that sequence number.
      (t) =>
        commitRewrite(t.catalog, DB, TABLE, {
          removed: [t.data('d1', 0, 5), t.data('d4', 0, 3), t.equalityDeletes('e1', 0, 1)],
          added: [t.data('c1', 0, 7)],
          startingSequenceNumber: 6n,
        }),
      (t) => commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('d8', 1, 8)] }),
      (t) => commitAppend(t.catalog, DB, TABLE, { dataFiles: [t.data('d9', 0, 9)] }),
    ];
    for (let i = 10; i < 20; i++) {
      steps.push((t) => commitRowDelta(t.catalog, DB, TABLE, { dataFiles: [t.data(`d${i}`, i % 2, 1)], deleteFiles: [t.equalityDeletes(`e${i}`, (i + 1) % 2, 1)] }));
    }
    for (const [i, step] of steps.entries()) {
      await step(merging);
      await step(plain);
      // Each group of (content, spec) is merged when it reaches 3: at most 2 of each stay.
      assert.ok((await currentList(merging)).length <= 4, `manifest list of commit ${i + 1}`);
      assert.deepEqual(await unreferencedMetadataFiles(merging), [], `files left by commit ${i + 1}`);

      if (i + 1 === 3) {
        // Data manifests of s1, s2 and s3 became one, s3's d4 still ADDED; equality delete e1 of s3 reaches older data only.
        assert.deepEqual(describePlan(await scan(merging)), ['d1@1 e1', 'd2@1', 'd3@2 p1 e1', 'd4@3']);
        const { listed, entries } = await mergedManifest(merging, ManifestContent.DATA);
        assert.deepEqual(entries, [
          ['d4', ManifestEntryStatus.ADDED, null, null, null],
          ['d3', ManifestEntryStatus.EXISTING, 's2', 2n, 2n],
          ['d1', ManifestEntryStatus.EXISTING, 's1', 1n, 1n],
          ['d2', ManifestEntryStatus.EXISTING, 's1', 1n, 1n],
        ]);
        assert.deepEqual(
          [listed.addedFilesCount, listed.addedRowsCount, listed.existingFilesCount, listed.existingRowsCount, listed.deletedFilesCount, listed.deletedRowsCount],
          [1, 3n, 3, 14n, 0, 0n],
        );
        assert.deepEqual([listed.sequenceNumber, listed.minSequenceNumber], [3n, 1n]);
        assert.deepEqual(listed.partitions?.map((p) => [p.containsNull, fromSingleValue('int', p.lowerBound!), fromSingleValue('int', p.upperBound!)]), [[false, 0, 1]]);
      }
      if (i + 1 === 8) {
        // The rewrite's own list reached 3 data manifests: its DELETED entries stay in the merged manifest.
        assert.deepEqual((await mergedManifest(merging, ManifestContent.DATA)).entries, [
          ['c1', ManifestEntryStatus.ADDED, null, 6n, null],
          ['d6', ManifestEntryStatus.EXISTING, 's6', 6n, 6n],
          ['d5', ManifestEntryStatus.EXISTING, 's4', 4n, 4n],
          ['d4', ManifestEntryStatus.DELETED, 's8', 3n, 3n],
          ['d3', ManifestEntryStatus.EXISTING, 's2', 2n, 2n],
          ['d1', ManifestEntryStatus.DELETED, 's8', 1n, 1n],
          ['d2', ManifestEntryStatus.EXISTING, 's1', 1n, 1n],
          ['d7', ManifestEntryStatus.EXISTING, 's7', 7n, 7n],
        ]);
        // e3 (sequence number 6) reaches d3 but not c1, which holds what the compaction read at 6.
        assert.deepEqual(describePlan(await scan(merging)), ['c1@6', 'd2@1 e2', 'd3@2 p1 e3', 'd5@4 e2', 'd6@6', 'd7@7']);
      }
      if (i + 1 === 10) {
        // Merged again: the rewrite's deletes are gone, its c1 is EXISTING with its data sequence number kept.
        assert.deepEqual((await mergedManifest(merging, ManifestContent.DATA)).entries, [
          ['d9', ManifestEntryStatus.ADDED, null, null, null],
          ['d8', ManifestEntryStatus.EXISTING, 's9', 9n, 9n],
          ['c1', ManifestEntryStatus.EXISTING, 's8', 6n, 8n],
          ['d6', ManifestEntryStatus.EXISTING, 's6', 6n, 6n],
          ['d5', ManifestEntryStatus.EXISTING, 's4', 4n, 4n],
          ['d3', ManifestEntryStatus.EXISTING, 's2', 2n, 2n],
          ['d2', ManifestEntryStatus.EXISTING, 's1', 1n, 1n],
          ['d7', ManifestEntryStatus.EXISTING, 's7', 7n, 7n],
        ]);
      }
    }
    assert.ok((await currentList(plain)).length > 20, 'without merging the list grows by commit');

    const [a, b] = [(await loadOf(merging)).metadata, (await loadOf(plain)).metadata];
    assert.equal(a.snapshots.length, steps.length);
    for (const [i, s] of a.snapshots.entries()) {
      const other = b.snapshots[i];
      assert.deepEqual(describePlan(await scan(merging, s.snapshotId)), describePlan(await scan(plain, other.snapshotId)), `plan of snapshot ${i + 1}`);
      assert.deepEqual(await liveEntries(merging, s.snapshotId), await liveEntries(plain, other.snapshotId), `entries of snapshot ${i + 1}`);
      assert.deepEqual(s.summary, other.summary, `summary of snapshot ${i + 1}`);
    }
  });

  it('deletes the merged manifests of a lost attempt and merges again on the new parent', async () => {
    merging.remove();
    merging = await createTestTable({ properties: { 'commit.manifest.min-count-to-merge': '2' } });
    await commitAppend(merging.catalog, DB, TABLE, { dataFiles: [merging.data('first', 0, 1)] });
    // Both writers load the same version, and each attempt merges its manifest with the parent's.
    const { validate, arrivals } = bothLoadTheSameVersion();
    await Promise.all([
      commitAppend(merging.catalog, DB, TABLE, { dataFiles: [merging.data('a', 0, 1)], validate }),
      commitAppend(merging.catalog, DB, TABLE, { dataFiles: [merging.data('b', 1, 1)], validate }),
    ]);
    assert.equal(arrivals(), 3, 'one writer retried');
    const plan = describePlan(await scan(merging));
    assert.deepEqual(plan.map((d) => d.split('@')[0]), ['a', 'b', 'first']);
    assert.deepEqual(plan.map((d) => d.split('@')[1]).sort(), ['1', '2', '3']);
    const list = await currentList(merging);
    assert.equal(list.length, 1);
    assert.equal(list[0].existingFilesCount, 2);
    assert.deepEqual(await unreferencedMetadataFiles(merging), []);
    // first's manifest and list, each winner's merged manifest and list.
    assert.equal(metadataFiles(merging).length, 6);
  });

  it('leaves nothing behind when a merging commit gives up', async () => {
    merging.remove();
    merging = await createTestTable({ properties: { 'commit.manifest.min-count-to-merge': '2', 'commit.retry.num-retries': '0' } });
    await commitAppend(merging.catalog, DB, TABLE, { dataFiles: [merging.data('first', 0, 1)] });
    const { validate } = bothLoadTheSameVersion();
    const results = await Promise.allSettled([
      commitAppend(merging.catalog, DB, TABLE, { dataFiles: [merging.data('a', 0, 1)], validate }),
      commitAppend(merging.catalog, DB, TABLE, { dataFiles: [merging.data('b', 1, 1)], validate }),
    ]);
    assert.deepEqual(results.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
    assert.deepEqual(await unreferencedMetadataFiles(merging), []);
    assert.equal(metadataFiles(merging).length, 4);
  });

  it('names an invalid merge property and writes nothing', async () => {
    for (const [key, value] of [
      ['commit.manifest-merge.enabled', 'sometimes'],
      ['commit.manifest.min-count-to-merge', 'many'],
      ['commit.manifest.target-size-bytes', '-8'],
    ]) {
      const base = await loadOf(merging);
      await merging.catalog.commit(DB, TABLE, base.version, { ...base.metadata, properties: { ...base.metadata.properties, [key]: value } });
      await assertRejects(commitAppend(merging.catalog, DB, TABLE, { dataFiles: [merging.data('a', 0, 1)] }), 'INVALID_CONFIG_EXCEPTION', new RegExp(`${key}.*'${value}'`));
      assert.deepEqual(metadataFiles(merging), []);
      const fixed = await loadOf(merging);
      const { [key]: _, ...properties } = fixed.metadata.properties;
      await merging.catalog.commit(DB, TABLE, fixed.version, { ...fixed.metadata, properties });
    }
  });
});
