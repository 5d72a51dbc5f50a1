import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import { ipcStreamOf, MAX_ROW_GROUP_ROWS, writeParquet } from './parquet.js';

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

test('row groups hold at most 1M rows, ZSTD compressed, with statistics and field ids', async () => {
  const n = MAX_ROW_GROUP_ROWS + 1;
  const ids = new BigInt64Array(n);
  for (let i = 0; i < n; i++) ids[i] = BigInt(i) - 5n;
  const half = Math.floor(n / 2);
  const fields = [field('id', new arrow.Int64(), 7)];
  // Two batches of one file, the second a separate stream payload.
  const batches = [batchOf(fields, [arrow.makeData({ type: new arrow.Int64(), data: ids.slice(0, half) })]), batchOf(fields, [arrow.makeData({ type: new arrow.Int64(), data: ids.slice(half) })])];
  const file = saved('groups.parquet', writeParquet(batches));
  assert.deepEqual(await rows(`SELECT row_group_id, row_group_num_rows, compression, stats_min, stats_max, stats_null_count FROM parquet_metadata('${file}') ORDER BY row_group_id`), [
    [0n, 1000000n, 'ZSTD', '-5', '999994', 0n],
    [1n, 1n, 'ZSTD', '999995', '999995', 0n],
  ]);
  assert.deepEqual(await rows(`SELECT name, field_id FROM parquet_schema('${file}') WHERE name = 'id'`), [['id', 7n]]);
  assert.deepEqual(await rows(`SELECT count(*), sum(id) FROM read_parquet('${file}')`), [[BigInt(n), (BigInt(n) * BigInt(n - 1)) / 2n - 5n * BigInt(n)]]);
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
