import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import {
  type PartitionSpec,
  type Snapshot,
  type SortOrder,
  ancestorsOf,
  currentSnapshot,
  newSnapshotId,
  newTableMetadata,
  parseTableMetadata,
  serializeTableMetadata,
  withSnapshot,
  withoutSnapshots,
} from './table-metadata.js';
import { TEST_SCHEMA } from './fixtures/catalog-table.js';

const schema = TEST_SCHEMA;
const spec: PartitionSpec = { 'spec-id': 0, fields: [{ 'source-id': 1, 'field-id': 1000, name: 'id_bucket', transform: 'bucket[4]' }] };
const sortOrder: SortOrder = { 'order-id': 1, fields: [{ transform: 'identity', 'source-id': 3, direction: 'asc', 'null-order': 'nulls-first' }] };

function snapshot(id: bigint, parent: bigint | null, seq: bigint): Snapshot {
  return {
    snapshotId: id,
    parentSnapshotId: parent,
    sequenceNumber: seq,
    timestampMs: 1_700_000_000_000 + Number(seq),
    manifestList: `/wh/db/t/metadata/snap-${id}-1-x.avro`,
    summary: { operation: 'append', 'added-records': '10' },
    schemaId: 0,
  };
}

function assertError(fn: () => unknown, name: string, pattern?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof TributaryError, String(err));
    assert.equal(err.errorName, name);
    if (pattern) assert.match(err.message, pattern);
    return true;
  });
}

describe('table metadata', () => {
  it('starts a table with its ids, no snapshots and a trimmed location', () => {
    const m = newTableMetadata({ location: '/wh/db/t/', schema, spec, sortOrder, properties: { a: 'b' } });
    assert.equal(m.location, '/wh/db/t');
    assert.equal(m.lastColumnId, 3);
    assert.equal(m.lastPartitionId, 1000);
    assert.equal(m.lastSequenceNumber, 0n);
    assert.equal(m.currentSnapshotId, null);
    assert.equal(m.defaultSortOrderId, 1);
    assert.deepEqual(m.properties, { a: 'b' });
    assert.match(m.tableUuid, /^[0-9a-f-]{36}$/);
    const unpartitioned = newTableMetadata({ location: '/x', schema, spec: { 'spec-id': 0, fields: [] }, sortOrder: { 'order-id': 0, fields: [] } });
    assert.equal(unpartitioned.lastPartitionId, 999);
  });

  it('rejects sort orders that misuse order id 0 and fields with unknown sources', () => {
    assertError(() => newTableMetadata({ location: '/x', schema, spec, sortOrder: { ...sortOrder, 'order-id': 0 } }), 'INVALID_ARGUMENT');
    assertError(
      () => newTableMetadata({ location: '/x', schema, spec: { 'spec-id': 0, fields: [{ ...spec.fields[0], 'source-id': 9 }] }, sortOrder }),
      'INVALID_ARGUMENT',
      /source id 9/,
    );
  });

  it('keeps snapshot ids near 2^62 and 2^63 exact through JSON', () => {
    const big = (1n << 62n) + 1n;
    const biggest = (1n << 63n) - 1n;
    let m = newTableMetadata({ location: '/wh/db/t', schema, spec, sortOrder });
    m = withSnapshot(m, snapshot(big, null, 1n));
    m = withSnapshot(m, snapshot(biggest, big, 2n));
    const text = serializeTableMetadata(m);
    assert.ok(text.includes(`"snapshot-id": ${biggest}`), 'written as a JSON integer, not a string');
    assert.ok(text.includes(`"parent-snapshot-id": ${big}`));
    assert.ok(text.includes(`"current-snapshot-id": ${biggest}`));
    const back = parseTableMetadata(text);
    assert.deepEqual(back, m);
    assert.equal(back.snapshots[0].snapshotId, 4611686018427387905n);
    assert.equal(back.refs.main.snapshotId, 9223372036854775807n);
    assert.equal(serializeTableMetadata(back), text);
  });

  it('reads metadata other writers produced: exact big ids, -1 as no snapshot, digits in strings untouched', () => {
    const text = `{"format-version":2,"table-uuid":"u","location":"/l","last-sequence-number":3,
      "last-updated-ms":1515100955770,"last-column-id":3,"schemas":[],"current-schema-id":0,
      "partition-specs":[],"default-spec-id":0,"last-partition-id":999,
      "properties":{"offsets":"12345678901234567890","ratio":"0.1234567890123456789"},
      "current-snapshot-id":3051729675574597004,"sort-orders":[],"default-sort-order-id":0,
      "refs":{"main":{"snapshot-id":3051729675574597004,"type":"branch","max-ref-age-ms":10000000}},
      "snapshots":[{"snapshot-id":3051729675574597004,"parent-snapshot-id":-8000000000000000001,
        "sequence-number":3,"timestamp-ms":1515100955770,"manifest-list":"/l/s1.avro",
        "summary":{"operation":"append","x":"1.5e300"},"schema-id":0,"extra":0.12345678901234567}],
      "snapshot-log":[{"timestamp-ms":1515100955770,"snapshot-id":3051729675574597004}]}`;
    const m = parseTableMetadata(text);
    assert.equal(m.currentSnapshotId, 3051729675574597004n);
    assert.equal(m.snapshots[0].parentSnapshotId, -8000000000000000001n);
    assert.equal(m.snapshotLog[0].snapshotId, 3051729675574597004n);
    assert.equal(m.refs.main.maxRefAgeMs, 10000000);
    assert.deepEqual(m.properties, { offsets: '12345678901234567890', ratio: '0.1234567890123456789' });
    assert.deepEqual(m.metadataLog, []);
    const none = parseTableMetadata(text.replace('"current-snapshot-id":3051729675574597004', '"current-snapshot-id":-1'));
    assert.equal(none.currentSnapshotId, null);
    assert.ok(serializeTableMetadata({ ...m, currentSnapshotId: null }).includes('"current-snapshot-id": -1'));
  });

  it('names what is wrong in bad metadata', () => {
    const good = serializeTableMetadata(newTableMetadata({ location: '/l', schema, spec, sortOrder }));
    assertError(() => parseTableMetadata('{"format-version": 2'), 'INVALID_TABLE_EXCEPTION', /not JSON/);
    assertError(() => parseTableMetadata(good.replace('"format-version": 2', '"format-version": 3')), 'INVALID_TABLE_EXCEPTION', /version 3/);
    assertError(() => parseTableMetadata(good.replace('"last-sequence-number": 0', '"last-sequence-number": "x"')), 'INVALID_TABLE_EXCEPTION', /last-sequence-number/);
    assertError(() => parseTableMetadata(good.replace(/"location": "[^"]*",/, '')), 'INVALID_TABLE_EXCEPTION', /"location"/);
  });

  it('adds snapshots to the main branch and removes all but the current one', () => {
    let m = newTableMetadata({ location: '/wh/db/t', schema, spec, sortOrder });
    const ids = [newSnapshotId(m)];
    m = withSnapshot(m, snapshot(ids[0], null, 1n));
    ids.push(newSnapshotId(m));
    m = withSnapshot(m, snapshot(ids[1], ids[0], 2n));
    assert.ok(ids.every((id) => id > 0n && id < 1n << 63n));
    assert.equal(currentSnapshot(m)?.snapshotId, ids[1]);
    assert.equal(m.lastSequenceNumber, 2n);
    assert.deepEqual(m.refs.main, { snapshotId: ids[1], type: 'branch' });
    assert.deepEqual(m.snapshotLog.map((e) => e.snapshotId), ids);
    assert.deepEqual(ancestorsOf(m, ids[1]).map((s) => s.snapshotId), [ids[1], ids[0]]);
    assertError(() => withSnapshot(m, snapshot(5n, ids[1], 2n)), 'INVALID_ARGUMENT', /sequence number/);
    assertError(() => withoutSnapshots(m, new Set([ids[1]])), 'INVALID_ARGUMENT', /current snapshot/);
    const pruned = withoutSnapshots(m, new Set([ids[0]]));
    assert.deepEqual(pruned.snapshots.map((s) => s.snapshotId), [ids[1]]);
    assert.deepEqual(pruned.snapshotLog.map((e) => e.snapshotId), [ids[1]]);
    assert.deepEqual(ancestorsOf(pruned, ids[1]).map((s) => s.snapshotId), [ids[1]]);
  });
});
