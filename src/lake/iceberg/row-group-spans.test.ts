import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import * as arrow from 'apache-arrow';
import { DuckSession } from '../../query/duckdb/session.js';
import { lakePartFilter } from '../../query/lake-pruning.js';
import type { ColumnFilter } from '../../query/duckdb/query-shapes.js';
import { planProjection, readParquetFooter, type RangeReader, writeProjection } from '../parquet/projection.js';
import { rowGroupStatistics } from '../parquet/statistics.js';
import { lakeArrowSchema } from './lake-batch.js';
import { writeParquet } from './parquet.js';
import { rowGroupSpans } from './row-group-spans.js';
import { lakeColumnsOf } from './table-shape.js';
import type { IcebergSchema } from './types.js';

const schema: IcebergSchema = {
  type: 'struct',
  'schema-id': 0,
  fields: [
    { id: 1, name: 'id', required: true, type: 'long' },
    { id: 2, name: 'n', required: false, type: 'int' },
    { id: 3, name: 's', required: false, type: 'string' },
    { id: 4, name: 'd', required: false, type: 'date' },
    { id: 5, name: 'ts', required: false, type: 'timestamp' },
    { id: 6, name: 'amount', required: false, type: 'decimal(10,2)' },
    { id: 7, name: 'wide', required: false, type: 'decimal(30,3)' },
    { id: 8, name: 'gone', required: false, type: 'string' },
    { id: 9, name: 'x', required: false, type: 'double' },
  ],
};
const ROWS = 20_000;
const GROUP_ROWS = 5000;
const T0 = 1_700_000_000_000_000n;

let dir: string;
let duck: DuckSession;
let file: string;

/** Decimal128 data of unscaled values. */
function decimals(type: arrow.DataType, values: bigint[]): arrow.Data {
  const words = new Uint32Array(values.length * 4);
  values.forEach((v, i) => {
    let u = BigInt.asUintN(128, v);
    for (let w = 0; w < 4; w++, u >>= 32n) words[4 * i + w] = Number(u & 0xffffffffn);
  });
  return arrow.makeData({ type: type as arrow.Decimal, length: values.length, data: words });
}

/** Row i: ids, ints and times rise with i; strings rise too, every 7th null; amounts fall; `gone` is all null; `x` a double. */
function batch(): arrow.RecordBatch {
  const fields = lakeArrowSchema(schema).fields;
  const rows = Array.from({ length: ROWS }, (_, i) => i);
  const vector = (i: number, values: unknown[]): arrow.Data => arrow.vectorFromArray(values, fields[i].type).data[0];
  const children = [
    vector(0, rows.map((i) => BigInt(i))),
    vector(1, rows.map((i) => i - 2000)),
    vector(2, rows.map((i) => (i % 7 === 0 ? null : `s${String(i).padStart(5, '0')}`))),
    vector(3, rows.map((i) => new Date((19_000 + Math.floor(i / 10)) * 86_400_000))),
    arrow.makeData({ type: fields[4].type as arrow.TimestampMicrosecond, length: ROWS, data: BigInt64Array.from(rows, (i) => T0 + BigInt(i) * 1_000_000n) }),
    decimals(fields[5].type, rows.map((i) => BigInt(ROWS - i) * 100n + 5n)),
    decimals(fields[6].type, rows.map((i) => -(10n ** 25n) + BigInt(i))),
    vector(7, rows.map(() => null)),
    vector(8, rows.map((i) => i / 3)),
  ];
  const arrowSchema = new arrow.Schema(fields);
  return new arrow.RecordBatch(arrowSchema, arrow.makeData({ type: new arrow.Struct(fields), length: ROWS, nullCount: 0, children }));
}

const reader = (source: string): RangeReader => async (offset, length) => {
  const handle = await fs.promises.open(source, 'r');
  try {
    const buf = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buf, 0, length, offset);
    return buf.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
};

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'row-groups-'));
  duck = await DuckSession.create();
  file = path.join(dir, 'groups.parquet');
  fs.writeFileSync(file, writeParquet([batch()], { maxRowGroupRows: GROUP_ROWS }));
});
after(() => {
  duck.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function metadata(source = file): Promise<Uint8Array> {
  return (await readParquetFooter(reader(source), fs.statSync(source).size))!.metadata;
}

test('the statistics of each row group of a file of the lake writer decode to the values it holds, by type', async () => {
  const groups = rowGroupStatistics(await metadata())!;
  assert.equal(groups.length, ROWS / GROUP_ROWS);
  const fields = new Map(schema.fields.map((f) => [f.id, f]));
  const spans = rowGroupSpans(await metadata(), fields)!;
  for (const [g, group] of spans.entries()) {
    const first = g * GROUP_ROWS;
    const last = first + GROUP_ROWS - 1;
    assert.deepEqual(group.span(1), { lower: BigInt(first), upper: BigInt(last) }, 'long');
    assert.deepEqual(group.span(2), { lower: first - 2000, upper: last - 2000 }, 'int, negative too');
    const firstString = first % 7 === 0 ? first + 1 : first;
    const lastString = last % 7 === 0 ? last - 1 : last;
    assert.deepEqual(group.span(3), { lower: `s${String(firstString).padStart(5, '0')}`, upper: `s${String(lastString).padStart(5, '0')}` }, 'string, nulls left out');
    assert.deepEqual(group.span(4), { lower: 19_000 + first / 10, upper: 19_000 + Math.floor(last / 10) }, 'date in days');
    assert.deepEqual(group.span(5), { lower: T0 + BigInt(first) * 1_000_000n, upper: T0 + BigInt(last) * 1_000_000n }, 'timestamp in micros');
    assert.deepEqual(group.span(6), { lower: BigInt(ROWS - last) * 100n + 5n, upper: BigInt(ROWS - first) * 100n + 5n }, 'decimal(10,2), unscaled');
    assert.deepEqual(group.span(7), { lower: -(10n ** 25n) + BigInt(first), upper: -(10n ** 25n) + BigInt(last) }, 'decimal(30,3), fixed bytes');
    assert.equal(group.span(8), 'null', 'all null');
    assert.deepEqual(group.span(9), undefined, 'doubles are not decoded');
    assert.equal(groups[g].columns.get(3)!.nullCount, [...Array(GROUP_ROWS).keys()].filter((i) => (first + i) % 7 === 0).length);
  }
});

test('a column read in a type its statistics do not match exactly says nothing', async () => {
  const fields = new Map(schema.fields.map((f) => [f.id, f]));
  fields.set(6, { id: 6, name: 'amount', required: false, type: 'decimal(12,3)' });
  fields.set(2, { id: 2, name: 'n', required: false, type: 'long' });
  const [group] = rowGroupSpans(await metadata(), fields)!;
  assert.deepEqual(group.span(6), {}, 'another scale');
  assert.deepEqual(group.span(2), { lower: -2000n, upper: BigInt(GROUP_ROWS - 2001) }, 'an int file column read as long');
});

/** The row groups the filters keep, by index. */
async function kept(filters: ColumnFilter[]): Promise<number[]> {
  const spans = rowGroupSpans(await metadata(), new Map(schema.fields.map((f) => [f.id, f])))!;
  return (await lakePartFilter(duck, lakeColumnsOf(schema), filters)!(spans)).map((g) => g.index);
}

test('row groups are kept when their statistics may hold a row passing the filters', async () => {
  assert.deepEqual(await kept([{ column: 'id', op: '=', literals: [String(2.5 * GROUP_ROWS)] }]), [2]);
  assert.deepEqual(await kept([{ column: 'n', op: '<', literals: ['-1000'] }]), [0]);
  assert.deepEqual(await kept([{ column: 's', op: '>=', literals: [`'s${3 * GROUP_ROWS}'`] }]), [3]);
  assert.deepEqual(await kept([{ column: 'd', op: '=', literals: [`DATE '1970-01-01' + ${19_000 + GROUP_ROWS / 10 + 2}`] }]), [1]);
  assert.deepEqual(await kept([{ column: 'ts', op: '<', literals: ["make_timestamp(1700000000000000 + 1000000 * 1000)"] }]), [0]);
  assert.deepEqual(await kept([{ column: 'amount', op: '<=', literals: ['15.05'] }]), [3]);
  assert.deepEqual(await kept([{ column: 'wide', op: 'in', literals: ['-9999999999999999999999.000', '-9999999999999999999984.999'] }]), [0, 3]);
  assert.deepEqual(await kept([{ column: 'gone', op: '=', literals: ["'x'"] }]), [], 'no null passes a filter');
  assert.deepEqual(await kept([{ column: 'x', op: '=', literals: ['1'] }]), [0, 1, 2, 3], 'no statistics: every row group stays');
  assert.deepEqual(await kept([{ column: 'id', op: '=', literals: ["'not a number'"] }]), [0, 1, 2, 3], 'a comparison DuckDB cannot make keeps every row group');
});

test('DuckDB reads the rows of the row groups kept from a copy of them, and none from a copy of none', async () => {
  const footer = (await readParquetFooter(reader(file), fs.statSync(file).size))!;
  const read = async (source: string): Promise<unknown[][]> =>
    (await duck.run(`SELECT id, s, amount FROM read_parquet('${source}', schema = map{1: {name: 'id', type: 'BIGINT', default_value: NULL}, 3: {name: 's', type: 'VARCHAR', default_value: NULL}, 6: {name: 'amount', type: 'DECIMAL(10,2)', default_value: NULL}}) ORDER BY id`)).rows;
  const copy = path.join(dir, 'kept.parquet');
  const projection = planProjection(footer, { fieldIds: new Set([1, 3, 6]), rowGroups: new Set([1, 3]) })!;
  await writeProjection(reader(file), projection, copy);
  const whole = await read(file);
  assert.deepEqual(await read(copy), whole.filter((r) => Math.floor(Number(r[0]) / GROUP_ROWS) % 2 === 1));
  assert.deepEqual((await duck.run(`SELECT num_rows, num_row_groups FROM parquet_file_metadata('${copy}')`)).rows, [[BigInt(2 * GROUP_ROWS), 2n]]);
  const none = path.join(dir, 'none.parquet');
  await writeProjection(reader(file), planProjection(footer, { rowGroups: new Set() })!, none);
  assert.deepEqual(await read(none), []);
});
