import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TributaryError } from '../common/errors.js';
import { buildSchema, type TableInfo } from '../common/schema.js';
import { Timestamp } from '../common/values.js';
import { lineFormat, parseFrom } from './tail.js';

test('--from: earliest, latest, an offset or a timestamp', () => {
  assert.equal(parseFrom('earliest'), 'earliest');
  assert.equal(parseFrom(' latest '), 'latest');
  assert.equal(parseFrom('42'), 42n);
  assert.deepEqual(parseFrom('2024-05-01T12:00:00Z'), { timestamp: new Date(Date.UTC(2024, 4, 1, 12)) });
  assert.deepEqual(parseFrom('2024-05-01 14:00:00+02:00'), { timestamp: new Date(Date.UTC(2024, 4, 1, 12)) });
  assert.throws(() => parseFrom('yesterday'), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT');
});

test('one line per record, in json or table form', () => {
  const info: TableInfo = {
    path: { database: 'db', table: 't' },
    tableId: 1,
    schemaId: 1,
    schema: buildSchema([
      { name: 'id', type: 'BIGINT' },
      { name: 'at', type: 'TIMESTAMP(6)' },
      { name: 'seen', type: 'TIMESTAMP_LTZ(6)' },
      { name: 'note', type: 'STRING' },
      { name: 'raw', type: 'BYTES' },
    ]),
    partitionKeys: ['note'],
    bucketCount: 2,
    bucketKeys: [],
    properties: {},
    createdTime: 0,
    modifiedTime: 0,
  };
  const record = {
    bucket: 1,
    partition: 'eu',
    offset: 9007199254740993n,
    timestamp: Date.UTC(2024, 0, 2, 3, 4, 5, 6),
    changeType: '+A' as const,
    row: { id: 7n, at: new Timestamp(1_000_001n), seen: new Timestamp(1_000_001n), note: 'a\tb', raw: new Uint8Array([1, 255]) },
  };
  assert.deepEqual(JSON.parse(lineFormat(info, info.schema, 'json').of(record)), {
    op: '+A',
    partition: 'eu',
    bucket: 1,
    offset: '9007199254740993',
    timestamp: '2024-01-02T03:04:05.006Z',
    row: { id: 7, at: '1970-01-01T00:00:01.000001', seen: '1970-01-01T00:00:01.000001Z', note: 'a\tb', raw: 'Af8=' },
  });
  const table = lineFormat(info, info.schema, 'table');
  assert.equal(table.header, 'op | bucket | offset | timestamp | id | at | seen | note | raw');
  assert.equal(table.of({ ...record, row: { ...record.row, id: null } }), '+A | eu/1 | 9007199254740993 | 2024-01-02T03:04:05.006Z | NULL | 1970-01-01T00:00:01.000001 | 1970-01-01T00:00:01.000001Z | a\\tb | 01ff');
});
