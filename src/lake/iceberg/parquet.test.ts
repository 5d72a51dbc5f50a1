import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import { ipcStreamOf, MAX_ROW_GROUP_ROWS, ParquetStreamWriter, parquetRowCount, writeParquet } from './parquet.js';

let dir: string;
let duck: DuckDBInstance;
let con: DuckDBConnection;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'parquet-'));
  duck = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
  con = await duck.connect();
});

after(() => {
  con.closeSync();
  duck.closeSync();
  fs.rmSync(dir, { recursive: true, force: true });
});

const field = (name: string, type: arrow.DataType, id: number, nullable = false) => new arrow.Field(name, type, nullable, new Map([['PARQUET:field_id', String(id)]]));

function batchOf(fields: arrow.Field[], children: arrow.Data[]): arrow.RecordBatch {
  const schema = new arrow.Schema(fields);
  return new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(fields), length: children[0].length, nullCount: 0, children }));
}

function saved(name: string, bytes: Uint8Array): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, bytes);
  return file;
}

async function rows(sql: string): Promise<unknown[][]> {
  return (await con.runAndReadAll(sql)).getRows();
}

test('row groups hold at most 1M rows, with statistics, field ids and per-type encodings', async () => {
  const n = MAX_ROW_GROUP_ROWS + 1;
  const ids = new BigInt64Array(n);
  for (let i = 0; i < n; i++) ids[i] = BigInt(i) - 5n;
  const half = Math.floor(n / 2);
  const fields = [field('id', new arrow.Int64(), 7)];
  // Two batches of one file, the second a separate stream payload.
  const batches = [batchOf(fields, [arrow.makeData({ type: new arrow.Int64(), data: ids.slice(0, half) })]), batchOf(fields, [arrow.makeData({ type: new arrow.Int64(), data: ids.slice(half) })])];
  const file = saved('groups.parquet', writeParquet(batches));
  assert.deepEqual(await rows(`SELECT row_group_id, row_group_num_rows, compression, stats_min, stats_max, stats_null_count FROM parquet_metadata('${file}') ORDER BY row_group_id`), [
    [0n, 1000000n, 'UNCOMPRESSED', '-5', '999994', 0n],
    [1n, 1n, 'UNCOMPRESSED', '999995', '999995', 0n],
  ]);
  assert.deepEqual(await rows(`SELECT name, field_id FROM parquet_schema('${file}') WHERE name = 'id'`), [['id', 7n]]);
  assert.deepEqual(await rows(`SELECT count(*), sum(id) FROM read_parquet('${file}')`), [[BigInt(n), (BigInt(n) * BigInt(n - 1)) / 2n - 5n * BigInt(n)]]);
  assert.deepEqual(await rows(`SELECT DISTINCT encodings FROM parquet_metadata('${file}')`), [['RLE, DELTA_BINARY_PACKED']]);
});

test('integer columns are delta encoded and not compressed, the others get a dictionary and ZSTD', async () => {
  const n = 1000;
  const names = Array.from({ length: n }, (_, i) => `name-${i % 7}`);
  const [day, at, price] = [new arrow.DateDay(), new arrow.TimestampMicrosecond('UTC'), new arrow.Float64()];
  const fields = [field('day', day, 1), field('at', at, 2), field('name', new arrow.Utf8(), 3), field('price', price, 4)];
  const batch = batchOf(fields, [
    arrow.makeData({ type: day, data: Int32Array.from({ length: n }, (_, i) => 19000 + i) }),
    arrow.makeData({ type: at, data: BigInt64Array.from({ length: n }, (_, i) => BigInt(i) * 1000n) }),
    arrow.vectorFromArray(names, new arrow.Utf8()).data[0],
    arrow.makeData({ type: price, data: Float64Array.from({ length: n }, (_, i) => (i % 3) / 4) }),
  ]);
  const file = saved('encodings.parquet', writeParquet([batch]));
  // Parquet writes a zero minimum as -0.0.
  assert.deepEqual(await rows(`SELECT path_in_schema, encodings, compression, stats_min_value, stats_max_value FROM parquet_metadata('${file}') ORDER BY column_id`), [
    ['day', 'RLE, DELTA_BINARY_PACKED', 'UNCOMPRESSED', '2022-01-08', '2024-10-03'],
    ['at', 'RLE, DELTA_BINARY_PACKED', 'UNCOMPRESSED', '1970-01-01 00:00:00+00', '1970-01-01 00:00:00.999+00'],
    ['name', 'PLAIN, RLE, RLE_DICTIONARY', 'ZSTD', 'name-0', 'name-6'],
    ['price', 'PLAIN, RLE, RLE_DICTIONARY', 'ZSTD', '-0.0', '0.5'],
  ]);
  assert.deepEqual(await rows(`SELECT count(*), count(DISTINCT name), sum(price) FROM read_parquet('${file}')`), [[BigInt(n), 7n, names.reduce((t, _, i) => t + (i % 3) / 4, 0)]]);
});

function idsBatch(from: number, count: number): arrow.RecordBatch {
  const id = new arrow.Int64();
  return batchOf([field('id', id, 1), field('tag', new arrow.Utf8(), 2)], [
    arrow.makeData({ type: id, data: BigInt64Array.from({ length: count }, (_, i) => BigInt(from + i)) }),
    arrow.vectorFromArray(Array.from({ length: count }, (_, i) => `t${(from + i) % 3}`), new arrow.Utf8()).data[0],
  ]);
}

/** A stream writer whose output is collected in memory. */
function streamWriter(): { writer: ParquetStreamWriter; bytes: () => Uint8Array } {
  const out: Uint8Array[] = [];
  return {
    writer: new ParquetStreamWriter(async (b) => {
      out.push(b.slice());
    }),
    bytes: () => Buffer.concat(out),
  };
}

test('a stream writer makes one file of successive IPC streams, its row groups as the batch writer does', async () => {
  const { writer, bytes } = streamWriter();
  const streams = [idsBatch(0, 600_000), idsBatch(600_000, 1), idsBatch(600_001, 999_999)].map((b) => ipcStreamOf([b, idsBatch(0, 0)]));
  for (const ipc of streams) await writer.write(ipc, idsBatch(0, 0).schema);
  assert.equal(await writer.close(), 1_600_000);
  const file = saved('streamed.parquet', bytes());
  assert.equal(await parquetRowCount(file), 1_600_000);
  // In order: each row group holds the next ids.
  assert.deepEqual(await rows(`SELECT row_group_id, row_group_num_rows, stats_min_value, stats_max_value FROM parquet_metadata('${file}') WHERE path_in_schema = 'id' ORDER BY row_group_id`), [
    [0n, 1_000_000n, '0', '999999'],
    [1n, 600_000n, '1000000', '1599999'],
  ]);
  assert.deepEqual(await rows(`SELECT count(*), count(DISTINCT id), sum(id), count(DISTINCT tag) FROM read_parquet('${file}')`), [[1_600_000n, 1_600_000n, 1_599_999n * 800_000n, 3n]]);
  await assert.rejects(writer.write(streams[0], idsBatch(0, 0).schema), (err: unknown) => err instanceof TributaryError && err.errorName === 'STORAGE_EXCEPTION');
});

test('a stream writer takes one schema, reports a failing sink, and can be given up', async () => {
  const invalid = (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_ARGUMENT';
  const { writer } = streamWriter();
  await writer.write(ipcStreamOf([idsBatch(0, 10)]), idsBatch(0, 0).schema);
  const other = batchOf([field('id', new arrow.Int32(), 1)], [arrow.makeData({ type: new arrow.Int32(), data: new Int32Array([1]) })]);
  await assert.rejects(writer.write(ipcStreamOf([other]), other.schema), invalid);
  await assert.rejects(writer.write(new Uint8Array([1, 2, 3]), idsBatch(0, 0).schema), invalid);
  assert.equal(await writer.close(), 10);

  const full = new ParquetStreamWriter(async () => {
    throw new Error('disk full');
  });
  await full.write(ipcStreamOf([idsBatch(0, 10)]), idsBatch(0, 0).schema);
  await assert.rejects(full.close(), (err: unknown) => err instanceof TributaryError && err.errorName === 'STORAGE_EXCEPTION' && err.message.includes('disk full'));

  const { writer: abandoned, bytes } = streamWriter();
  await abandoned.write(ipcStreamOf([idsBatch(0, 10)]), idsBatch(0, 0).schema);
  abandoned.abort();
  await assert.rejects(abandoned.write(ipcStreamOf([idsBatch(0, 10)]), idsBatch(0, 0).schema), (err: unknown) => err instanceof TributaryError && err.errorName === 'STORAGE_EXCEPTION');
  await assert.rejects(abandoned.close(), (err: unknown) => err instanceof TributaryError && err.errorName === 'STORAGE_EXCEPTION');
  assert.equal(bytes().length, 0, 'nothing written for a file given up before its first row group');
  await assert.rejects(streamWriter().writer.close(), invalid);
});

test('IPC streams go into the memory given when it is large enough', () => {
  const batches = [idsBatch(0, 100), idsBatch(100, 50)];
  const fresh = ipcStreamOf(batches);
  const large = new ArrayBuffer(fresh.length + 100);
  const reused = ipcStreamOf(batches, large);
  assert.equal(reused.buffer, large);
  assert.deepEqual(reused, fresh);
  const small = new ArrayBuffer(16);
  const grown = ipcStreamOf(batches, small);
  assert.notEqual(grown.buffer, small);
  assert.deepEqual(grown, fresh);
  assert.deepEqual(arrow.tableFromIPC(grown).getChild('id')!.toArray(), BigInt64Array.from({ length: 150 }, (_, i) => BigInt(i)));
});

test('columns that share memory are written intact', async () => {
  const values = new BigInt64Array([1n, -2n, 3n, -4n]);
  const type = new arrow.Int64();
  // Both columns view the same bytes; apache-arrow's own IPC writer would corrupt this stream.
  const batch = batchOf(
    [field('a', type, 1), field('b', type, 2)],
    [arrow.makeData({ type, data: values }), arrow.makeData({ type, data: new BigInt64Array(values.buffer) })],
  );
  const file = saved('shared.parquet', writeParquet([batch]));
  assert.deepEqual(await rows(`SELECT a, b FROM read_parquet('${file}')`), [
    [1n, 1n],
    [-2n, -2n],
    [3n, 3n],
    [-4n, -4n],
  ]);
});

test('a data file needs batches of one schema', () => {
  const invalid = (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_ARGUMENT';
  assert.throws(() => ipcStreamOf([]), invalid);
  const a = batchOf([field('x', new arrow.Int32(), 1)], [arrow.makeData({ type: new arrow.Int32(), data: new Int32Array([1]) })]);
  const b = batchOf([field('x', new arrow.Int64(), 1)], [arrow.makeData({ type: new arrow.Int64(), data: new BigInt64Array([1n]) })]);
  assert.throws(() => ipcStreamOf([a, b]), invalid);
});
