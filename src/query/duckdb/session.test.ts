import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import { DuckSession } from './session.js';

// Arrow columns are built from owned typed arrays, as Tributary's record layer builds them.

function validity(length: number, isNull: (i: number) => boolean): { nullBitmap: Uint8Array; nullCount: number } {
  const nullBitmap = new Uint8Array(Math.ceil(length / 64) * 8);
  let nullCount = 0;
  for (let i = 0; i < length; i++) {
    if (isNull(i)) nullCount++;
    else nullBitmap[i >> 3] |= 1 << (i & 7);
  }
  return { nullBitmap, nullCount };
}

function column<T extends arrow.DataType>(type: T, values: unknown[], fill: (data: unknown[]) => Record<string, unknown>): arrow.Data<T> {
  return arrow.makeData({ type, length: values.length, ...validity(values.length, (i) => values[i] === null), ...fill(values) } as never) as arrow.Data<T>;
}

const fixed = (Array: new (n: number) => { [i: number]: unknown }) => (values: unknown[]) => {
  const data = new Array(values.length);
  values.forEach((v, i) => {
    if (v !== null) data[i] = v;
  });
  return { data };
};

function bools(values: (boolean | null)[]): Record<string, unknown> {
  const data = new Uint8Array(Math.ceil(values.length / 8));
  values.forEach((v, i) => {
    if (v) data[i >> 3] |= 1 << (i & 7);
  });
  return { data };
}

function decimals(values: (bigint | null)[]): Record<string, unknown> {
  const data = new BigInt64Array(values.length * 2);
  values.forEach((v, i) => {
    if (v === null) return;
    data[2 * i] = BigInt.asIntN(64, v);
    data[2 * i + 1] = v >> 64n;
  });
  return { data: new Uint32Array(data.buffer) };
}

function varLength(values: (Uint8Array | null)[]): Record<string, unknown> {
  const valueOffsets = new Int32Array(values.length + 1);
  const parts = values.map((v) => v ?? new Uint8Array(0));
  parts.forEach((p, i) => {
    valueOffsets[i + 1] = valueOffsets[i] + p.length;
  });
  return { valueOffsets, data: Buffer.concat(parts) };
}

const utf8 = (values: unknown[]) => varLength(values.map((v) => (v === null ? null : Buffer.from(v as string))));
const binary = (values: unknown[]) => varLength(values as (Uint8Array | null)[]);

const N = 5000; // three chunks, the last one partial
const ID_BASE = 1n << 60n;
const D18_MAX = 10n ** 18n - 1n;
const D38_MAX = 10n ** 38n - 1n;
const DAY_MICROS = 86_400_000_000n;

interface Source {
  id: bigint;
  b: boolean | null;
  i8: number;
  i16: number | null;
  i32: number;
  f32: number | null;
  f64: number;
  d4: bigint | null;
  d9: bigint;
  d18: bigint | null;
  d38: bigint | null;
  s: string | null;
  bin: Uint8Array | null;
  day: number | null;
  tod: bigint | null;
  ts: bigint | null;
  tstz: bigint | null;
}

function sourceRow(i: number): Source {
  const sign = i % 2 === 0 ? 1n : -1n;
  return {
    id: ID_BASE + BigInt(i),
    b: i % 7 === 0 ? null : i % 3 === 0,
    i8: (i % 256) - 128,
    i16: i % 11 === 0 ? null : (i * 13) % 65536 - 32768,
    i32: (i * 2654435761) | 0,
    f32: i % 13 === 0 ? null : Math.fround(i / 3),
    f64: i / 7 - 100,
    d4: i % 17 === 0 ? null : BigInt((i % 19999) - 9999),
    d9: sign * BigInt((i * 104729) % 999999999),
    d18: i === 1 ? D18_MAX : i === 2 ? -D18_MAX : i % 19 === 0 ? null : sign * BigInt(i) * 1234567890123n,
    d38: i === 1 ? D38_MAX : i === 2 ? -D38_MAX : i % 23 === 0 ? null : sign * BigInt(i) ** 9n,
    s: i % 5 === 0 ? null : i % 2 === 0 ? `v${i}` : `välue number ${i} 😀`,
    bin: i % 6 === 0 ? null : new Uint8Array([i & 255, 0, 255, (i >> 8) & 255, 0x5c]),
    day: i % 29 === 0 ? null : i - 2500,
    tod: i % 31 === 0 ? null : (BigInt(i) * 17_280_000_123n) % DAY_MICROS,
    ts: i % 37 === 0 ? null : BigInt(i - 2500) * 86_400_000_001n + 123_456n,
    tstz: i % 41 === 0 ? null : BigInt(i - 2500) * 3_600_000_007n - 1n,
  };
}

const source = Array.from({ length: N }, (_, i) => sourceRow(i));
const pick = <K extends keyof Source>(k: K): Source[K][] => source.map((r) => r[k]);

const types = {
  id: new arrow.Int64(),
  b: new arrow.Bool(),
  i8: new arrow.Int8(),
  i16: new arrow.Int16(),
  i32: new arrow.Int32(),
  f32: new arrow.Float32(),
  f64: new arrow.Float64(),
  d4: new arrow.Decimal(2, 4, 128),
  d9: new arrow.Decimal(3, 9, 128),
  d18: new arrow.Decimal(4, 18, 128),
  d38: new arrow.Decimal(10, 38, 128),
  s: new arrow.Utf8(),
  bin: new arrow.Binary(),
  day: new arrow.DateDay(),
  tod: new arrow.TimeMicrosecond(),
  ts: new arrow.TimestampMicrosecond(),
  tstz: new arrow.TimestampMicrosecond('UTC'),
};

const fills: Record<keyof Source, (values: unknown[]) => Record<string, unknown>> = {
  id: fixed(BigInt64Array),
  b: (v) => bools(v as (boolean | null)[]),
  i8: fixed(Int8Array),
  i16: fixed(Int16Array),
  i32: fixed(Int32Array),
  f32: fixed(Float32Array),
  f64: fixed(Float64Array),
  d4: (v) => decimals(v as (bigint | null)[]),
  d9: (v) => decimals(v as (bigint | null)[]),
  d18: (v) => decimals(v as (bigint | null)[]),
  d38: (v) => decimals(v as (bigint | null)[]),
  s: utf8,
  bin: binary,
  day: fixed(Int32Array),
  tod: fixed(BigInt64Array),
  ts: fixed(BigInt64Array),
  tstz: fixed(BigInt64Array),
};

const names = Object.keys(types) as (keyof Source)[];
const fields = names.map((n) => new arrow.Field(n, types[n], n !== 'id'));
const schema = new arrow.Schema(fields);
const batch = new arrow.RecordBatch(
  schema,
  arrow.makeData({ type: new arrow.Struct(fields), length: N, children: names.map((n) => column(types[n], pick(n), fills[n])) }),
);

// Expected results, written out independently of the reader's helpers.
const pad = (n: bigint | number, width: number): string => String(n).padStart(width, '0');

function decimalText(unscaled: bigint | null, scale: number): string | null {
  if (unscaled === null) return null;
  const digits = pad(unscaled < 0n ? -unscaled : unscaled, scale + 1);
  return `${unscaled < 0n ? '-' : ''}${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
}

function isoText(micros: bigint | null, zone: boolean): string | null {
  if (micros === null) return null;
  const frac = ((micros % 1_000_000n) + 1_000_000n) % 1_000_000n;
  const seconds = (micros - frac) / 1_000_000n;
  const d = new Date(Number(seconds) * 1000);
  const date = `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCDate(), 2)}`;
  return `${date}T${pad(d.getUTCHours(), 2)}:${pad(d.getUTCMinutes(), 2)}:${pad(d.getUTCSeconds(), 2)}.${pad(frac, 6)}${zone ? 'Z' : ''}`;
}

function expectedRow(r: Source): unknown[] {
  const tod = r.tod === null ? null : isoText(r.tod, false)?.slice(11) ?? null;
  return [
    r.id, r.b, r.i8, r.i16, r.i32, r.f32, r.f64,
    decimalText(r.d4, 2), decimalText(r.d9, 3), decimalText(r.d18, 4), decimalText(r.d38, 10),
    r.s, r.bin,
    r.day === null ? null : isoText(BigInt(r.day) * DAY_MICROS, false)?.slice(0, 10) ?? null,
    tod, isoText(r.ts, false), isoText(r.tstz, true),
  ];
}

let session: DuckSession;
before(async () => {
  session = await DuckSession.create();
});
after(() => session.close());

test('loads every column type with its nulls and reads back exact values', async () => {
  await session.loadArrowTable('all_types', schema, [batch]);
  const described = await session.run('SELECT column_name, column_type FROM (DESCRIBE all_types)');
  assert.deepEqual(described.rows, [
    ['id', 'BIGINT'], ['b', 'BOOLEAN'], ['i8', 'TINYINT'], ['i16', 'SMALLINT'], ['i32', 'INTEGER'],
    ['f32', 'FLOAT'], ['f64', 'DOUBLE'], ['d4', 'DECIMAL(4,2)'], ['d9', 'DECIMAL(9,3)'], ['d18', 'DECIMAL(18,4)'],
    ['d38', 'DECIMAL(38,10)'], ['s', 'VARCHAR'], ['bin', 'BLOB'], ['day', 'DATE'], ['tod', 'TIME'],
    ['ts', 'TIMESTAMP'], ['tstz', 'TIMESTAMP WITH TIME ZONE'],
  ]);
  const result = await session.run('SELECT * FROM all_types ORDER BY id');
  assert.deepEqual(result.columns.map((c) => c.name), names);
  assert.equal(result.rows.length, N);
  for (let i = 0; i < N; i++) assert.deepEqual(result.rows[i], expectedRow(source[i]), `row ${i}`);

  // Spot checks written out by hand.
  assert.deepEqual(result.rows[1].slice(9, 11), ['99999999999999.9999', '9999999999999999999999999999.9999999999']);
  assert.deepEqual(result.rows[2].slice(9, 11), ['-99999999999999.9999', '-9999999999999999999999999999.9999999999']);
  assert.equal(result.rows[0][0], 1152921504606846976n);
  assert.equal(result.rows[2500][13], '1970-01-01');
  assert.equal(result.rows[2501][15], '1970-01-02T00:00:00.123457');
  assert.equal(result.rows[2499][16], '1969-12-31T22:59:59.999992Z');
});

test('DuckDB computes over the loaded values (nulls counted as nulls)', async () => {
  const counts = await session.run(
    'SELECT count(b), count(i16), count(f32), count(d4), count(d18), count(d38), count(s), count(bin), count(day), count(tod), count(ts), count(tstz) FROM all_types',
  );
  const nonNull = (k: keyof Source): bigint => BigInt(source.filter((r) => r[k] !== null).length);
  assert.deepEqual(counts.rows[0], (['b', 'i16', 'f32', 'd4', 'd18', 'd38', 's', 'bin', 'day', 'tod', 'ts', 'tstz'] as const).map(nonNull));
  const sums = await session.run('SELECT sum(i32)::BIGINT, sum(d9), sum(id) FROM all_types');
  assert.deepEqual(sums.rows[0], [
    source.reduce((a, r) => a + BigInt(r.i32), 0n),
    decimalText(source.reduce((a, r) => a + r.d9, 0n), 3),
    source.reduce((a, r) => a + r.id, 0n),
  ]);
});

test('a sliced batch (offset not on a byte boundary) loads the rows it shows', async () => {
  const sliced = batch.slice(3, 2003);
  await session.loadArrowTable('sliced', schema, [sliced, batch.slice(4999)]);
  const result = await session.run('SELECT * FROM sliced ORDER BY id');
  assert.equal(result.rows.length, 2001);
  for (let i = 0; i < 2000; i++) assert.deepEqual(result.rows[i], expectedRow(source[3 + i]), `row ${i}`);
  assert.deepEqual(result.rows[2000], expectedRow(source[4999]));
});

test('a schema-qualified name creates the schema; loading again replaces the table', async () => {
  const small = new arrow.Schema([new arrow.Field('k', new arrow.Int32(), true)]);
  const rows = (values: number[]) => new arrow.RecordBatch(small, arrow.makeData({ type: new arrow.Struct(small.fields), length: values.length, children: [column(new arrow.Int32(), values, fixed(Int32Array))] }));
  await session.loadArrowTable('shop.orders$changelog', small, [rows([1, 2]), rows([3])]);
  assert.deepEqual((await session.run('SELECT sum(k) FROM shop."orders$changelog"')).rows, [[6n]]);
  await session.loadArrowTable('shop.orders$changelog', small, [rows([10])]);
  assert.deepEqual((await session.run('SELECT k FROM shop."orders$changelog"')).rows, [[10]]);
  await session.loadArrowTable('shop.empty', small, []);
  assert.deepEqual((await session.run('SELECT count(*) FROM shop.empty')).rows, [[0n]]);
});

test('views and tables the session creates: a view made again with the same SQL stays, a name turns from one kind to the other', async () => {
  const small = new arrow.Schema([new arrow.Field('k', new arrow.Int32(), true)]);
  const rows = (values: number[]) => new arrow.RecordBatch(small, arrow.makeData({ type: new arrow.Struct(small.fields), length: values.length, children: [column(new arrow.Int32(), values, fixed(Int32Array))] }));
  const viewOid = async () => (await session.run("SELECT view_oid FROM duckdb_views() WHERE schema_name = 'kinds' AND view_name = 'r'")).rows[0]?.[0];
  await session.createView('kinds.r', 'SELECT 1 AS k');
  const first = await viewOid();
  await session.createView('kinds.r', 'SELECT 1 AS k');
  assert.equal(await viewOid(), first, 'the same SQL: the view is left as it is');
  await session.createView('kinds.r', 'SELECT 2 AS k');
  assert.notEqual(await viewOid(), first);
  assert.deepEqual((await session.run('SELECT k FROM kinds.r')).rows, [[2]]);
  // The name becomes a table, then a view again, then a table made by a query.
  await session.loadArrowTable('kinds.r', small, [rows([7])]);
  assert.deepEqual((await session.run('SELECT k FROM kinds.r')).rows, [[7]]);
  assert.equal(await viewOid(), undefined);
  await session.createView('kinds.r', 'SELECT 2 AS k');
  assert.deepEqual((await session.run('SELECT k FROM kinds.r')).rows, [[2]]);
  await session.createTableAs('kinds.r', 'AS SELECT 3 AS k');
  assert.deepEqual((await session.run('SELECT k FROM kinds.r')).rows, [[3]]);
  await session.appendArrowRows('kinds.r', small, [rows([4])]);
  assert.deepEqual((await session.run('SELECT k FROM kinds.r ORDER BY k')).rows, [[3], [4]]);
  // A table stays until dropTable.
  assert.deepEqual((await session.run('SELECT count(*) FROM kinds.r')).rows, [[2n]]);
  await session.dropTable('kinds.r');
  await assert.rejects(session.run('SELECT * FROM kinds.r'), (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_ARGUMENT');
  // A relation the session did not create is not its to drop.
  await session.run('CREATE TABLE kinds.mine AS SELECT 1 AS k');
  await session.dropTable('kinds.mine');
  assert.deepEqual((await session.run('SELECT k FROM kinds.mine')).rows, [[1]]);
});

test('useSchema makes unqualified names resolve in a schema, created when missing; syntax trees are kept by query text', async () => {
  await session.createTableAs('paths.t', 'AS SELECT 5 AS k');
  await session.useSchema('paths');
  assert.deepEqual((await session.run('SELECT k FROM t')).rows, [[5]]);
  await session.useSchema('paths_new');
  await session.useSchema('paths_new');
  await assert.rejects(session.run('SELECT k FROM t'), (err: unknown) => err instanceof TributaryError);
  await session.useSchema('main');
  const tree = await session.syntaxTree('SELECT k FROM paths.t');
  assert.equal(await session.syntaxTree('SELECT k FROM paths.t'), tree);
  assert.notEqual(await session.syntaxTree('SELECT k FROM paths.t '), tree);
});

test('an Arrow type without a DuckDB mapping fails before a table is created', async () => {
  const bad = new arrow.Schema([new arrow.Field('u', new arrow.Uint32(), true)]);
  await assert.rejects(session.loadArrowTable('unsigned', bad, []), (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_TYPE' && err.message.includes("'u'"));
  await assert.rejects(session.run('SELECT * FROM unsigned'), (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_ARGUMENT');
});

test('a batch that does not match the schema fails and leaves no table', async () => {
  const wide = new arrow.Schema([new arrow.Field('a', new arrow.Int64(), true)]);
  const narrow = new arrow.RecordBatch(
    new arrow.Schema([new arrow.Field('a', new arrow.Int32(), true)]),
    arrow.makeData({ type: new arrow.Struct([new arrow.Field('a', new arrow.Int32(), true)]), length: 1, children: [column(new arrow.Int32(), [1], fixed(Int32Array))] }),
  );
  await assert.rejects(session.loadArrowTable('mismatch', wide, [narrow]), (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_ARGUMENT');
  const short = new arrow.RecordBatch(
    wide,
    arrow.makeData({ type: new arrow.Struct(wide.fields), length: 100, children: [arrow.makeData({ type: new arrow.Int64(), length: 100, data: new BigInt64Array(2) })] }),
  );
  await assert.rejects(session.loadArrowTable('mismatch', wide, [short]), (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_ARGUMENT' && err.message.includes('fewer values'));
  assert.deepEqual((await session.run("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'mismatch'")).rows, [[0n]]);
});

test('run returns exact values for the types a query can produce', async () => {
  const result = await session.run(`SELECT
      170141183460469231731687303715884105727::HUGEINT AS h,
      18446744073709551615::UBIGINT AS ub,
      12.5::FLOAT AS f,
      123456789012345678.12::DECIMAL(20, 2) AS d,
      TIMESTAMP '2024-02-29 23:59:59.999999' AS ts,
      TIMESTAMPTZ '2024-02-29 23:59:59.5+02' AS tz,
      TIMESTAMP_NS '1969-12-31 23:59:59.9999995' AS ns,
      DATE '0044-03-15' AS d1,
      'infinity'::DATE AS inf,
      '-infinity'::TIMESTAMPTZ AS ninf,
      TIME '12:34:56.7' AS t,
      [1, NULL, 3] AS l,
      {'a': 1::BIGINT, 'b': 'x'} AS s,
      MAP {'k': 2.50::DECIMAL(3, 2)} AS m,
      '\\x00\\xFFab'::BLOB AS bl,
      INTERVAL 3 DAY AS i,
      NULL AS n,
      200::UTINYINT AS u8, 60000::USMALLINT AS u16, 4000000000::UINTEGER AS u32, NULL::BOOLEAN AS nb,
      'a string longer than twelve bytes' AS long_s, 'a blob longer than twelve bytes'::BLOB AS long_b,
      DATE '12345-06-07' AS far_date, TIMESTAMP '1000-01-01 00:00:00.000001' AS old_ts`);
  assert.deepEqual(result.columns.map((c) => c.type), [
    'HUGEINT', 'UBIGINT', 'FLOAT', 'DECIMAL(20,2)', 'TIMESTAMP', 'TIMESTAMP WITH TIME ZONE', 'TIMESTAMP_NS', 'DATE', 'DATE', 'TIMESTAMP WITH TIME ZONE', 'TIME',
    'INTEGER[]', 'STRUCT("a" BIGINT, "b" VARCHAR)', 'MAP(VARCHAR, DECIMAL(3,2))', 'BLOB', 'INTERVAL', 'INTEGER',
    'UTINYINT', 'USMALLINT', 'UINTEGER', 'BOOLEAN', 'VARCHAR', 'BLOB', 'DATE', 'TIMESTAMP',
  ]);
  assert.deepEqual(result.rows, [[
    170141183460469231731687303715884105727n, 18446744073709551615n, 12.5, '123456789012345678.12',
    '2024-02-29T23:59:59.999999', '2024-02-29T21:59:59.500000Z', '1969-12-31T23:59:59.999999', '0044-03-15', 'infinity', '-infinity',
    '12:34:56.700000', [1, null, 3], { a: 1n, b: 'x' }, [{ key: 'k', value: '2.50' }], new Uint8Array([0, 255, 97, 98]), '3 days', null,
    200, 60000, 4000000000, null, 'a string longer than twelve bytes', new Uint8Array(Buffer.from('a blob longer than twelve bytes')),
    '12345-06-07', '1000-01-01T00:00:00.000001',
  ]]);
});

test('DuckDB errors become TributaryErrors', async () => {
  await assert.rejects(session.run('SELEC 1'), (err: unknown) => err instanceof TributaryError && err.errorName === 'SQL_PARSE_ERROR' && err.message.includes('SELEC'));
  await assert.rejects(session.run('SELECT * FROM no_such_table'), (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_ARGUMENT' && err.message.includes('no_such_table'));
});
