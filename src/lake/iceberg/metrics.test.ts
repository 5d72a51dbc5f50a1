import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import { type FileMetrics, computeMetrics } from './metrics.js';
import { toSingleValue } from './single-value.js';
import type { IcebergField, IcebergSchema } from './types.js';

type Cell = unknown;

function bitmap(values: readonly Cell[]): { nullBitmap: Uint8Array; nullCount: number } {
  const nullBitmap = new Uint8Array(Math.ceil(values.length / 8) + 8);
  let nullCount = 0;
  values.forEach((v, i) => {
    if (v === null) nullCount++;
    else nullBitmap[i >> 3] |= 1 << (i & 7);
  });
  return { nullBitmap, nullCount };
}

/** An Arrow column of a fixed-width type from values (null = null), with its own buffers. */
function fixed(type: arrow.DataType, values: readonly Cell[], fill: (data: never, i: number, v: never) => void, data: ArrayBufferView): arrow.Data {
  values.forEach((v, i) => {
    if (v !== null) fill(data as never, i, v as never);
  });
  return arrow.makeData({ type, length: values.length, ...bitmap(values), data } as never);
}

const ints = (values: (number | null)[]) => fixed(new arrow.Int32(), values, (a: Int32Array, i, v: number) => (a[i] = v), new Int32Array(values.length));
const dates = (values: (number | null)[]) => fixed(new arrow.DateDay(), values, (a: Int32Array, i, v: number) => (a[i] = v), new Int32Array(values.length));
const longsOf = (type: arrow.DataType, values: (bigint | null)[]) => fixed(type, values, (a: BigInt64Array, i, v: bigint) => (a[i] = v), new BigInt64Array(values.length));
const floats = (values: (number | null)[]) => fixed(new arrow.Float32(), values, (a: Float32Array, i, v: number) => (a[i] = v), new Float32Array(values.length));
const doubles = (values: (number | null)[]) => fixed(new arrow.Float64(), values, (a: Float64Array, i, v: number) => (a[i] = v), new Float64Array(values.length));
const decimals = (values: (bigint | null)[], precision = 10, scale = 2) =>
  fixed(
    new arrow.Decimal(scale, precision, 128),
    values,
    (a: Uint32Array, i, v: bigint) => {
      let u = BigInt.asUintN(128, v);
      for (let w = 0; w < 4; w++, u >>= 32n) a[4 * i + w] = Number(u & 0xffffffffn);
    },
    new Uint32Array(values.length * 4),
  );
const bools = (values: (boolean | null)[]) =>
  fixed(new arrow.Bool(), values, (a: Uint8Array, i, v: boolean) => (a[i >> 3] |= v ? 1 << (i & 7) : 0), new Uint8Array(Math.ceil(values.length / 8) + 8));
const strings = (values: (string | null)[]) => arrow.vectorFromArray(values, new arrow.Utf8()).data[0];
const binaries = (values: (Uint8Array | null)[]) => arrow.vectorFromArray(values, new arrow.Binary()).data[0];

const field = (name: string, type: arrow.DataType, id?: number) => new arrow.Field(name, type, true, id === undefined ? undefined : new Map([['PARQUET:field_id', String(id)]]));

function batchOf(columns: [arrow.Field, arrow.Data][]): arrow.RecordBatch {
  const schema = new arrow.Schema(columns.map(([f]) => f));
  const length = columns[0][1].length;
  return new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(schema.fields), length, nullCount: 0, children: columns.map(([, d]) => d) }));
}

function icebergSchema(fields: [number, string, string][]): IcebergSchema {
  return { type: 'struct', 'schema-id': 0, fields: fields.map(([id, name, type]): IcebergField => ({ id, name, required: false, type })) };
}

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
const bytes = (...b: number[]): Uint8Array => Uint8Array.from(b);

function assertBounds(m: FileMetrics, id: number, type: string, lower: Parameters<typeof toSingleValue>[1] | undefined, upper: Parameters<typeof toSingleValue>[1] | undefined): void {
  assert.deepEqual(m.lowerBounds.get(id), lower === undefined ? undefined : toSingleValue(type, lower), `lower bound of field ${id}`);
  assert.deepEqual(m.upperBounds.get(id), upper === undefined ? undefined : toSingleValue(type, upper), `upper bound of field ${id}`);
}

describe('computeMetrics', () => {
  const schema = icebergSchema([
    [1, 'id', 'int'],
    [2, 'big', 'long'],
    [3, 'f', 'float'],
    [4, 'd', 'double'],
    [5, 'amount', 'decimal(10,2)'],
    [6, 'name', 'string'],
    [7, 'payload', 'binary'],
    [8, 'day', 'date'],
    [9, 't', 'time'],
    [10, 'ts', 'timestamp'],
    [11, 'tstz', 'timestamptz'],
    [12, 'flag', 'boolean'],
  ]);
  const fields = [
    field('id', new arrow.Int32(), 1),
    field('big', new arrow.Int64(), 2),
    field('f', new arrow.Float32(), 3),
    field('d', new arrow.Float64(), 4),
    field('amount', new arrow.Decimal(2, 10, 128), 5),
    field('name', new arrow.Utf8(), 6),
    field('payload', new arrow.Binary(), 7),
    field('day', new arrow.DateDay(), 8),
    field('t', new arrow.TimeMicrosecond(), 9),
    field('ts', new arrow.TimestampMicrosecond(null), 10),
    field('tstz', new arrow.TimestampMicrosecond('UTC'), 11),
    field('flag', new arrow.Bool(), 12),
  ];
  const long16 = 'abcdefghijklmnopqrstuvwxyz'; // 26 characters
  const first = batchOf([
    [fields[0], ints([3, null, -5, 7])],
    [fields[1], longsOf(new arrow.Int64(), [-1n, 2n ** 32n, null, -(2n ** 32n) - 1n])],
    [fields[2], floats([1.5, Number.NaN, null, -2.25])],
    [fields[3], doubles([0, -0, Number.NaN, null])],
    [fields[4], decimals([-1065n, null, 2n ** 40n, -(2n ** 70n)])],
    [fields[5], strings(['m', long16, null, 'zzzzzzzzzzzzzzzzzzzz'])],
    [fields[6], binaries([bytes(5), null, bytes(0, 1), bytes(...new Array(20).fill(7))])],
    [fields[7], dates([17486, -1, null, 0])],
    [fields[8], longsOf(new arrow.TimeMicrosecond(), [81_068_000_000n, null, 1n, 0n])],
    [fields[9], longsOf(new arrow.TimestampMicrosecond(null), [1510871468000001n, -1n, null, 5n])],
    [fields[10], longsOf(new arrow.TimestampMicrosecond('UTC'), [null, null, 10n, 9n])],
    [fields[11], bools([true, null, true, true])],
  ]);
  // Built with a leading row that slicing drops: values, offsets and validity bits then start past 0.
  const second = batchOf([
    [fields[0], ints([-100, 100, null])],
    [fields[1], longsOf(new arrow.Int64(), [-(2n ** 63n), 2n ** 63n - 1n, 4n])],
    [fields[2], floats([-1000, Number.NaN, 0.5])],
    [fields[3], doubles([-1e300, 3, null])],
    [fields[4], decimals([-(2n ** 100n), -3n, 2n ** 41n])],
    [fields[5], strings(['', 'aaa', 'zzzzzzzzzzzzzzzzzzzzz'])],
    [fields[6], binaries([bytes(), bytes(0, 0), null])],
    [fields[7], dates([-1000, 20000, null])],
    [fields[8], longsOf(new arrow.TimeMicrosecond(), [5n, null, 86_399_999_999n])],
    [fields[9], longsOf(new arrow.TimestampMicrosecond(null), [-(2n ** 62n), 2n ** 40n, null])],
    [fields[10], longsOf(new arrow.TimestampMicrosecond('UTC'), [-100n, 11n, null])],
    [fields[11], bools([false, false, null])],
  ]).slice(1);
  const metrics = computeMetrics([first, second], schema);

  it('counts rows, values, nulls and NaNs per field id', () => {
    assert.equal(metrics.recordCount, 6);
    for (const f of schema.fields) assert.equal(metrics.valueCounts.get(f.id), 6, f.name);
    assert.deepEqual(
      schema.fields.map((f) => metrics.nullValueCounts.get(f.id)),
      [2, 1, 1, 2, 1, 1, 2, 2, 2, 2, 3, 2],
    );
    assert.deepEqual([...metrics.nanValueCounts], [
      [3, 2],
      [4, 1],
    ]);
  });

  it('bounds fixed-width columns by the least and greatest non-null value', () => {
    assertBounds(metrics, 1, 'int', -5, 100);
    assertBounds(metrics, 2, 'long', -(2n ** 32n) - 1n, 2n ** 63n - 1n);
    assertBounds(metrics, 8, 'date', -1, 20000);
    assertBounds(metrics, 9, 'time', 0n, 86_399_999_999n);
    assertBounds(metrics, 10, 'timestamp', -1n, 1510871468000001n);
    assertBounds(metrics, 11, 'timestamptz', 9n, 11n);
    assertBounds(metrics, 12, 'boolean', false, true);
  });

  it('leaves NaN out of float bounds and puts -0.0 below +0.0', () => {
    assertBounds(metrics, 3, 'float', -2.25, 1.5);
    assertBounds(metrics, 4, 'double', -0, 3);
    const zeros = computeMetrics([batchOf([[field('d', new arrow.Float64(), 4), doubles([0, -0])]])], icebergSchema([[4, 'd', 'double']]));
    assert.deepEqual(zeros.lowerBounds.get(4), Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0x80]));
    assert.deepEqual(zeros.upperBounds.get(4), new Uint8Array(8));
  });

  it('compares decimals as signed 128-bit values, negatives included', () => {
    assertBounds(metrics, 5, 'decimal(10,2)', -(2n ** 70n), 2n ** 41n);
    const negatives = computeMetrics([batchOf([[field('a', new arrow.Decimal(2, 38, 128), 5), decimals([-5n, -(10n ** 37n), -1n, -(2n ** 64n)], 38)]])], icebergSchema([[5, 'a', 'decimal(38,2)']]));
    assertBounds(negatives, 5, 'decimal(38,2)', -(10n ** 37n), -1n);
  });

  it('truncates string bounds to 16 code points, incrementing the upper one', () => {
    // Min 'aaa' (the sliced-off '' does not count), max 21 'z': upper = 15 'z' then '{' ('z' + 1).
    assertBounds(metrics, 6, 'string', 'aaa', 'zzzzzzzzzzzzzzz{');
    const m = computeMetrics([batchOf([[field('s', new arrow.Utf8(), 6), strings([long16, 'b'])]])], icebergSchema([[6, 's', 'string']]));
    assertBounds(m, 6, 'string', long16.slice(0, 16), 'b');
  });

  it('truncates binary bounds to 16 bytes, incrementing the upper one', () => {
    assertBounds(metrics, 7, 'binary', bytes(0, 0), Uint8Array.from([...new Array(15).fill(7), 8]));
    const carry = computeMetrics(
      [batchOf([[field('b', new arrow.Binary(), 7), binaries([Uint8Array.from([...new Array(14).fill(1), 0xff, 0xff, 0xff]), bytes(0)])]])],
      icebergSchema([[7, 'b', 'binary']]),
    );
    assertBounds(carry, 7, 'binary', bytes(0), Uint8Array.from(new Array(14).fill(1).map((b, i) => (i === 13 ? 2 : b))));
    const allFF = computeMetrics([batchOf([[field('b', new arrow.Binary(), 7), binaries([new Uint8Array(17).fill(0xff)])]])], icebergSchema([[7, 'b', 'binary']]));
    assertBounds(allFF, 7, 'binary', new Uint8Array(16).fill(0xff), undefined);
  });

  it('counts code points, not UTF-16 units, and carries past U+10FFFF and around surrogates', () => {
    const schemaS = icebergSchema([[1, 's', 'string']]);
    const run = (values: string[]) => computeMetrics([batchOf([[field('s', new arrow.Utf8(), 1), strings(values)]])], schemaS);
    const emoji = '😀'.repeat(20);
    assertBounds(run([emoji]), 1, 'string', '😀'.repeat(16), `${'😀'.repeat(15)}😁`);
    const top = String.fromCodePoint(0x10ffff);
    assertBounds(run([`${'a'.repeat(15)}${top}xyz`]), 1, 'string', `${'a'.repeat(15)}${top}`, `${'a'.repeat(14)}b`);
    assertBounds(run([top.repeat(17)]), 1, 'string', top.repeat(16), undefined);
    const beforeSurrogates = String.fromCodePoint(0xd7ff);
    assertBounds(run([`${'a'.repeat(15)}${beforeSurrogates}z`]), 1, 'string', `${'a'.repeat(15)}${beforeSurrogates}`, `${'a'.repeat(15)}${String.fromCodePoint(0xe000)}`);
    // UTF-8 byte order is code point order: U+FF61 (EF BD A1) < U+1F600 (F0 9F 98 80), though UTF-16 orders them the other way.
    assertBounds(run(['😀', '｡']), 1, 'string', '｡', '😀');
  });

  it('gives all-null and all-NaN columns counts but no bounds', () => {
    const m = computeMetrics(
      [batchOf([[field('d', new arrow.Float64(), 1), doubles([null, Number.NaN])], [field('s', new arrow.Utf8(), 2), strings([null, null])]])],
      icebergSchema([
        [1, 'd', 'double'],
        [2, 's', 'string'],
      ]),
    );
    assert.equal(m.nanValueCounts.get(1), 1);
    assert.equal(m.nullValueCounts.get(2), 2);
    assert.equal(m.lowerBounds.size + m.upperBounds.size, 0);
  });

  it('matches columns by field id, else by name, and skips fields the batches lack', () => {
    const b = batchOf([
      [field('renamed', new arrow.Int32(), 1), ints([4])],
      [field('by_name', new arrow.Int32()), ints([9])],
      [field('extra', new arrow.Int32(), 99), ints([1])],
    ]);
    const m = computeMetrics(
      [b],
      icebergSchema([
        [1, 'id', 'int'],
        [2, 'by_name', 'int'],
        [3, 'missing', 'int'],
      ]),
    );
    assert.deepEqual([...m.valueCounts.keys()], [1, 2]);
    assertBounds(m, 1, 'int', 4, 4);
    assertBounds(m, 2, 'int', 9, 9);
  });

  it('encodes bounds in the field\'s Iceberg type', () => {
    // An Int32 column of a long field (a promoted column) gets 8-byte bounds.
    const m = computeMetrics([batchOf([[field('x', new arrow.Int32(), 1), ints([-2, 3])]])], icebergSchema([[1, 'x', 'long']]));
    assertBounds(m, 1, 'long', -2n, 3n);
  });

  it('refuses a column held as different Arrow types in different batches', () => {
    const a = batchOf([[field('x', new arrow.Int32(), 1), ints([1])]]);
    const b = batchOf([[field('x', new arrow.Int64(), 1), longsOf(new arrow.Int64(), [1n])]]);
    assert.throws(() => computeMetrics([a, b], icebergSchema([[1, 'x', 'long']])), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT');
  });

  it('refuses time columns in another unit than the field\'s', () => {
    const b = batchOf([[field('ts', new arrow.TimestampMillisecond(), 1), longsOf(new arrow.TimestampMillisecond(), [1n])]]);
    assert.throws(() => computeMetrics([b], icebergSchema([[1, 'ts', 'timestamp']])), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT');
  });
});
