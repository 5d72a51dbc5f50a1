import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import { type DataFile, FileContent, ManifestContent, type ManifestEntry, ManifestEntryStatus, type ManifestFile } from './data-file.js';
import { binsToMerge, type ManifestMergePolicy, manifestMergePolicy, mergedEntries } from './manifest-merge.js';

/** A manifest-list entry named `name` of `length` bytes. */
function manifest(name: string, length: number, content = ManifestContent.DATA, partitionSpecId = 0): ManifestFile {
  return {
    manifestPath: name,
    manifestLength: length,
    partitionSpecId,
    content,
    sequenceNumber: 4n,
    minSequenceNumber: 4n,
    addedSnapshotId: 40n,
    addedFilesCount: 1,
    existingFilesCount: 0,
    deletedFilesCount: 0,
    addedRowsCount: 1n,
    existingRowsCount: 0n,
    deletedRowsCount: 0n,
  };
}

const names = (bins: ManifestFile[][]) => bins.map((bin) => bin.map((m) => m.manifestPath));
const policy = (minCountToMerge: number, targetSizeBytes: number): ManifestMergePolicy => ({ enabled: true, minCountToMerge, targetSizeBytes });

describe('manifestMergePolicy', () => {
  it("has Iceberg's defaults and reads the table properties", () => {
    assert.deepEqual(manifestMergePolicy({}, 'db.t'), { enabled: true, minCountToMerge: 100, targetSizeBytes: 8_388_608 });
    assert.deepEqual(
      manifestMergePolicy(
        { 'commit.manifest-merge.enabled': 'FALSE', 'commit.manifest.min-count-to-merge': '3', 'commit.manifest.target-size-bytes': '1024' },
        'db.t',
      ),
      { enabled: false, minCountToMerge: 3, targetSizeBytes: 1024 },
    );
  });

  it('names a malformed property', () => {
    for (const [key, value] of [
      ['commit.manifest-merge.enabled', 'yes'],
      ['commit.manifest.min-count-to-merge', '-1'],
      ['commit.manifest.min-count-to-merge', '2.5'],
      ['commit.manifest.target-size-bytes', '0'],
      ['commit.manifest.target-size-bytes', '8MB'],
    ]) {
      assert.throws(
        () => manifestMergePolicy({ [key]: value }, 'db.t'),
        (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_CONFIG_EXCEPTION' && err.message.includes(key) && err.message.includes('db.t'),
        `${key}=${value}`,
      );
    }
  });
});

describe('binsToMerge', () => {
  it('packs a group newest first from its oldest manifest on, and leaves bins of one manifest alone', () => {
    // Newest first, as a manifest list holds them. From the oldest: [f e] 90, [d] 60 (c would pass
    // 100), [c b] 80, [a] 30 the remainder; d alone and a alone stay as they are.
    const list = [manifest('a', 30), manifest('b', 30), manifest('c', 50), manifest('d', 60), manifest('e', 40), manifest('f', 50)];
    assert.deepEqual(names(binsToMerge(list, policy(3, 100))), [
      ['b', 'c'],
      ['e', 'f'],
    ]);
    // A manifest past the target size is a bin of its own.
    assert.deepEqual(names(binsToMerge([manifest('a', 5), manifest('big', 500), manifest('c', 5), manifest('d', 5)], policy(2, 100))), [['c', 'd']]);
    assert.deepEqual(names(binsToMerge(list, policy(3, 1000))), [['a', 'b', 'c', 'd', 'e', 'f']]);
  });

  it('merges only groups of (content, spec id) with at least min-count-to-merge manifests, and nothing when disabled', () => {
    const list = [
      manifest('d1', 1),
      manifest('x1', 1, ManifestContent.DELETES),
      manifest('s1', 1, ManifestContent.DATA, 1),
      manifest('d2', 1),
      manifest('x2', 1, ManifestContent.DELETES),
      manifest('d3', 1),
    ];
    assert.deepEqual(names(binsToMerge(list, policy(3, 100))), [['d1', 'd2', 'd3']]);
    assert.deepEqual(names(binsToMerge(list, policy(2, 100))), [
      ['d1', 'd2', 'd3'],
      ['x1', 'x2'],
    ]);
    assert.deepEqual(names(binsToMerge(list, { ...policy(2, 100), enabled: false })), []);
    assert.deepEqual(names(binsToMerge(list, policy(4, 100))), []);
  });
});

describe('mergedEntries', () => {
  const file = (name: string): DataFile => ({ content: FileContent.DATA, filePath: name, fileFormat: 'PARQUET', partition: [0], recordCount: 1, fileSizeInBytes: 10 });
  const entry = (name: string, status: ManifestEntryStatus, snapshotId: bigint | null, sequenceNumber: bigint | null, fileSequenceNumber: bigint | null): ManifestEntry => ({
    status,
    snapshotId,
    sequenceNumber,
    fileSequenceNumber,
    dataFile: file(name),
  });
  const rows = (entries: ManifestEntry[]) => entries.map((e) => [e.dataFile.filePath, e.status, e.snapshotId, e.sequenceNumber, e.fileSequenceNumber]);

  it("keeps this commit's entries as written, makes older live ones EXISTING with explicit values, and drops older deletes", () => {
    const THIS = 90n;
    // A manifest of snapshot 40 (sequence number 4): inherited and explicit values.
    const older = manifest('older', 100);
    assert.deepEqual(
      rows(
        mergedEntries(
          older,
          [
            entry('added-inherits', ManifestEntryStatus.ADDED, null, null, null),
            entry('added-explicit-data-seq', ManifestEntryStatus.ADDED, null, 2n, null),
            entry('existing', ManifestEntryStatus.EXISTING, 10n, 1n, 1n),
            entry('deleted-before', ManifestEntryStatus.DELETED, 40n, 3n, 3n),
          ],
          THIS,
        ),
      ),
      [
        ['added-inherits', ManifestEntryStatus.EXISTING, 40n, 4n, 4n],
        ['added-explicit-data-seq', ManifestEntryStatus.EXISTING, 40n, 2n, 4n],
        ['existing', ManifestEntryStatus.EXISTING, 10n, 1n, 1n],
      ],
    );
    // Manifests of this commit: its added files (one with a rewrite's data sequence number) and a rewritten manifest.
    const ours = { ...manifest('ours', 100), addedSnapshotId: THIS, sequenceNumber: 9n };
    const written = [
      entry('added', ManifestEntryStatus.ADDED, null, null, null),
      entry('compacted', ManifestEntryStatus.ADDED, null, 6n, null),
      entry('removed-now', ManifestEntryStatus.DELETED, THIS, 2n, 2n),
      entry('kept', ManifestEntryStatus.EXISTING, 10n, 1n, 1n),
    ];
    assert.deepEqual(rows(mergedEntries(ours, written, THIS)), [
      ['added', ManifestEntryStatus.ADDED, null, null, null],
      ['compacted', ManifestEntryStatus.ADDED, null, 6n, null],
      ['removed-now', ManifestEntryStatus.DELETED, THIS, 2n, 2n],
      ['kept', ManifestEntryStatus.EXISTING, 10n, 1n, 1n],
    ]);
  });
});
