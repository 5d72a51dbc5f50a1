import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { TributaryError } from '../../common/errors.js';
import type { ColumnSpec, TableInfo } from '../../common/schema.js';
import { testTableInfo } from '../../common/fixtures/table-info.js';
import { ColumnBatchBuilder } from '../../record/column-batch-builder.js';
import { toLakeBatch } from './lake-batch.js';
import { newLakeSchema } from './table-shape.js';
import * as arrow from 'apache-arrow';
import { DataFileWriterPool } from './data-file-writer.js';
import { computeMetrics } from './metrics.js';

let dir: string;
let duck: DuckDBInstance;
let con: DuckDBConnection;
/** Shared by the tests that do not close it: workers take a while to start under tsx. */
let pool: DataFileWriterPool;

before(async () => {
  pool = new DataFileWriterPool(2);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'data-file-writer-'));
  duck = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
  con = await duck.connect();
  await con.run("SET TimeZone = 'UTC'");
});

after(async () => {
  await pool.close();
  con.closeSync();
  duck.closeSync();
  fs.rmSync(dir, { recursive: true, force: true });
});

const tableInfo = (columns: ColumnSpec[]) => testTableInfo(columns);

function logBatch(info: TableInfo, rows: Record<string, unknown>[]) {
  const builder = new ColumnBatchBuilder(info.schema);
  for (const row of rows) builder.appendRow(row);
  return builder.build();
}

async function rows(sql: string): Promise<unknown[][]> {
  return (await con.runAndReadAll(sql)).getRows();
}

const rejectsWith = (errorName: string) => (err: unknown) => err instanceof TributaryError && err.errorName === errorName;

/** Every Tributary type, with the DuckDB type its lake column reads as. */
const ALL_TYPES: [ColumnSpec, string][] = [
  [{ name: 'b', type: 'BOOLEAN' }, 'BOOLEAN'],
  [{ name: 'tiny', type: 'TINYINT' }, 'INTEGER'],
  [{ name: 'small', type: 'SMALLINT' }, 'INTEGER'],
  [{ name: 'i', type: 'INT' }, 'INTEGER'],
  [{ name: 'l', type: 'BIGINT' }, 'BIGINT'],
  [{ name: 'f', type: 'FLOAT' }, 'FLOAT'],
  [{ name: 'd', type: 'DOUBLE' }, 'DOUBLE'],
  [{ name: 'dec38', type: 'DECIMAL(38, 10)' }, 'DECIMAL(38,10)'],
  [{ name: 'dec18', type: 'DECIMAL(18, 2)' }, 'DECIMAL(18,2)'],
  [{ name: 'dec9', type: 'DECIMAL(9, 3)' }, 'DECIMAL(9,3)'],
  [{ name: 'c', type: 'CHAR(3)' }, 'VARCHAR'],
  [{ name: 's', type: 'STRING' }, 'VARCHAR'],
  [{ name: 'bin', type: 'BINARY(2)' }, 'BLOB'],
  [{ name: 'bytes', type: 'BYTES' }, 'BLOB'],
  [{ name: 'day', type: 'DATE' }, 'DATE'],
  [{ name: 'tod', type: 'TIME(6)' }, 'TIME'],
  [{ name: 'ts', type: 'TIMESTAMP(6)' }, 'TIMESTAMP'],
  [{ name: 'ltz', type: 'TIMESTAMP_LTZ(6)' }, 'TIMESTAMP WITH TIME ZONE'],
];

test('DuckDB reads every type back exactly, with Iceberg field ids', async () => {
  const info = tableInfo(ALL_TYPES.map(([c]) => c));
  const lakeSchema = newLakeSchema(info);
  const current = logBatch(info, [
    {
      b: true,
      tiny: -128,
      small: -32768,
      i: -2147483648,
      l: -9223372036854775808n,
      f: 1.5,
      d: -2.25,
      dec38: '-1234567890123456789012345678.0123456789',
      dec18: '9999999999999999.99',
      dec9: '-123456.789',
      c: 'abc',
      s: 'héllo ✓',
      bin: new Uint8Array([1, 2]),
      bytes: new Uint8Array([255, 0]),
      day: '1969-12-31',
      tod: '23:59:59.999999',
      ts: -1n,
      ltz: -1n,
    },
    {},
    {
      b: false,
      tiny: 127,
      small: 32767,
      i: 2147483647,
      l: 9223372036854775807n,
      f: -0.25,
      d: 1e300,
      dec38: '9999999999999999999999999999.9999999999',
      dec18: '-0.01',
      dec9: '0.001',
      c: 'xyz',
      s: '',
      bin: new Uint8Array([0, 0]),
      bytes: new Uint8Array(0),
      day: '9999-12-31',
      tod: '00:00:00',
      ts: '9999-12-31 23:59:59.999999',
      ltz: 0n,
    },
  ]);
  // A batch written before the table had more than two columns.
  const older = logBatch(tableInfo(ALL_TYPES.slice(0, 2).map(([c]) => c)), [{ b: true, tiny: 5 }]);
  const batches = [
    toLakeBatch(current, info, lakeSchema, { bucket: 3, offsets: new BigInt64Array([10n, 11n, 12n]), timestamps: new BigInt64Array([-1n, 0n, 1n]) }),
    toLakeBatch(older, info, lakeSchema, { bucket: 3, offsets: new BigInt64Array([13n]), timestamps: new BigInt64Array([2n]) }),
  ];
  const file = path.join(dir, 'db', 't', 'data', '__bucket=3', 'all-types.parquet');
  const written = await pool.write({ batches, path: file, schema: lakeSchema });

  assert.equal(written.filePath, file);
  assert.equal(written.fileFormat, 'PARQUET');
  assert.equal(written.recordCount, 4);
  assert.equal(written.fileSizeInBytes, fs.statSync(file).size);
  assert.deepEqual(fs.readdirSync(path.dirname(file)), ['all-types.parquet'], 'no temp file left');
  const idOf = (name: string) => lakeSchema.fields.find((f) => f.name === name)!.id;
  assert.equal(written.valueCounts!.get(idOf('s')), 4);
  assert.equal(written.nullValueCounts!.get(idOf('s')), 2);
  const long = (v: bigint) => {
    const bytes = Buffer.alloc(8);
    bytes.writeBigInt64LE(v);
    return new Uint8Array(bytes);
  };
  assert.deepEqual(written.lowerBounds!.get(idOf('__offset')), long(10n));
  assert.deepEqual(written.upperBounds!.get(idOf('__offset')), long(13n));

  // Iceberg's partition directories look like Hive's, which DuckDB would otherwise read as columns.
  const read = `read_parquet('${file}', hive_partitioning = false)`;
  const columns = [...ALL_TYPES.map(([c]) => c.name), '__bucket', '__offset', '__timestamp'];
  assert.deepEqual(await rows(`SELECT name, field_id FROM parquet_schema('${file}') WHERE field_id IS NOT NULL`), columns.map((name, i) => [name, BigInt(i + 1)]));
  assert.deepEqual(
    (await rows(`DESCRIBE SELECT * FROM ${read}`)).map((r) => [r[0], r[1]]),
    [...ALL_TYPES.map(([c, duckType]) => [c.name, duckType]), ['__bucket', 'INTEGER'], ['__offset', 'BIGINT'], ['__timestamp', 'TIMESTAMP WITH TIME ZONE']],
  );
  const nulls = (n: number) => new Array<null>(n).fill(null);
  assert.deepEqual(await rows(`SELECT COLUMNS(*)::VARCHAR FROM ${read} ORDER BY __offset`), [
    [
      'true',
      '-128',
      '-32768',
      '-2147483648',
      '-9223372036854775808',
      '1.5',
      '-2.25',
      '-1234567890123456789012345678.0123456789',
      '9999999999999999.99',
      '-123456.789',
      'abc',
      'héllo ✓',
      '\\x01\\x02',
      '\\xFF\\x00',
      '1969-12-31',
      '23:59:59.999999',
      '1969-12-31 23:59:59.999999',
      '1969-12-31 23:59:59.999999+00',
      '3',
      '10',
      '1969-12-31 23:59:59.999999+00',
    ],
    [...nulls(18), '3', '11', '1970-01-01 00:00:00+00'],
    [
      'false',
      '127',
      '32767',
      '2147483647',
      '9223372036854775807',
      '-0.25',
      '1e+300',
      '9999999999999999999999999999.9999999999',
      '-0.01',
      '0.001',
      'xyz',
      '',
      '\\x00\\x00',
      '',
      '9999-12-31',
      '00:00:00',
      '9999-12-31 23:59:59.999999',
      '1970-01-01 00:00:00+00',
      '3',
      '12',
      '1970-01-01 00:00:00.000001+00',
    ],
    ['true', '5', ...nulls(16), '3', '13', '1970-01-01 00:00:00.000002+00'],
  ]);
});

function idsFile(ids: bigint[]) {
  const info = tableInfo([{ name: 'id', type: 'BIGINT', nullable: false }]);
  const lakeSchema = newLakeSchema(info);
  const batch = toLakeBatch(logBatch(info, ids.map((id) => ({ id }))), info, lakeSchema, {
    bucket: 0,
    offsets: BigInt64Array.from(ids),
    timestamps: new BigInt64Array(ids.length),
  });
  return { batches: [batch], schema: lakeSchema };
}

test('a file appended in chunks is one file, with the metrics of the whole', async () => {
  const info = tableInfo(ALL_TYPES.map(([c]) => c));
  const lakeSchema = newLakeSchema(info);
  const top = String.fromCodePoint(0x10ffff);
  // The least and greatest values of each column sit in different chunks; one chunk is all nulls.
  const chunks: Record<string, unknown>[][] = [
    [{ b: true, tiny: 3, small: 3, i: 3, l: 3n, f: 0, d: 0, dec38: '1', dec18: '1', dec9: '1', c: '\u{1f600}', s: 'b'.repeat(20), bin: new Uint8Array([5, 5]), bytes: new Uint8Array(17).fill(0xff), day: '2000-01-01', tod: '12:00:00', ts: 5n, ltz: 5n }],
    [{}, {}],
    [
      { b: false, tiny: -3, small: 9, i: -9, l: 9n, f: -0, d: Number.NaN, dec38: '-5', dec18: '7', dec9: '-1', c: 'aaa', s: 'a', bin: new Uint8Array([0, 9]), bytes: new Uint8Array([0]), day: '1999-01-01', tod: '00:00:01', ts: -5n, ltz: 9n },
      { f: Number.NaN, s: top.repeat(17) },
    ],
    [{ tiny: 9, small: -9, i: 9, l: -9n, f: 1.5, d: -1.25, dec38: '5', dec18: '-7', dec9: '2', c: '\ufffd', s: 'c', day: '2001-01-01', tod: '23:00:00', ts: 1n, ltz: -9n }],
  ];
  let offset = 0n;
  const batches = chunks.map((rows) => {
    const offsets = BigInt64Array.from(rows, () => offset++);
    return toLakeBatch(logBatch(info, rows), info, lakeSchema, { bucket: 1, offsets, timestamps: offsets.map((o) => o * 1000n) });
  });
  const file = path.join(dir, 'chunks', 'streamed.parquet');
  const open = pool.open(file, lakeSchema);
  for (const batch of batches) await open.append([batch]);
  const written = await open.finish();

  const whole = computeMetrics(batches, lakeSchema);
  const idOf = (name: string) => lakeSchema.fields.find((f) => f.name === name)!.id;
  // The cases that make merging bounds more than taking a minimum: -0.0, NaN, code point order
  // (not UTF-16's), truncation, no upper bound.
  assert.equal(Object.is(new DataView(whole.lowerBounds.get(idOf('f'))!.buffer).getFloat32(0, true), -0), true);
  assert.equal(whole.nanValueCounts.get(idOf('d')), 1);
  assert.equal(new TextDecoder().decode(whole.upperBounds.get(idOf('c'))), '\u{1f600}');
  assert.equal(whole.lowerBounds.get(idOf('s'))!.length, 1);
  assert.equal(whole.upperBounds.has(idOf('s')), false, 'no upper bound above 17 × U+10FFFF');
  assert.equal(whole.upperBounds.has(idOf('bytes')), false, 'no upper bound above 17 × 0xFF');
  assert.equal(computeMetrics([batches[0]], lakeSchema).upperBounds.has(idOf('s')), true);
  assert.deepEqual(
    { ...written, filePath: undefined, fileFormat: undefined, fileSizeInBytes: undefined, columnSizes: undefined },
    { ...whole, filePath: undefined, fileFormat: undefined, fileSizeInBytes: undefined, columnSizes: undefined },
  );
  assert.equal(written.fileSizeInBytes, fs.statSync(file).size);
  // Column sizes as DuckDB reads them from the footer: each column's chunks, compressed.
  const sizes = await rows(`SELECT s.field_id, sum(m.total_compressed_size) FROM parquet_metadata('${file}') AS m JOIN parquet_schema('${file}') AS s ON s.name = m.path_in_schema GROUP BY s.field_id ORDER BY 1`);
  assert.deepEqual([...written.columnSizes!].sort((a, b) => a[0] - b[0]), sizes.map(([id, n]) => [Number(id), Number(n)]));
  assert.equal(written.columnSizes!.size, lakeSchema.fields.length);
  assert.deepEqual(fs.readdirSync(path.dirname(file)), ['streamed.parquet']);
  assert.deepEqual(await rows(`SELECT __offset, s IS NULL, i FROM read_parquet('${file}') ORDER BY __offset`), [
    [0n, false, 3],
    [1n, true, null],
    [2n, true, null],
    [3n, false, -9],
    [4n, false, null],
    [5n, false, 9],
  ]);
});

test('a pool of workers writes files side by side', async () => {
  const jobs = [1, 2, 3, 4, 5].map((k) => {
    const ids = Array.from({ length: 1000 * k }, (_, i) => BigInt(i * k));
    return { ...idsFile(ids), path: path.join(dir, 'pool', `f${k}.parquet`), k };
  });
  const results = await Promise.all(jobs.map((j) => pool.write(j)));
  for (const [i, j] of jobs.entries()) {
    assert.equal(results[i].recordCount, 1000 * j.k);
    assert.deepEqual(await rows(`SELECT count(*), max(id) FROM read_parquet('${j.path}')`), [[BigInt(1000 * j.k), BigInt((1000 * j.k - 1) * j.k)]]);
  }
});

test('a bad job fails with a named error and the pool goes on', async () => {
  // A directory where the file should go.
  const blocked = path.join(dir, 'blocked');
  fs.mkdirSync(path.join(blocked, 'x.parquet'), { recursive: true });
  await assert.rejects(pool.write({ ...idsFile([1n]), path: path.join(blocked, 'x.parquet') }), rejectsWith('STORAGE_EXCEPTION'));

  // Batches of another schema fail the file, for good; what was written of it goes.
  const mixed = path.join(dir, 'mixed', 'x.parquet');
  const open = pool.open(mixed, idsFile([]).schema);
  await open.append(idsFile([1n]).batches);
  const other = tableInfo([{ name: 'id', type: 'INT', nullable: false }]);
  const otherSchema = newLakeSchema(other);
  const wrong = toLakeBatch(logBatch(other, [{ id: 1 }]), other, otherSchema, { bucket: 0, offsets: new BigInt64Array(1), timestamps: new BigInt64Array(1) });
  await assert.rejects(open.append([wrong]), rejectsWith('INVALID_ARGUMENT'));
  await assert.rejects(open.append(idsFile([2n]).batches), rejectsWith('INVALID_ARGUMENT'));
  await assert.rejects(open.finish(), rejectsWith('INVALID_ARGUMENT'));
  await open.abort();
  assert.deepEqual(fs.readdirSync(path.dirname(mixed)), []);

  // parquet-wasm drops the rows of a column it cannot encode (month-day-nano intervals) without an
  // error: the footer check turns that into one.
  const type = new arrow.IntervalMonthDayNano();
  const fields = [new arrow.Field('gap', type, false)];
  const intervals = new arrow.RecordBatch(new arrow.Schema(fields), arrow.makeData({ type: new arrow.Struct(fields), length: 2, nullCount: 0, children: [arrow.makeData({ type, length: 2, nullCount: 0, data: new Int32Array(8) })] }));
  const dropped = path.join(dir, 'dropped', 'x.parquet');
  await assert.rejects(pool.write({ batches: [intervals], path: dropped, schema: { type: 'struct', 'schema-id': 0, fields: [] } }), (err: unknown) => rejectsWith('STORAGE_EXCEPTION')(err) && /holds 0 rows, 2 went in/.test((err as Error).message));
  assert.deepEqual(fs.readdirSync(path.dirname(dropped)), []);

  // A file given up leaves nothing behind.
  const given = path.join(dir, 'given-up', 'x.parquet');
  const abandoned = pool.open(given, idsFile([]).schema);
  await abandoned.append(idsFile([1n, 2n]).batches);
  await abandoned.abort();
  assert.deepEqual(fs.readdirSync(path.dirname(given)), []);
  const file = path.join(dir, 'after-bad', 'ok.parquet');
  assert.equal((await pool.write({ ...idsFile([4n, 5n]), path: file })).recordCount, 2);
  assert.deepEqual(await rows(`SELECT id FROM read_parquet('${file}') ORDER BY id`), [[4n], [5n]]);
});

test('closing the pool fails unfinished and later writes', async () => {
  const closing = new DataFileWriterPool(1);
  const open = closing.open(path.join(dir, 'closing', 'a.parquet'), idsFile([]).schema);
  await open.append(idsFile([1n]).batches);
  const unfinished = closing.write({ ...idsFile([2n]), path: path.join(dir, 'closing', 'b.parquet') });
  const settled = assert.rejects(unfinished, rejectsWith('STORAGE_EXCEPTION'));
  await closing.close();
  await settled;
  await assert.rejects(open.finish(), rejectsWith('STORAGE_EXCEPTION'));
  await assert.rejects(closing.write({ ...idsFile([3n]), path: path.join(dir, 'closing', 'c.parquet') }), rejectsWith('STORAGE_EXCEPTION'));
  assert.throws(() => new DataFileWriterPool(0), rejectsWith('INVALID_ARGUMENT'));
});
