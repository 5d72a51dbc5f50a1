import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import type { ColumnSpec, TableInfo } from '../../common/schema.js';
import { testTableInfo } from '../../common/fixtures/table-info.js';
import { ColumnBatchBuilder } from '../../record/column-batch-builder.js';
import { ipcStreamOf } from './parquet.js';
import { consecutiveOffsets, FIELD_ID_KEY, lakeArrowSchema, toLakeBatch } from './lake-batch.js';
import { newLakeSchema } from './table-shape.js';

const tableInfo = (columns: ColumnSpec[]) => testTableInfo(columns, { bucketCount: 1 });

const COLUMNS: ColumnSpec[] = [
  { name: 'id', type: 'BIGINT', nullable: false },
  { name: 'tiny', type: 'TINYINT' },
  { name: 'small', type: 'SMALLINT' },
  { name: 'name', type: 'STRING' },
  { name: 'amount', type: 'DECIMAL(20, 4)' },
  { name: 'at', type: 'TIMESTAMP_LTZ(6)' },
];

const system = (rows: number, firstOffset: bigint) => ({
  bucket: 2,
  offsets: BigInt64Array.from({ length: rows }, (_, i) => firstOffset + BigInt(i)),
  timestamps: BigInt64Array.from({ length: rows }, (_, i) => -1n + BigInt(i)),
});

function logBatch(info: TableInfo, rows: Record<string, unknown>[]): arrow.RecordBatch {
  const builder = new ColumnBatchBuilder(info.schema);
  for (const row of rows) builder.appendRow(row);
  return builder.build();
}

const values = (batch: arrow.RecordBatch, name: string): unknown[] => [...batch.getChild(name)!].map((v) => (v === null ? null : typeof v === 'object' ? String(v) : v));

test('the lake Arrow schema carries field ids, Iceberg types and optionality', () => {
  const lakeSchema = newLakeSchema(tableInfo(COLUMNS));
  const schema = lakeArrowSchema(lakeSchema);
  assert.equal(lakeArrowSchema(lakeSchema), schema, 'one Arrow schema per lake schema');
  assert.deepEqual(
    schema.fields.map((f) => [f.name, String(f.type), f.nullable, f.metadata.get(FIELD_ID_KEY)]),
    [
      ['id', 'Int64', false, '1'],
      ['tiny', 'Int32', true, '2'],
      ['small', 'Int32', true, '3'],
      ['name', 'Utf8', true, '4'],
      ['amount', 'Decimal[20e+4]', true, '5'],
      ['at', 'Timestamp<MICROSECOND, UTC>', true, '6'],
      ['__bucket', 'Int32', false, '7'],
      ['__offset', 'Int64', false, '8'],
      ['__timestamp', 'Timestamp<MICROSECOND, UTC>', false, '9'],
    ],
  );
});

test('a log batch becomes a lake batch: columns shared, small ints widened, system columns appended', () => {
  const info = tableInfo(COLUMNS);
  const batch = logBatch(info, [
    { id: 1n, tiny: -128, small: 32767, name: 'a', amount: '-12.5', at: 5n },
    { id: 2n, tiny: null, small: null, name: null, amount: null, at: null },
    { id: 3n, tiny: 127, small: -32768, name: 'ccc', amount: '0.0001', at: -1n },
  ]);
  const lakeSchema = newLakeSchema(info);
  const lake = toLakeBatch(batch, info, lakeSchema, system(3, 100n));
  assert.deepEqual(lake.schema.fields, lakeArrowSchema(lakeSchema).fields);
  assert.equal(lake.numRows, 3);
  assert.deepEqual(values(lake, 'id'), [1n, 2n, 3n]);
  assert.deepEqual(values(lake, 'tiny'), [-128, null, 127]);
  assert.deepEqual(values(lake, 'small'), [32767, null, -32768]);
  assert.deepEqual(values(lake, 'name'), ['a', null, 'ccc']);
  assert.deepEqual(values(lake, '__bucket'), [2, 2, 2]);
  assert.deepEqual(values(lake, '__offset'), [100n, 101n, 102n]);
  assert.ok(lake.getChild('tiny')!.data[0].values instanceof Int32Array);
  // Passed-through columns keep the log batch's buffers.
  for (const name of ['id', 'name', 'amount', 'at']) {
    assert.equal(lake.getChild(name)!.data[0].values, batch.getChild(name)!.data[0].values, name);
  }
  assert.equal(lake.getChild('name')!.data[0].valueOffsets, batch.getChild('name')!.data[0].valueOffsets);
  // Decoded again from IPC, the values hold: µs timestamps and decimals exactly.
  const decoded = arrow.tableFromIPC(ipcStreamOf([lake])).batches[0];
  assert.deepEqual(decoded.getChild('at')!.data[0].values, new BigInt64Array([5n, 0n, -1n]));
  assert.deepEqual(decoded.getChild('__timestamp')!.data[0].values, new BigInt64Array([-1n, 0n, 1n]));
  assert.deepEqual(values(decoded, 'tiny'), [-128, null, 127]);
  assert.deepEqual([...decoded.getChild('amount')!.data[0].values.subarray(0, 4)], [0xfffe17b8, 0xffffffff, 0xffffffff, 0xffffffff]); // -125000
});

test('a sliced log batch keeps its nulls where they were', () => {
  const info = tableInfo(COLUMNS);
  const rows = Array.from({ length: 20 }, (_, i) => ({ id: BigInt(i), tiny: i % 3 === 0 ? null : i, small: i % 4 === 0 ? null : -i, name: i % 5 === 0 ? null : `n${i}` }));
  const batch = logBatch(info, rows).slice(3, 14);
  const lake = toLakeBatch(batch, info, newLakeSchema(info), system(11, 0n));
  const decoded = arrow.tableFromIPC(ipcStreamOf([lake])).batches[0];
  const expected = rows.slice(3, 14);
  assert.deepEqual(values(decoded, 'tiny'), expected.map((r) => r.tiny));
  assert.deepEqual(values(decoded, 'small'), expected.map((r) => r.small));
  assert.deepEqual(values(decoded, 'name'), expected.map((r) => r.name));
  assert.deepEqual(values(decoded, 'id'), expected.map((r) => r.id));
});

test('a batch of an older schema gets null columns; columns the lake lacks are left out', () => {
  const old = tableInfo(COLUMNS.slice(0, 2));
  const current = tableInfo(COLUMNS);
  const lakeSchema = newLakeSchema(current);
  const lake = toLakeBatch(logBatch(old, [{ id: 7n, tiny: 1 }, { id: 8n, tiny: 2 }]), current, lakeSchema, system(2, 0n));
  assert.deepEqual(
    lake.schema.fields.map((f) => f.name),
    ['id', 'tiny', 'small', 'name', 'amount', 'at', '__bucket', '__offset', '__timestamp'],
  );
  for (const name of ['small', 'name', 'amount', 'at']) {
    assert.equal(lake.getChild(name)!.nullCount, 2, name);
    assert.deepEqual(values(lake, name), [null, null], name);
  }
  const decoded = arrow.tableFromIPC(ipcStreamOf([lake])).batches[0];
  assert.deepEqual(values(decoded, 'amount'), [null, null]);
  assert.deepEqual(values(decoded, 'id'), [7n, 8n]);

  // The table gained a column the lake schema does not have yet.
  const wider = tableInfo([...COLUMNS, { name: 'extra', type: 'INT' }]);
  const fromWider = toLakeBatch(logBatch(wider, [{ id: 1n, extra: 5 }]), wider, lakeSchema, system(1, 0n));
  assert.deepEqual(fromWider.schema.fields, lake.schema.fields);
  assert.deepEqual(values(fromWider, 'id'), [1n]);
});

test('bad system columns and mismatched batches are rejected', () => {
  const info = tableInfo(COLUMNS);
  const lakeSchema = newLakeSchema(info);
  const batch = logBatch(info, [{ id: 1n }, { id: 2n }]);
  const invalid = (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_ARGUMENT';
  assert.throws(() => toLakeBatch(batch, info, lakeSchema, system(3, 0n)), invalid);
  const shared = new BigInt64Array(3);
  assert.throws(() => toLakeBatch(batch, info, lakeSchema, { bucket: 0, offsets: shared.subarray(0, 2), timestamps: shared.subarray(1, 3) }), invalid);
  // A batch whose column has another type than the table's.
  const other = tableInfo([{ name: 'id', type: 'INT', nullable: false }]);
  assert.throws(() => toLakeBatch(logBatch(other, [{ id: 1 }, { id: 2 }]), info, lakeSchema, system(2, 0n)), invalid);
  // A required lake column the batch lacks.
  assert.throws(() => toLakeBatch(logBatch(tableInfo([{ name: 'tiny', type: 'TINYINT' }]), [{}, {}]), info, lakeSchema, system(2, 0n)), invalid);
});

test('consecutive offsets count on across the 32-bit halves', () => {
  assert.deepEqual([...consecutiveOffsets(7n, 3)], [7n, 8n, 9n]);
  assert.deepEqual([...consecutiveOffsets(2n ** 32n - 2n, 4)], [2n ** 32n - 2n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 32n + 1n]);
  assert.deepEqual([...consecutiveOffsets(2n ** 40n + 5n, 2)], [2n ** 40n + 5n, 2n ** 40n + 6n]);
  assert.deepEqual([...consecutiveOffsets(2n ** 63n - 1n, 1)], [2n ** 63n - 1n]);
  assert.equal(consecutiveOffsets(0n, 0).length, 0);
  assert.throws(() => consecutiveOffsets(-1n, 1), (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_ARGUMENT');
  assert.throws(() => consecutiveOffsets(2n ** 63n - 1n, 2), (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_ARGUMENT');
});
