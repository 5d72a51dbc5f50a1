import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeAvroFile } from './avro.js';
import { type DataFile, FileContent, ManifestContent, type ManifestEntry, ManifestEntryStatus, type PartitionFieldType } from './data-file.js';
import { type Manifest, decodeManifest, encodeManifest } from './manifest.js';
import type { IcebergSchema } from './types.js';

const SCHEMA: IcebergSchema = {
  type: 'struct',
  'schema-id': 1,
  'identifier-field-ids': [1],
  fields: [
    { id: 1, name: 'id', required: true, type: 'long' },
    { id: 2, name: 'name', required: false, type: 'string' },
    { id: 3, name: '__bucket', required: true, type: 'int' },
  ],
};

/** One partition field of every result type, with a value for it; decimal(9,2) twice, since Avro names its fixed type once. */
const EVERY_TYPE: [PartitionFieldType, Exclude<DataFile['partition'][number], null>][] = [
  [{ fieldId: 1000, name: 'p_int', type: 'int' }, -7],
  [{ fieldId: 1001, name: 'p_long', type: 'long' }, 2n ** 60n + 3n],
  [{ fieldId: 1002, name: 'p_string', type: 'string' }, 'zürich'],
  [{ fieldId: 1003, name: 'p_boolean', type: 'boolean' }, true],
  [{ fieldId: 1004, name: 'p_float', type: 'float' }, 1.5],
  [{ fieldId: 1005, name: 'p_double', type: 'double' }, -0.1],
  [{ fieldId: 1006, name: 'p_binary', type: 'binary' }, Uint8Array.of(0, 1, 255)],
  [{ fieldId: 1007, name: 'p_fixed', type: 'fixed[4]' }, Uint8Array.of(9, 8, 7, 6)],
  [{ fieldId: 1008, name: 'p_date', type: 'date' }, 19_723],
  [{ fieldId: 1009, name: 'p_timestamp', type: 'timestamp' }, -1n],
  [{ fieldId: 1010, name: 'p_timestamptz', type: 'timestamptz' }, 1_700_000_000_123_456n],
  [{ fieldId: 1011, name: 'p_time', type: 'time' }, 86_399_999_999n],
  [{ fieldId: 1012, name: 'p_uuid', type: 'uuid' }, Uint8Array.from({ length: 16 }, (_, i) => i * 16)],
  [{ fieldId: 1013, name: 'p_decimal', type: 'decimal(9,2)' }, -12_345n],
  [{ fieldId: 1014, name: 'p_decimal_again', type: 'decimal(9,2)' }, 999_999_999n],
  [{ fieldId: 1015, name: 'p_decimal38', type: 'decimal(38,10)' }, -(10n ** 38n - 1n)],
];

const PARTITION_TYPE = EVERY_TYPE.map(([field]) => field);

const fullFile: DataFile = {
  content: FileContent.DATA,
  filePath: 'file:///warehouse/db/t/data/00000-full.parquet',
  fileFormat: 'PARQUET',
  partition: EVERY_TYPE.map(([, value]) => value),
  recordCount: 123_456,
  fileSizeInBytes: 9_876_543,
  columnSizes: new Map([
    [1, 100],
    [2, 2 ** 40],
  ]),
  valueCounts: new Map([
    [1, 123_456],
    [2, 123_456],
  ]),
  nullValueCounts: new Map([
    [1, 0],
    [2, 17],
  ]),
  nanValueCounts: new Map(),
  lowerBounds: new Map([
    [1, Uint8Array.of(1, 0, 0, 0, 0, 0, 0, 0)],
    [2, new TextEncoder().encode('a')],
  ]),
  upperBounds: new Map([[1, Uint8Array.of(255, 255, 0, 0, 0, 0, 0, 0)]]),
  splitOffsets: [4, 1_048_580, 2 ** 33],
  sortOrderId: 1,
};

const bareFile: DataFile = {
  content: FileContent.DATA,
  filePath: 'file:///warehouse/db/t/data/00001-bare.parquet',
  fileFormat: 'PARQUET',
  partition: EVERY_TYPE.map(() => null),
  recordCount: 0,
  fileSizeInBytes: 4,
};

function manifest(over: Partial<Manifest>): Manifest {
  return {
    schema: SCHEMA,
    specId: 2,
    partitionSpec: { 'spec-id': 2, fields: [{ 'source-id': 3, 'field-id': 1000, name: '__bucket', transform: 'identity' }] },
    partitionType: PARTITION_TYPE,
    content: ManifestContent.DATA,
    entries: [],
    ...over,
  };
}

async function rejectsWith(promise: Promise<unknown>, errorName: string): Promise<void> {
  await assert.rejects(promise, (err: Error & { errorName?: string }) => {
    assert.equal(err.errorName, errorName, err.message);
    return true;
  });
}

describe('manifest files', () => {
  it('round-trips every field, every partition type, null inherited values and empty maps', async () => {
    const entries: ManifestEntry[] = [
      { status: ManifestEntryStatus.ADDED, snapshotId: null, sequenceNumber: null, fileSequenceNumber: null, dataFile: fullFile },
      { status: ManifestEntryStatus.EXISTING, snapshotId: 2n ** 62n + 5n, sequenceNumber: 41n, fileSequenceNumber: 42n, dataFile: bareFile },
      { status: ManifestEntryStatus.DELETED, snapshotId: -(2n ** 63n), sequenceNumber: 2n ** 63n - 1n, fileSequenceNumber: 0n, dataFile: fullFile },
    ];
    const m = manifest({ entries });
    const back = await decodeManifest(await encodeManifest(m));
    assert.deepEqual(back.entries, entries);
    assert.deepEqual(back.partitionType, PARTITION_TYPE);
    assert.deepEqual(back.metadata, {
      schema: JSON.stringify(SCHEMA),
      'schema-id': '1',
      'partition-spec': JSON.stringify([{ 'source-id': 3, 'field-id': 1000, name: '__bucket', transform: 'identity' }]),
      'partition-spec-id': '2',
      'format-version': '2',
      content: 'data',
    });
  });

  it('writes each partition result type as the Avro type the spec names', async () => {
    const { schema } = await decodeAvroFile(await encodeManifest(manifest({})));
    const dataFile = (schema as any).fields.find((f: any) => f.name === 'data_file').type;
    const partition = dataFile.fields.find((f: any) => f.name === 'partition').type;
    assert.equal(partition.name, 'r102');
    assert.deepEqual(
      partition.fields.map((f: any) => [f['field-id'], f.type[0], f.type[1]]),
      [
        [1000, 'null', 'int'],
        [1001, 'null', 'long'],
        [1002, 'null', 'string'],
        [1003, 'null', 'boolean'],
        [1004, 'null', 'float'],
        [1005, 'null', 'double'],
        [1006, 'null', 'bytes'],
        [1007, 'null', { type: 'fixed', name: 'fixed_4', size: 4 }],
        [1008, 'null', { type: 'int', logicalType: 'date' }],
        [1009, 'null', { type: 'long', logicalType: 'timestamp-micros', 'adjust-to-utc': false }],
        [1010, 'null', { type: 'long', logicalType: 'timestamp-micros', 'adjust-to-utc': true }],
        [1011, 'null', { type: 'long', logicalType: 'time-micros' }],
        [1012, 'null', { type: 'fixed', name: 'uuid_fixed', size: 16, logicalType: 'uuid' }],
        [1013, 'null', { type: 'fixed', name: 'decimal_9_2', size: 4, logicalType: 'decimal', precision: 9, scale: 2 }],
        [1014, 'null', 'decimal_9_2'],
        [1015, 'null', { type: 'fixed', name: 'decimal_38_10', size: 16, logicalType: 'decimal', precision: 38, scale: 10 }],
      ],
    );
  });

  it('round-trips a delete manifest with equality and position delete files', async () => {
    const partitionType: PartitionFieldType[] = [{ fieldId: 1000, name: '__bucket', type: 'int' }];
    const entries: ManifestEntry[] = [
      {
        status: ManifestEntryStatus.ADDED,
        snapshotId: null,
        sequenceNumber: null,
        fileSequenceNumber: null,
        dataFile: { ...bareFile, content: FileContent.EQUALITY_DELETES, partition: [3], equalityIds: [1, 2] },
      },
      {
        status: ManifestEntryStatus.ADDED,
        snapshotId: null,
        sequenceNumber: null,
        fileSequenceNumber: null,
        dataFile: { ...bareFile, content: FileContent.POSITION_DELETES, partition: [3], equalityIds: [] },
      },
    ];
    const back = await decodeManifest(await encodeManifest(manifest({ partitionType, content: ManifestContent.DELETES, entries })));
    assert.deepEqual(back.entries, entries);
    assert.equal(back.metadata.content, 'deletes');
  });

  it('round-trips an unpartitioned manifest and one without entries', async () => {
    const unpartitioned = manifest({
      partitionSpec: [],
      partitionType: [],
      entries: [{ status: ManifestEntryStatus.ADDED, snapshotId: 1n, sequenceNumber: null, fileSequenceNumber: null, dataFile: { ...bareFile, partition: [] } }],
    });
    const back = await decodeManifest(await encodeManifest(unpartitioned));
    assert.deepEqual(back.entries, unpartitioned.entries);
    assert.deepEqual(back.partitionType, []);
    assert.equal(back.metadata['partition-spec'], '[]');

    const empty = await decodeManifest(await encodeManifest(manifest({ entries: [] })));
    assert.deepEqual(empty.entries, []);
    assert.deepEqual(empty.partitionType, PARTITION_TYPE);
  });

  it('rejects entries that do not fit the manifest with INVALID_ARGUMENT', async () => {
    const entry = (dataFile: DataFile): ManifestEntry => ({ status: ManifestEntryStatus.ADDED, snapshotId: 1n, sequenceNumber: null, fileSequenceNumber: null, dataFile });
    const oneInt: PartitionFieldType[] = [{ fieldId: 1000, name: 'b', type: 'int' }];
    await rejectsWith(encodeManifest(manifest({ content: ManifestContent.DELETES, entries: [entry(fullFile)] })), 'INVALID_ARGUMENT');
    await rejectsWith(encodeManifest(manifest({ entries: [entry({ ...bareFile, content: FileContent.EQUALITY_DELETES })] })), 'INVALID_ARGUMENT');
    await rejectsWith(encodeManifest(manifest({ partitionType: oneInt, entries: [entry({ ...bareFile, partition: [1, 2] })] })), 'INVALID_ARGUMENT');
    await rejectsWith(encodeManifest(manifest({ partitionType: oneInt, entries: [entry({ ...bareFile, partition: ['one'] })] })), 'INVALID_ARGUMENT');
    const decimal: PartitionFieldType[] = [{ fieldId: 1000, name: 'd', type: 'decimal(9,2)' }];
    await rejectsWith(encodeManifest(manifest({ partitionType: decimal, entries: [entry({ ...bareFile, partition: [2n ** 31n] })] })), 'INVALID_ARGUMENT');
    await rejectsWith(encodeManifest(manifest({ partitionType: [{ fieldId: 1000, name: 'l', type: 'list<int>' }] })), 'INVALID_ARGUMENT');
    await rejectsWith(encodeManifest(manifest({ partitionSpec: { 'spec-id': 2 } })), 'INVALID_ARGUMENT');
  });
});
