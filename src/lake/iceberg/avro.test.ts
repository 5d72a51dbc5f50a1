import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import avro from 'avsc';
import { type AvroFile, type AvroSchema, decodeAvroFile, encodeAvroFile } from './avro.js';
import { FileContent, ManifestContent, ManifestEntryStatus } from './data-file.js';
import { encodeManifestList } from './manifest-list.js';
import { encodeManifest } from './manifest.js';

/**
 * A second, minimal reading of the container format straight from the Avro spec, so the files are
 * checked by something other than the code that wrote them.
 */
class RawReader {
  pos = 0;
  constructor(readonly buf: Uint8Array) {}

  long(): bigint {
    let raw = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const b = this.buf[this.pos++];
      if (b === undefined) throw new Error('varint past the end');
      raw |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) break;
    }
    return (raw >> 1n) ^ -(raw & 1n); // zig-zag
  }
  int(): number {
    return Number(this.long());
  }
  fixed(n: number): Uint8Array {
    if (this.pos + n > this.buf.length) throw new Error('bytes past the end');
    return this.buf.subarray(this.pos, (this.pos += n));
  }
  bytes(): Uint8Array {
    return this.fixed(this.int());
  }
  string(): string {
    return new TextDecoder().decode(this.bytes());
  }
}

function readContainer(bytes: Uint8Array): { meta: Map<string, string>; sync: Uint8Array; headerEnd: number; blocks: { count: number; data: Uint8Array }[] } {
  const r = new RawReader(bytes);
  assert.deepEqual([...r.fixed(4)], [0x4f, 0x62, 0x6a, 0x01], "magic 'Obj' 1");
  const meta = new Map<string, string>();
  for (let count = r.int(); count !== 0; count = r.int()) {
    if (count < 0) {
      count = -count;
      r.long(); // byte size of the block
    }
    for (let i = 0; i < count; i++) meta.set(r.string(), r.string());
  }
  const sync = r.fixed(16);
  const headerEnd = r.pos;
  const blocks: { count: number; data: Uint8Array }[] = [];
  while (r.pos < bytes.length) {
    const count = r.int();
    const data = r.bytes();
    assert.deepEqual(r.fixed(16), sync, 'sync marker after each block');
    blocks.push({ count, data: meta.get('avro.codec') === 'deflate' ? inflateRawSync(data) : data });
  }
  return { meta, sync, headerEnd, blocks };
}

type Json = { [key: string]: any };
const fieldNamed = (record: Json, name: string): Json => record.fields.find((f: Json) => f.name === name);
const fieldIds = (record: Json): number[] => record.fields.map((f: Json) => f['field-id']);
const nonNull = (type: Json | string | Json[]): Json => (Array.isArray(type) ? type.find((t) => t !== 'null') : type) as Json;

const PEOPLE: AvroSchema = {
  type: 'record',
  name: 'person',
  fields: [
    { name: 'id', type: 'long', 'field-id': 1 },
    { name: 'name', type: 'string', 'field-id': 2 },
    { name: 'photo', type: ['null', 'bytes'], default: null, 'field-id': 3 },
  ],
};

const readAll = async (bytes: Uint8Array) => [...(await decodeAvroFile(bytes)).records];

async function rejectsWith(promise: Promise<unknown>, errorName: string): Promise<void> {
  await assert.rejects(promise, (err: Error & { errorName?: string }) => {
    assert.equal(err.errorName, errorName, err.message);
    return true;
  });
}

describe('Avro object container files', () => {
  it('writes what the Avro spec describes: magic, header map, sync marker, deflated blocks', async () => {
    const ids = [2n ** 60n + 7n, -1n, 0n, 2n ** 63n - 1n, -(2n ** 63n)];
    const records = ids.map((id, i) => ({ id, name: `p${i}`, photo: i % 2 ? Buffer.from([i, 255]) : null }));
    const bytes = await encodeAvroFile({ schema: PEOPLE, metadata: { 'format-version': '2', note: 'ünïcode' }, records });

    const file = readContainer(bytes);
    assert.deepEqual([...file.meta.keys()].sort(), ['avro.codec', 'avro.schema', 'format-version', 'note']);
    assert.equal(file.meta.get('avro.codec'), 'deflate');
    assert.equal(file.meta.get('note'), 'ünïcode');
    assert.deepEqual(JSON.parse(file.meta.get('avro.schema')!), PEOPLE, 'the schema is kept verbatim, field ids included');
    assert.deepEqual(
      file.blocks.map((b) => b.count),
      [ids.length],
    );
    const r = new RawReader(file.blocks[0].data);
    for (let i = 0; i < ids.length; i++) {
      assert.equal(r.long(), ids[i]);
      assert.equal(r.string(), `p${i}`);
      const branch = r.int();
      assert.equal(branch, i % 2);
      if (branch === 1) assert.deepEqual([...r.bytes()], [i, 255]);
    }
    assert.equal(r.pos, r.buf.length);
  });

  it('reads back records with bigint longs, the verbatim schema and the metadata', async () => {
    const records = [
      { id: 2n ** 62n, name: 'a', photo: Buffer.from('xyz') },
      { id: -5n, name: '', photo: null },
      { id: -(2 ** 53 - 1), name: 'a number', photo: null },
      { id: 2 ** 40 + 3, name: 'another', photo: null },
    ];
    const file: AvroFile = { schema: PEOPLE, metadata: { k: 'v' }, records };
    const back = await decodeAvroFile(await encodeAvroFile(file));
    assert.deepEqual(back.schema, PEOPLE);
    assert.deepEqual(back.metadata, { k: 'v' });
    const expected = records.map((x) => ({ ...x, id: BigInt(x.id) }));
    assert.deepEqual(
      Array.from(back.records, (x) => ({ ...(x as object) })),
      expected,
    );
    assert.deepEqual(
      Array.from(back.records, (x) => ({ ...(x as object) })),
      expected,
      'the records can be read again',
    );
  });

  it('splits many records into blocks and keeps their order', async () => {
    const records = Array.from({ length: 20_000 }, (_, i) => ({ id: BigInt(i) * 3n ** 30n, name: `person-${i}`, photo: null }));
    const bytes = await encodeAvroFile({ schema: PEOPLE, metadata: {}, records });
    const blocks = readContainer(bytes).blocks;
    assert.ok(blocks.length > 1, `${blocks.length} blocks`);
    assert.equal(
      blocks.reduce((n, b) => n + b.count, 0),
      records.length,
    );
    const back = await decodeAvroFile(bytes);
    assert.deepEqual(
      Array.from(back.records, (x) => (x as { id: bigint }).id),
      records.map((x) => x.id),
    );
  });

  it('gives a record larger than a block a block of its own', async () => {
    const records = [
      { id: 1n, name: 'small', photo: null },
      { id: 2n, name: 'big', photo: Buffer.alloc(200_000, 7) },
      { id: 3n, name: 'small again', photo: null },
    ];
    const bytes = await encodeAvroFile({ schema: PEOPLE, metadata: {}, records });
    assert.deepEqual(
      readContainer(bytes).blocks.map((b) => b.count),
      [1, 1, 1],
    );
    const back = [...(await decodeAvroFile(bytes)).records] as { photo: Buffer | null }[];
    assert.deepEqual(back[1].photo, records[1].photo);
  });

  it('writes a file without records as a header alone', async () => {
    const bytes = await encodeAvroFile({ schema: PEOPLE, metadata: { a: 'b' }, records: [] });
    const file = readContainer(bytes);
    assert.equal(file.headerEnd, bytes.length);
    const back = await decodeAvroFile(bytes);
    assert.deepEqual([back.schema, back.metadata, [...back.records]], [PEOPLE, { a: 'b' }, []]);
  });

  it("is read by avsc's stream decoder as well", async () => {
    const records = [{ id: 42n, name: 'x', photo: null }];
    const bytes = await encodeAvroFile({ schema: PEOPLE, metadata: {}, records });
    const decoder = new avro.streams.BlockDecoder();
    const read: { id: number; name: string }[] = [];
    decoder.on('data', (record) => read.push(record));
    await new Promise((resolve, reject) => decoder.on('end', resolve).on('error', reject).end(Buffer.from(bytes)));
    assert.deepEqual(
      read.map((x) => [x.id, x.name]),
      [[42, 'x']],
    );
  });

  it('rejects a truncated, corrupted or foreign file with STORAGE_EXCEPTION', async () => {
    const records = Array.from({ length: 3 }, (_, i) => ({ id: BigInt(i), name: `n${i}`, photo: null }));
    const bytes = await encodeAvroFile({ schema: PEOPLE, metadata: {}, records });
    const { headerEnd } = readContainer(bytes);
    for (let cut = 0; cut < bytes.length; cut++) {
      // A file cut right after its header is a valid file without records.
      if (cut !== headerEnd) await rejectsWith(readAll(bytes.subarray(0, cut)), 'STORAGE_EXCEPTION');
    }
    const badSync = Uint8Array.from(bytes);
    badSync[bytes.length - 1] ^= 1;
    await rejectsWith(readAll(badSync), 'STORAGE_EXCEPTION');
    const badData = Uint8Array.from(bytes);
    const block = new RawReader(bytes);
    block.pos = headerEnd;
    block.long(); // count
    block.long(); // size
    badData[block.pos] = 0xff; // a deflate block of the reserved type 11
    await rejectsWith(readAll(badData), 'STORAGE_EXCEPTION');
    await rejectsWith(readAll(new TextEncoder().encode('{"not": "avro"}')), 'STORAGE_EXCEPTION');
  });

  it('fails reading a block whose records do not match its count with STORAGE_EXCEPTION', async () => {
    const records = [1n, 2n].map((id) => ({ id, name: 'n', photo: null }));
    const bytes = await encodeAvroFile({ schema: PEOPLE, metadata: {}, records });
    const { headerEnd, sync, blocks } = readContainer(bytes);
    // The same records framed with a wrong count: zig-zag varints of small numbers are one byte, 2n.
    const reframed = (count: number) => {
      const data = deflateRawSync(blocks[0].data);
      return Buffer.concat([bytes.subarray(0, headerEnd), Uint8Array.of(2 * count), Uint8Array.of(2 * data.length), data, sync]);
    };
    assert.equal(reframed(2).length, bytes.length, 'the frame is built as the encoder builds it');
    assert.equal((await readAll(reframed(2))).length, 2);
    await rejectsWith(readAll(reframed(3)), 'STORAGE_EXCEPTION');
    await rejectsWith(readAll(reframed(1)), 'STORAGE_EXCEPTION');
  });

  it('rejects records that do not fit the schema and reserved metadata keys with INVALID_ARGUMENT', async () => {
    await rejectsWith(encodeAvroFile({ schema: PEOPLE, metadata: {}, records: [{ id: 'one', name: 'x', photo: null }] }), 'INVALID_ARGUMENT');
    await rejectsWith(encodeAvroFile({ schema: PEOPLE, metadata: {}, records: [{ id: 2n ** 64n, name: 'x', photo: null }] }), 'INVALID_ARGUMENT');
    await rejectsWith(encodeAvroFile({ schema: PEOPLE, metadata: { 'avro.codec': 'null' }, records: [] }), 'INVALID_ARGUMENT');
  });
});

describe('Iceberg files in the container, read without avsc', () => {
  it('a manifest carries the spec field ids in its header schema and the spec metadata keys', async () => {
    const snapshotId = 2n ** 60n + 12345n;
    const dataFile = (i: number) => ({
      content: FileContent.DATA,
      filePath: `/w/db/t/data/${i}.parquet`,
      fileFormat: 'PARQUET' as const,
      partition: ['eu', i],
      recordCount: 10,
      fileSizeInBytes: 1000,
    });
    const bytes = await encodeManifest({
      schema: { type: 'struct', 'schema-id': 3, fields: [{ id: 1, name: 'region', required: false, type: 'string' }] },
      specId: 7,
      partitionSpec: { 'spec-id': 7, fields: [{ 'source-id': 1, 'field-id': 1000, name: 'region', transform: 'identity' }] },
      partitionType: [
        { fieldId: 1000, name: 'region', type: 'string' },
        { fieldId: 1001, name: '__bucket', type: 'int' },
      ],
      content: ManifestContent.DATA,
      entries: [0, 1, 2].map((i) => ({
        status: ManifestEntryStatus.ADDED,
        snapshotId,
        sequenceNumber: null,
        fileSequenceNumber: null,
        dataFile: dataFile(i),
      })),
    });
    const file = readContainer(bytes);
    assert.deepEqual(
      [...file.meta.keys()].sort(),
      ['avro.codec', 'avro.schema', 'content', 'format-version', 'partition-spec', 'partition-spec-id', 'schema', 'schema-id'],
    );
    assert.equal(file.meta.get('format-version'), '2');
    assert.equal(file.meta.get('content'), 'data');
    assert.equal(file.meta.get('schema-id'), '3');
    assert.equal(file.meta.get('partition-spec-id'), '7');
    assert.deepEqual(JSON.parse(file.meta.get('partition-spec')!), [{ 'source-id': 1, 'field-id': 1000, name: 'region', transform: 'identity' }]);
    assert.equal(JSON.parse(file.meta.get('schema')!)['schema-id'], 3);
    assert.equal(
      file.blocks.reduce((n, b) => n + b.count, 0),
      3,
    );

    const entry = JSON.parse(file.meta.get('avro.schema')!) as Json;
    assert.equal(entry.name, 'manifest_entry');
    assert.deepEqual(fieldIds(entry), [0, 1, 3, 4, 2]);
    const df = fieldNamed(entry, 'data_file').type as Json;
    assert.deepEqual(fieldIds(df), [134, 100, 101, 102, 103, 104, 108, 109, 110, 137, 125, 128, 131, 132, 135, 140]);
    assert.equal(fieldNamed(df, 'file_path')['field-id'], 100);
    const partition = fieldNamed(df, 'partition').type as Json;
    assert.deepEqual(fieldIds(partition), [1000, 1001]);
    assert.deepEqual(
      partition.fields.map((f: Json) => [f.name, f.type, f.default]),
      [
        ['region', ['null', 'string'], null],
        ['__bucket', ['null', 'int'], null],
      ],
    );
    const maps: [string, number, number][] = [
      ['column_sizes', 117, 118],
      ['value_counts', 119, 120],
      ['null_value_counts', 121, 122],
      ['nan_value_counts', 138, 139],
      ['lower_bounds', 126, 127],
      ['upper_bounds', 129, 130],
    ];
    for (const [name, keyId, valueId] of maps) {
      const map = nonNull(fieldNamed(df, name).type);
      assert.equal(map.type, 'array', name);
      assert.equal(map.logicalType, 'map', name);
      assert.deepEqual(fieldIds(map.items), [keyId, valueId], name);
      assert.deepEqual(
        map.items.fields.map((f: Json) => f.name),
        ['key', 'value'],
      );
    }
    assert.equal(nonNull(fieldNamed(df, 'split_offsets').type)['element-id'], 133);
    assert.equal(nonNull(fieldNamed(df, 'equality_ids').type)['element-id'], 136);

    // The first entry, field by field: status, snapshot_id (union branch 1), sequence numbers (null), data_file.
    const r = new RawReader(file.blocks[0].data);
    assert.equal(r.int(), ManifestEntryStatus.ADDED);
    assert.equal(r.int(), 1);
    assert.equal(r.long(), snapshotId);
    assert.equal(r.int(), 0);
    assert.equal(r.int(), 0);
    assert.equal(r.int(), FileContent.DATA);
    assert.equal(r.string(), '/w/db/t/data/0.parquet');
    assert.equal(r.string(), 'PARQUET');
    assert.equal(r.int(), 1);
    assert.equal(r.string(), 'eu');
    assert.equal(r.int(), 1);
    assert.equal(r.int(), 0);
    assert.equal(r.long(), 10n);
    assert.equal(r.long(), 1000n);
  });

  it('a manifest list carries the spec field ids and the snapshot metadata keys', async () => {
    const snapshotId = 2n ** 62n + 1n;
    const bytes = await encodeManifestList({
      snapshotId,
      parentSnapshotId: null,
      sequenceNumber: 9n,
      manifests: [
        {
          manifestPath: '/w/db/t/metadata/m0.avro',
          manifestLength: 4321,
          partitionSpecId: 0,
          content: ManifestContent.DELETES,
          sequenceNumber: 9n,
          minSequenceNumber: 4n,
          addedSnapshotId: snapshotId,
          addedFilesCount: 2,
          existingFilesCount: 0,
          deletedFilesCount: 1,
          addedRowsCount: 2n ** 40n,
          existingRowsCount: 0n,
          deletedRowsCount: 5n,
          partitions: [{ containsNull: false, containsNan: false, lowerBound: Uint8Array.of(1, 0, 0, 0), upperBound: Uint8Array.of(9, 0, 0, 0) }],
        },
      ],
    });
    const file = readContainer(bytes);
    assert.deepEqual(
      Object.fromEntries([...file.meta].filter(([k]) => !k.startsWith('avro.'))),
      { 'snapshot-id': String(snapshotId), 'parent-snapshot-id': 'null', 'sequence-number': '9', 'format-version': '2' },
    );
    assert.deepEqual(
      file.blocks.map((b) => b.count),
      [1],
    );
    const manifestFile = JSON.parse(file.meta.get('avro.schema')!) as Json;
    assert.equal(manifestFile.name, 'manifest_file');
    assert.deepEqual(fieldIds(manifestFile), [500, 501, 502, 517, 515, 516, 503, 504, 505, 506, 512, 513, 514, 507, 519]);
    const partitions = nonNull(fieldNamed(manifestFile, 'partitions').type);
    assert.equal(partitions['element-id'], 508);
    assert.deepEqual(fieldIds(partitions.items), [509, 518, 510, 511]);

    const r = new RawReader(file.blocks[0].data);
    assert.equal(r.string(), '/w/db/t/metadata/m0.avro');
    assert.equal(r.long(), 4321n);
    assert.equal(r.int(), 0);
    assert.equal(r.int(), ManifestContent.DELETES);
    assert.equal(r.long(), 9n);
    assert.equal(r.long(), 4n);
    assert.equal(r.long(), snapshotId);
    assert.deepEqual([r.int(), r.int(), r.int()], [2, 0, 1]);
    assert.deepEqual([r.long(), r.long(), r.long()], [2n ** 40n, 0n, 5n]);
    assert.equal(r.int(), 1, 'partitions present');
    assert.equal(r.int(), 1, 'one field summary');
    assert.equal(r.fixed(1)[0], 0, 'contains_null false');
    assert.deepEqual([r.int(), r.fixed(1)[0]], [1, 0], 'contains_nan false');
    assert.deepEqual([r.int(), [...r.bytes()]], [1, [1, 0, 0, 0]]);
    assert.deepEqual([r.int(), [...r.bytes()]], [1, [9, 0, 0, 0]]);
    assert.equal(r.int(), 0, 'end of the summary array');
    assert.equal(r.int(), 0, 'key_metadata null');
    assert.equal(r.pos, r.buf.length);
  });
});
