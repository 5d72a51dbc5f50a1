import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeAvroFile } from './avro.js';
import { ManifestContent, type ManifestFile } from './data-file.js';
import { decodeManifestList, encodeManifestList } from './manifest-list.js';

const dataManifest: ManifestFile = {
  manifestPath: 'file:///warehouse/db/t/metadata/0-m0.avro',
  manifestLength: 7_000,
  partitionSpecId: 0,
  content: ManifestContent.DATA,
  sequenceNumber: 12n,
  minSequenceNumber: 3n,
  addedSnapshotId: 2n ** 60n + 99n,
  addedFilesCount: 4,
  existingFilesCount: 10,
  deletedFilesCount: 0,
  addedRowsCount: 2n ** 55n,
  existingRowsCount: 1_000n,
  deletedRowsCount: 0n,
  partitions: [
    { containsNull: false, containsNan: false, lowerBound: Uint8Array.of(0, 0, 0, 0), upperBound: Uint8Array.of(15, 0, 0, 0) },
    { containsNull: true },
    { containsNull: true, containsNan: true, lowerBound: new Uint8Array(0) },
  ],
};

const deleteManifest: ManifestFile = {
  manifestPath: 'file:///warehouse/db/t/metadata/0-m1.avro',
  manifestLength: 2 ** 33,
  partitionSpecId: 3,
  content: ManifestContent.DELETES,
  sequenceNumber: 2n ** 63n - 1n,
  minSequenceNumber: 0n,
  addedSnapshotId: -(2n ** 63n),
  addedFilesCount: 0,
  existingFilesCount: 0,
  deletedFilesCount: 2_000_000_000,
  addedRowsCount: 0n,
  existingRowsCount: 0n,
  deletedRowsCount: 2n ** 62n,
};

describe('manifest lists', () => {
  it('round-trips every field, with and without partition summaries', async () => {
    const manifests = [dataManifest, deleteManifest, { ...dataManifest, partitions: [] }];
    const bytes = await encodeManifestList({ snapshotId: 2n ** 60n + 99n, parentSnapshotId: 2n ** 60n + 98n, sequenceNumber: 12n, manifests });
    assert.deepEqual(await decodeManifestList(bytes), manifests);
    assert.deepEqual((await decodeAvroFile(bytes)).metadata, {
      'snapshot-id': String(2n ** 60n + 99n),
      'parent-snapshot-id': String(2n ** 60n + 98n),
      'sequence-number': '12',
      'format-version': '2',
    });
  });

  it('writes "null" for a snapshot without a parent and round-trips an empty list', async () => {
    const bytes = await encodeManifestList({ snapshotId: 1n, parentSnapshotId: null, sequenceNumber: 1n, manifests: [] });
    assert.deepEqual(await decodeManifestList(bytes), []);
    assert.equal((await decodeAvroFile(bytes)).metadata['parent-snapshot-id'], 'null');
  });

  it('rejects a manifest file with a missing count with INVALID_ARGUMENT', async () => {
    const broken = { ...deleteManifest, addedFilesCount: undefined } as unknown as ManifestFile;
    await assert.rejects(
      encodeManifestList({ snapshotId: 1n, parentSnapshotId: null, sequenceNumber: 1n, manifests: [broken] }),
      (err: Error & { errorName?: string }) => err.errorName === 'INVALID_ARGUMENT',
    );
  });
});
