import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { DuckSession } from '../../query/duckdb/session.js';
import { batchOf } from '../iceberg/fixtures/lake-files.js';
import { writeParquet } from '../iceberg/parquet.js';
import type { IcebergSchema } from '../iceberg/types.js';
import { planProjection, type ProjectedPart, type Projection, type RangeReader, readParquetFooter, writeProjection } from './projection.js';

let dir: string;
let duck: DuckSession;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'projection-'));
  duck = await DuckSession.create();
});
after(() => {
  duck.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Reads ranges of a local file, counting the bytes read. */
function readerOf(file: string): { read: RangeReader; bytesRead: () => number } {
  let n = 0;
  const read: RangeReader = async (offset, length) => {
    const handle = await fs.promises.open(file, 'r');
    try {
      const buf = Buffer.alloc(length);
      const { bytesRead } = await handle.read(buf, 0, length, offset);
      n += bytesRead;
      return buf.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
  };
  return { read, bytesRead: () => n };
}

/** The projection of the file read by `read` to `part`, its footer read by `read`. */
async function planOf(read: RangeReader, size: number, part: ProjectedPart): Promise<Projection | undefined> {
  const footer = await readParquetFooter(read, size);
  return footer && planProjection(footer, part);
}

async function project(source: string, ids: number[], name: string): Promise<{ file: string; read: number }> {
  const reader = readerOf(source);
  const projection = await planOf(reader.read, fs.statSync(source).size, { fieldIds: new Set(ids) });
  assert.ok(projection, `a projection of ${ids}`);
  const file = path.join(dir, name);
  await writeProjection(reader.read, projection, file);
  assert.equal(fs.statSync(file).size, projection.size);
  return { file, read: reader.bytesRead() };
}

/** Rows of `columns` (field id → name) of a file, read by field id as the lake reads, in row order. */
async function rowsOf(file: string, columns: Map<number, string>): Promise<unknown[][]> {
  const schema = [...columns].map(([id, type]) => `${id}: {name: 'f${id}', type: '${type}', default_value: NULL}`).join(', ');
  const result = await duck.run(`SELECT file_row_number, ${[...columns.keys()].map((id) => `f${id}`).join(', ')} FROM read_parquet('${file}', schema = map{${schema}}, file_row_number = true) ORDER BY file_row_number`);
  return result.rows;
}

test('DuckDB reads the same rows from a projection as from the whole file, for several column subsets (DuckDB-written, several row groups)', async () => {
  const source = path.join(dir, 'duck.parquet');
  await duck.run(
    `COPY (SELECT i AS a, CASE WHEN i % 7 = 0 THEN NULL ELSE 'name-' || (i % 50) END AS b, i * 1.5 AS c, repeat('x', i % 30) AS d, (i % 3 = 0) AS e FROM range(100000) AS t(i)) ` +
      `TO '${source}' (FORMAT parquet, ROW_GROUP_SIZE 10000, FIELD_IDS {a: 1, b: 2, c: 3, d: 4, e: 5})`,
  );
  const types = new Map([[1, 'BIGINT'], [2, 'VARCHAR'], [3, 'DOUBLE'], [4, 'VARCHAR'], [5, 'BOOLEAN']]);
  const groups = (await duck.run(`SELECT count(DISTINCT row_group_id) FROM parquet_metadata('${source}')`)).rows[0][0];
  assert.ok(Number(groups) >= 3, `${groups} row groups`);
  for (const ids of [[1], [2, 4], [3], [5, 1], [1, 2, 3, 4, 5]]) {
    const columns = new Map(ids.map((id) => [id, types.get(id)!]));
    const { file, read } = await project(source, ids, `duck-${ids.join('-')}.parquet`);
    assert.deepEqual(await rowsOf(file, columns), await rowsOf(source, columns));
    if (ids.length < 5) assert.ok(read < fs.statSync(source).size, `${ids}: read ${read} of ${fs.statSync(source).size} bytes`);
  }
});

test('a projection of a file of the lake writer keeps its field ids and drops its Arrow schema', async () => {
  const schema: IcebergSchema = {
    type: 'struct',
    'schema-id': 0,
    fields: [
      { id: 1, name: 'id', required: true, type: 'long' },
      { id: 2, name: 'name', required: false, type: 'string' },
      { id: 3, name: 'score', required: false, type: 'double' },
    ],
  };
  const source = path.join(dir, 'lake.parquet');
  const n = 20000;
  const batch = batchOf(schema, [Array.from({ length: n }, (_, i) => BigInt(i)), Array.from({ length: n }, (_, i) => (i % 5 ? `n${i % 17}` : null)), Array.from({ length: n }, (_, i) => Math.sin(i))]);
  fs.writeFileSync(source, writeParquet([batch]));
  const { file } = await project(source, [3, 2], 'lake-3-2.parquet');
  const columns = new Map([[2, 'VARCHAR'], [3, 'DOUBLE']]);
  assert.deepEqual(await rowsOf(file, columns), await rowsOf(source, columns));
  const kept = await duck.run(`SELECT name, field_id FROM parquet_schema('${file}') WHERE field_id IS NOT NULL ORDER BY field_id`);
  assert.deepEqual(kept.rows, [['name', 2n], ['score', 3n]]);
  const keys = await duck.run(`SELECT decode(key) FROM parquet_kv_metadata('${file}')`);
  assert.ok(!keys.rows.some((r) => r[0] === 'ARROW:schema'));
});

test('there is no projection of a file that holds none of the field ids, of a small one, nor of one that is not Parquet', async () => {
  const source = path.join(dir, 'none.parquet');
  await duck.run(`COPY (SELECT md5(CAST(i AS VARCHAR)) AS a FROM range(20000) AS t(i)) TO '${source}' (FORMAT parquet, FIELD_IDS {a: 1})`);
  assert.ok(await planOf(readerOf(source).read, fs.statSync(source).size, { fieldIds: new Set([1]) }));
  assert.equal(await planOf(readerOf(source).read, fs.statSync(source).size, { fieldIds: new Set([9]) }), undefined);
  const text = path.join(dir, 'text.parquet');
  fs.writeFileSync(text, Buffer.alloc(100_000, 'not a parquet file at all'));
  // The magic and a length, before bytes that are no FileMetaData.
  const garbled = path.join(dir, 'garbled.parquet');
  const tail = Buffer.alloc(8);
  tail.writeUInt32LE(50_000);
  tail.write('PAR1', 4);
  fs.writeFileSync(garbled, Buffer.concat([Buffer.from('PAR1'), Buffer.alloc(99_992, 0xfe), tail]));
  assert.equal(await planOf(readerOf(garbled).read, fs.statSync(garbled).size, { fieldIds: new Set([1]) }), undefined);
  const small = path.join(dir, 'small.parquet');
  await duck.run(`COPY (SELECT 1 AS a) TO '${small}' (FORMAT parquet, FIELD_IDS {a: 1})`);
  assert.equal(await planOf(readerOf(small).read, fs.statSync(small).size, { fieldIds: new Set([1]) }), undefined);
  assert.equal(await planOf(readerOf(text).read, fs.statSync(text).size, { fieldIds: new Set([1]) }), undefined);
});

test('column chunks within the end of the file read for the footer are not read again', async () => {
  const source = path.join(dir, 'tail.parquet');
  await duck.run(`COPY (SELECT md5(CAST(i AS VARCHAR)) AS a, i % 2 = 0 AS b FROM range(20000) AS t(i)) TO '${source}' (FORMAT parquet, FIELD_IDS {a: 1, b: 2})`);
  const { file, read } = await project(source, [2], 'tail-2.parquet');
  assert.equal(read, 64 * 1024, 'the footer read alone');
  const columns = new Map([[2, 'BOOLEAN']]);
  assert.deepEqual(await rowsOf(file, columns), await rowsOf(source, columns));
});
