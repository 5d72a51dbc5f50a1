import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import * as arrow from 'apache-arrow';
import { CompactedRowDecoder, CompactedRowEncoder } from '../common/row-encoder.js';
import { addColumns, buildSchema } from '../common/schema.js';
import { type Row, RowReader, Timestamp } from '../common/values.js';
import { decodeArrowPayload, encodeArrowPayload, recordBatchRows } from './arrow-payload.js';
import { toArrowSchema } from './arrow-schema.js';
import { ColumnBatchBuilder } from './column-batch-builder.js';
import { initArrowCompression } from './compression.js';
import { sampleRows, sampleSchema } from './fixtures/sample.js';

function built(rows: Row[], schema = sampleSchema): arrow.RecordBatch {
  const b = new ColumnBatchBuilder(schema);
  for (const r of rows) b.appendRow(r);
  return b.build();
}

/** Every buffer of every column, to check that none is shared. */
function buffersOf(batch: arrow.RecordBatch): ArrayBuffer[] {
  return batch.data.children.flatMap((d) => [d.values, d.valueOffsets, d.nullBitmap].filter((b) => b && b.byteLength > 0).map((b) => b!.buffer as ArrayBuffer));
}

before(() => initArrowCompression());

describe('ColumnBatchBuilder', () => {
  it('builds every type, extremes and nulls included, and reads them back', () => {
    const batch = built(sampleRows);
    assert.equal(batch.numRows, sampleRows.length);
    assert.deepEqual(recordBatchRows(batch, sampleSchema), sampleRows);
  });

  it('stores values the way Arrow defines them', () => {
    const batch = built(sampleRows);
    const col = (name: string): arrow.Data => batch.getChild(name)!.data[0];
    // Decimal128: little-endian two's complement in four 32-bit words.
    assert.deepEqual([...col('dec10').values.subarray(0, 4)], [0xabf41c01, 0xfffffffd, 0xffffffff, 0xffffffff]); // -9999999999
    assert.deepEqual([...col('dec38').values.subarray(12, 16)], [1, 0, 0, 0]); // 1e-10 at scale 10
    // Microseconds in int64; days in int32; UTF-8 with int32 offsets.
    assert.equal(col('ts').values[0], -(2n ** 63n));
    assert.equal(col('ltz').values[1], 1_700_000_000_123_000n);
    assert.equal(col('t').values[1], 86_399_999_999n);
    assert.equal(col('d').values[0], -1);
    assert.equal(batch.getChild('d')!.get(1), Date.UTC(2024, 1, 29));
    assert.equal(batch.getChild('s')!.get(1), 'héllo wörld, 漢字, 𝄞 😀');
    assert.equal(batch.getChild('i64')!.get(1), 2n ** 63n - 1n);
    assert.deepEqual(col('s').valueOffsets.subarray(0, 2), new Int32Array([0, 0]));
    // Validity: row 2 is the null row; BIGINT (NOT NULL) has no bitmap at all.
    assert.equal(col('b').nullCount, 1);
    assert.deepEqual([0, 1, 2, 3].map((i) => col('b').getValid(i)), [true, true, false, true]);
    assert.equal(col('i64').nullCount, 0);
    assert.equal(col('i64').nullBitmap?.length ?? 0, 0);
  });

  it('keeps every column and every batch in memory of its own', () => {
    const b = new ColumnBatchBuilder(sampleSchema);
    sampleRows.forEach((r) => b.appendRow(r));
    const first = b.build();
    sampleRows.forEach((r) => b.appendRow(r));
    const second = b.build();
    const all = [...buffersOf(first), ...buffersOf(second)];
    assert.equal(new Set(all).size, all.length);
    assert.deepEqual(recordBatchRows(first, sampleSchema), recordBatchRows(second, sampleSchema));
  });

  it('builds empty batches', () => {
    const batch = new ColumnBatchBuilder(sampleSchema).build();
    assert.equal(batch.numRows, 0);
    assert.equal(batch.numCols, sampleSchema.columns.length);
    for (const compression of ['NONE', 'ZSTD', 'LZ4_FRAME'] as const) {
      assert.equal(decodeArrowPayload(toArrowSchema(sampleSchema), encodeArrowPayload(batch, compression)).numRows, 0);
    }
  });

  it('builds columns that are all null, across bitmap byte boundaries', () => {
    const rows: Row[] = Array.from({ length: 19 }, (_, i) => ({ i64: BigInt(i) }));
    const batch = built(rows);
    for (const name of ['b', 's', 'dec38', 'bin', 'ts']) assert.equal(batch.getChild(name)!.nullCount, 19, name);
    const expected = rows.map((r) => Object.fromEntries(sampleSchema.columns.map((c) => [c.name, r[c.name] ?? null])));
    assert.deepEqual(recordBatchRows(decodeArrowPayload(toArrowSchema(sampleSchema), encodeArrowPayload(batch, 'NONE')), sampleSchema), expected);
  });

  it('starts a bitmap at the first null after many values', () => {
    const schema = buildSchema([{ name: 'v', type: 'INT' }]);
    const values = Array.from({ length: 100 }, (_, i) => (i === 77 || i === 99 ? null : i));
    const batch = built(values.map((v) => ({ v })), schema);
    assert.deepEqual([...batch.getChild('v')!], values);
  });

  it('converts user values as appendRow documents (truncating to the column precision)', () => {
    const schema = buildSchema([
      { name: 'ts', type: 'TIMESTAMP(3)' },
      { name: 't', type: 'TIME(0)' },
      { name: 'dec', type: 'DECIMAL(5, 2)' },
      { name: 'd', type: 'DATE' },
    ]);
    const batch = built([{ ts: '2024-01-02 03:04:05.678912', t: '01:02:03.999', dec: 12.5, d: new Date(Date.UTC(2000, 0, 1)) }], schema);
    assert.deepEqual(recordBatchRows(batch, schema), [{ ts: Timestamp.parse('2024-01-02T03:04:05.678Z'), t: '01:02:03', dec: '12.50', d: '2000-01-01' }]);
  });

  it('rejects bad rows with INVALID_ROW and keeps what it had', () => {
    const b = new ColumnBatchBuilder(sampleSchema);
    b.appendRow(sampleRows[0]);
    const size = b.estimatedSizeInBytes;
    const bad: Row[] = [
      { ...sampleRows[1], i64: null }, // NOT NULL
      { ...sampleRows[1], nope: 1 }, // unknown column
      { ...sampleRows[1], i8: 128 }, // out of range, after columns that were fine
      { ...sampleRows[1], ltz: 'yesterday' },
      { ...sampleRows[1], dec10: '123456789.1' }, // too many digits
      { ...sampleRows[1], c: 'abcde' }, // longer than CHAR(4)
      { ...sampleRows[1], bin: new Uint8Array(4) }, // not BINARY(3)
    ];
    for (const row of bad) assert.throws(() => b.appendRow(row), { errorName: 'INVALID_ROW' }, JSON.stringify(Object.keys(row)));
    assert.throws(() => b.appendRow(null as unknown as Row), { errorName: 'INVALID_ROW' });
    assert.equal(b.rowCount, 1);
    assert.equal(b.estimatedSizeInBytes, size);
    b.appendRow(sampleRows[1]);
    assert.deepEqual(recordBatchRows(b.build(), sampleSchema), sampleRows.slice(0, 2));
  });

  it('appends internal rows as given', () => {
    const schema = buildSchema([{ name: 'dec', type: 'DECIMAL(20, 2)' }, { name: 't', type: 'TIME(6)' }, { name: 's', type: 'STRING' }]);
    const b = new ColumnBatchBuilder(schema);
    b.appendInternalRow([-12345n, 1_000_001, 'a']);
    b.appendInternalRow([null, null, null]);
    assert.throws(() => b.appendInternalRow([1n]), { errorName: 'INVALID_ROW' });
    assert.deepEqual(recordBatchRows(b.build(), schema), [
      { dec: '-123.45', t: '00:00:01.000001', s: 'a' },
      { dec: null, t: null, s: null },
    ]);
  });

  it('estimates the uncompressed payload size', () => {
    const b = new ColumnBatchBuilder(sampleSchema);
    let last = b.estimatedSizeInBytes;
    for (let i = 0; i < 500; i++) {
      b.appendRow(sampleRows[i % sampleRows.length]);
      assert.ok(b.estimatedSizeInBytes >= last);
      last = b.estimatedSizeInBytes;
    }
    const actual = encodeArrowPayload(b.build(), 'NONE').length;
    assert.ok(Math.abs(last - actual) <= actual * 0.05, `estimated ${last}, encoded ${actual}`);
    assert.ok(b.estimatedSizeInBytes < 2000, 'the estimate restarts with the batch');
  });
});

describe('ColumnBatchBuilder.appendColumns', () => {
  const schema = buildSchema([
    { name: 'id', type: 'BIGINT', nullable: false },
    { name: 'x', type: 'DOUBLE' },
    { name: 'day', type: 'DATE' },
    { name: 'ts', type: 'TIMESTAMP_LTZ(6)' },
    { name: 'name', type: 'STRING' },
  ]);

  it('copies typed arrays of the column type and converts plain arrays of user values', () => {
    const b = new ColumnBatchBuilder(schema);
    b.appendRow({ id: 0n, name: 'first' });
    b.appendColumns({
      id: new BigInt64Array([1n, 2n, 3n]),
      x: new Float64Array([0.5, -1, Number.NaN]),
      day: new Int32Array([0, 1, -1]),
      ts: new BigInt64Array([1n, -1n, 2n ** 62n]),
      name: ['a', null, 'ü'],
    });
    b.appendColumns({ id: [4, '5'], x: [1.25, null], ts: ['1970-01-01T00:00:00.000001Z', null] });
    assert.deepEqual(recordBatchRows(b.build(), schema), [
      { id: 0n, x: null, day: null, ts: null, name: 'first' },
      { id: 1n, x: 0.5, day: '1970-01-01', ts: new Timestamp(1n), name: 'a' },
      { id: 2n, x: -1, day: '1970-01-02', ts: new Timestamp(-1n), name: null },
      { id: 3n, x: Number.NaN, day: '1969-12-31', ts: new Timestamp(2n ** 62n), name: 'ü' },
      { id: 4n, x: 1.25, day: null, ts: new Timestamp(1n), name: null },
      { id: 5n, x: null, day: null, ts: null, name: null },
    ]);
  });

  it('copies Arrow vectors of the column type, nulls included', () => {
    const source = new ColumnBatchBuilder(schema);
    sampleNames().forEach((name, i) => source.appendRow({ id: BigInt(i), name, ts: i % 2 ? null : BigInt(i) }));
    const batch = source.build();
    const b = new ColumnBatchBuilder(schema);
    b.appendColumns({ id: batch.getChild('id')!, ts: batch.getChild('ts')!, name: batch.getChild('name')! });
    assert.deepEqual(recordBatchRows(b.build(), schema), recordBatchRows(batch, schema));
  });

  it('rejects what does not fit and appends nothing then', () => {
    const b = new ColumnBatchBuilder(schema);
    b.appendRow({ id: 9n });
    const cases: Record<string, ArrayLike<unknown> | arrow.Vector>[] = [
      { id: [1n, 2n], name: ['a'] }, // lengths differ
      { x: [1] }, // NOT NULL id missing
      { id: [1n], nope: [1] },
      { id: [1n, 2n], x: [1, 'two'] },
      { id: [1n, null] },
      { id: new Int32Array([1]) }, // not BIGINT's own array, and INT values are fine as user values...
      { id: arrow.vectorFromArray([1, 2], new arrow.Int32()) }, // ...but an Arrow vector must have the column type
      { id: arrow.vectorFromArray([1n, null], new arrow.Int64()) }, // nulls in a NOT NULL column
    ];
    const errors = cases.map((c) => {
      try {
        b.appendColumns(c);
        return 'appended';
      } catch (err) {
        return (err as { errorName?: string }).errorName;
      }
    });
    assert.deepEqual(errors, ['INVALID_ROW', 'INVALID_ROW', 'INVALID_ROW', 'INVALID_ROW', 'INVALID_ROW', 'appended', 'INVALID_ROW', 'INVALID_ROW']);
    assert.equal(b.rowCount, 2);
    assert.deepEqual(recordBatchRows(b.build(), schema).map((r) => r.id), [9n, 1n]);
  });
});

function sampleNames(): (string | null)[] {
  return ['a', null, '', 'ünïcödé', 'x'.repeat(100), null, 'z', '漢', 'q', 'last'];
}

describe('ColumnBatchBuilder.appendColumns of strings', () => {
  const schema = buildSchema([
    { name: 's', type: 'STRING' },
    { name: 'c', type: 'CHAR(2)' },
    { name: 'req', type: 'STRING', nullable: false },
  ]);
  /** A string built by concatenation, as V8 keeps it: a tree of parts until something flattens it. */
  const concatenated = (parts: string[]): string => parts.reduce((a, b) => a + b, '');

  /** The same columns appended row by row: the reference for the bytes and the rows. */
  function byRows(columns: Record<string, unknown[]>[]): arrow.RecordBatch {
    const b = new ColumnBatchBuilder(schema);
    for (const chunk of columns) {
      for (let r = 0; r < chunk.req.length; r++) b.appendRow(Object.fromEntries(Object.entries(chunk).map(([name, values]) => [name, values[r]])));
    }
    return b.build();
  }

  it('encodes ASCII and other strings, nulls and concatenated strings as appendRow does', () => {
    const chunks: Record<string, unknown[]>[] = [
      { s: ['a', 'bc', '', null, 'def'], c: ['x', null, 'yz', '', 'q'], req: ['1', '2', '3', '4', '5'] },
      { s: ['ü', 'a', '漢字', '😀', undefined], c: ['é', '😀', 'ab', null, 'ä€'], req: ['x', concatenated(['one ', 'two ', 'three ', 'four']), '\ud800', '', 'z'] },
      { s: [concatenated(['abcdefgh', 'ijklmnop', 'qrstuvwx']), null], c: [null, null], req: ['', ''] },
    ];
    const b = new ColumnBatchBuilder(schema);
    for (const chunk of chunks) b.appendColumns(chunk);
    const batch = b.build();
    const expected = byRows(chunks);
    assert.deepEqual(recordBatchRows(batch, schema), recordBatchRows(expected, schema));
    for (const name of ['s', 'c', 'req']) {
      const [got, want] = [batch.getChild(name)!.data[0], expected.getChild(name)!.data[0]];
      assert.deepEqual(got.valueOffsets, want.valueOffsets, name);
      assert.deepEqual(got.values, want.values, name);
      assert.equal(got.nullCount, want.nullCount, name);
    }
    assert.deepEqual(recordBatchRows(decodeArrowPayload(toArrowSchema(schema), encodeArrowPayload(batch, 'NONE')), schema), recordBatchRows(expected, schema));
  });

  it('checks every string before appending any', () => {
    const b = new ColumnBatchBuilder(schema);
    b.appendColumns({ req: ['kept'], c: ['😀'] }); // one character of two UTF-16 units
    const bad: Record<string, unknown[]>[] = [
      { req: ['a', 'b'], c: ['ok', 'abc'] }, // CHAR(2) is two characters at most
      { req: ['a', 'b'], c: ['😀😀😀', null] },
      { req: ['a', 7] },
      { req: ['a', null] },
      { req: ['a'], s: [new Uint8Array(1)] },
    ];
    for (const columns of bad) assert.throws(() => b.appendColumns(columns), { errorName: 'INVALID_ROW' }, JSON.stringify(columns));
    b.appendColumns({ req: ['b'], c: ['😀😀'] });
    assert.deepEqual(recordBatchRows(b.build(), schema), [
      { s: null, c: '😀', req: 'kept' },
      { s: null, c: '😀😀', req: 'b' },
    ]);
  });
});

describe('ColumnBatchBuilder.buildTransient', () => {
  it('lends its buffers to the batch and reuses them for the next one', () => {
    const b = new ColumnBatchBuilder(sampleSchema);
    const arrowSchema = toArrowSchema(sampleSchema);
    // Rounds with and without nulls and with fewer rows than before: nothing of a round may show through in the next.
    const rounds = [sampleRows, sampleRows.slice(1, 2), [...sampleRows, ...sampleRows], [{ i64: 1n }], sampleRows.slice(0, 1)];
    const valueBuffers: ArrayBufferLike[] = [];
    for (const rows of rounds) {
      rows.forEach((r) => b.appendRow(r));
      const batch = b.buildTransient();
      valueBuffers.push(batch.getChild('i64')!.data[0].values.buffer);
      if (rows[0].f64 === undefined) assert.equal(batch.getChild('f64')!.data[0].values[0], 0, 'a null is stored as zeros, not as what the slot held before');
      const expected = rows.map((r) => Object.fromEntries(sampleSchema.columns.map((c) => [c.name, r[c.name] ?? null])));
      for (const compression of ['NONE', 'ZSTD'] as const) {
        assert.deepEqual(recordBatchRows(decodeArrowPayload(arrowSchema, encodeArrowPayload(batch, compression)), sampleSchema), expected);
      }
      assert.equal(b.rowCount, 0);
    }
    assert.equal(valueBuffers[1], valueBuffers[0], 'the values of the second batch are written where the first ones were');
    b.appendRow(sampleRows[0]);
    assert.notEqual(b.build().getChild('i64')!.data[0].values.buffer, b.buildTransient().getChild('i64')!.data[0].values.buffer, 'build() hands its buffers off');
  });
});

describe('ColumnBatchBuilder.buildToEncode', () => {
  it('lends its buffers to a batch up to the size it keeps, and gives a larger one buffers of its own', () => {
    const b = new ColumnBatchBuilder(sampleSchema);
    const i64Buffer = (batch: arrow.RecordBatch): ArrayBufferLike => batch.getChild('i64')!.data[0].values.buffer;
    b.appendRow(sampleRows[0]);
    const kept = b.estimatedSizeInBytes;
    const first = i64Buffer(b.buildToEncode(kept));
    b.appendRow(sampleRows[1]);
    assert.equal(i64Buffer(b.buildToEncode(kept)), first, 'a batch within the size is transient');
    sampleRows.forEach((r) => b.appendRow(r));
    const large = b.buildToEncode(kept);
    // The next batches write into the builder's memory; the larger one keeps its rows.
    [...sampleRows].reverse().forEach((r) => b.appendRow(r));
    b.buildToEncode(Infinity);
    assert.deepEqual(recordBatchRows(large, sampleSchema), recordBatchRows(built(sampleRows), sampleSchema));
  });
});

describe('ColumnBatchBuilder.appendRecordBatch', () => {
  it('appends decoded batches and slices of them', () => {
    const full = built(sampleRows);
    const b = new ColumnBatchBuilder(sampleSchema);
    b.appendRecordBatch(decodeArrowPayload(toArrowSchema(sampleSchema), encodeArrowPayload(full, 'ZSTD')));
    b.appendRecordBatch(full.slice(1, 4)); // offsets into bits, validity and string offsets
    b.appendRecordBatch(full.slice(3, 4));
    assert.deepEqual(recordBatchRows(b.build(), sampleSchema), [...sampleRows, ...sampleRows.slice(1, 4), sampleRows[3]]);
    assert.deepEqual(recordBatchRows(full.slice(1, 4), sampleSchema), sampleRows.slice(1, 4));
  });

  it('appends batches built elsewhere with the same Arrow types', () => {
    const schema = buildSchema([{ name: 'id', type: 'BIGINT' }, { name: 'ts', type: 'TIMESTAMP(6)' }, { name: 'ok', type: 'BOOLEAN' }]);
    const batch = new arrow.RecordBatch({
      id: arrow.vectorFromArray([1n, null, 3n], new arrow.Int64()).data[0],
      ts: arrow.makeData({ type: new arrow.TimestampMicrosecond(), length: 3, data: new BigInt64Array([5n, 6n, 7n]) }),
      ok: arrow.vectorFromArray([true, false, null], new arrow.Bool()).data[0],
    });
    const b = new ColumnBatchBuilder(schema);
    b.appendRecordBatch(batch);
    assert.deepEqual(recordBatchRows(b.build(), schema), [
      { id: 1n, ts: new Timestamp(5n), ok: true },
      { id: null, ts: new Timestamp(6n), ok: false },
      { id: 3n, ts: new Timestamp(7n), ok: null },
    ]);
  });

  it('rejects batches whose columns differ from the schema', () => {
    const schema = buildSchema([{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'name', type: 'STRING' }]);
    const b = new ColumnBatchBuilder(schema);
    const data = <T extends arrow.DataType>(values: unknown[], type: T): arrow.Data<T> => arrow.vectorFromArray(values, type).data[0];
    const id = data([1n], new arrow.Int64());
    const name = data(['a'], new arrow.Utf8());
    const bad = [
      new arrow.RecordBatch({ id }),
      new arrow.RecordBatch({ name, id }),
      new arrow.RecordBatch({ id, label: name }),
      new arrow.RecordBatch({ id: data([1], new arrow.Int32()), name }),
      new arrow.RecordBatch({ id, name: data(['a'], new arrow.LargeUtf8()) }),
      new arrow.RecordBatch({ id: data([null], new arrow.Int64()), name }),
    ];
    for (const batch of bad) assert.throws(() => b.appendRecordBatch(batch), { errorName: 'INVALID_ROW' }, batch.schema.toString());
    assert.throws(() => b.appendRecordBatch(bad[3]), /column 'id' \(BIGINT\) needs Arrow type Int64, got Int32/);
    assert.equal(b.rowCount, 0);
    b.appendRecordBatch(new arrow.RecordBatch({ id, name }));
    assert.deepEqual(recordBatchRows(b.build(), schema), [{ id: 1n, name: 'a' }]);
  });
});

describe('ColumnBatchBuilder.appendCompactedRow', () => {
  // The sample types, and those whose compacted encoding differs from theirs: millisecond times
  // and timestamps, timestamps with nanoseconds below 6 digits, compact decimals at their bound.
  const schema = addColumns(sampleSchema, [
    { name: 't0', type: 'TIME(0)' },
    { name: 't3', type: 'TIME(3)' },
    { name: 'ts3', type: 'TIMESTAMP(3)' },
    { name: 'ltz4', type: 'TIMESTAMP_LTZ(4)' },
    { name: 'dec18', type: 'DECIMAL(18, 4)' },
  ]);
  const types = schema.columns.map((c) => c.type);
  const rowReader = new RowReader(schema.columns);
  const encoder = new CompactedRowEncoder(types);
  const decoder = new CompactedRowDecoder(types);
  const extras: Row[] = [
    { t0: '23:59:59', t3: '00:00:00.001', ts3: new Timestamp(-1_000n), ltz4: new Timestamp(1_700_000_000_123_400n), dec18: '-99999999999999.9999' },
    { t0: '00:00:00', t3: '12:00:00.999', ts3: new Timestamp(1_000n), ltz4: new Timestamp(-100n), dec18: '99999999999999.9999' },
    {},
    { t0: '01:02:03', ltz4: new Timestamp(0n), dec18: '0.0001' },
  ];
  /** The sample rows and more, 41 of them (bitmaps over several bytes), as CompactedRows. */
  const rows: Uint8Array[] = Array.from({ length: 41 }, (_, i) => {
    const row: Row = { ...sampleRows[i % sampleRows.length], ...extras[i % extras.length], i64: BigInt(i) * 1_000_000_007n };
    if (i % 5 === 1) row.f32 = Number.NaN;
    if (i % 7 === 3) row.s = null;
    return encoder.encode(rowReader.read(row));
  });

  /** The payload of a batch, uncompressed: equal bytes, equal Arrow data. */
  const payloadOf = (batch: arrow.RecordBatch): Buffer => Buffer.from(encodeArrowPayload(batch, 'NONE'));

  /** The batch of `rows` appended through their JS values. */
  function throughValues(rows: readonly Uint8Array[], of = schema): arrow.RecordBatch {
    const b = new ColumnBatchBuilder(of);
    const rowDecoder = new CompactedRowDecoder(of.columns.map((c) => c.type));
    for (const r of rows) b.appendInternalRow(rowDecoder.decode(r));
    return b.build();
  }

  it('gives exactly the Arrow data appendInternalRow gives for the decoded row, for every type', () => {
    const b = new ColumnBatchBuilder(schema);
    for (const r of rows) b.appendCompactedRow(r);
    const batch = b.build();
    assert.deepEqual(payloadOf(batch), payloadOf(throughValues(rows)));
    assert.deepEqual(recordBatchRows(batch, schema).slice(0, 4).map((r) => r.s), ['', 'héllo wörld, 漢字, 𝄞 😀', null, null]);
  });

  it('reads a row from where it starts in a larger buffer, such as a KV value', () => {
    const b = new ColumnBatchBuilder(schema);
    for (const r of rows) {
      const value = new Uint8Array(3 + r.length);
      value.set(r, 3);
      b.appendCompactedRow(value, 3);
    }
    assert.deepEqual(payloadOf(b.build()), payloadOf(throughValues(rows)));
  });

  it('mixes with the other appends and reuses its buffers across transient batches', () => {
    const b = new ColumnBatchBuilder(schema);
    const reference = new ColumnBatchBuilder(schema);
    for (const round of [rows, rows.slice(2, 5), rows.slice(0, 1), rows]) {
      round.forEach((r, i) => {
        if (i % 3 === 0) b.appendInternalRow(decoder.decode(r));
        else b.appendCompactedRow(r);
        reference.appendInternalRow(decoder.decode(r));
      });
      assert.deepEqual(payloadOf(b.buildTransient()), payloadOf(reference.build()));
    }
  });

  it('writes strings that are not well-formed UTF-8 as their decoded JS strings do', () => {
    const of = buildSchema([{ name: 's', type: 'STRING' }, { name: 'c', type: 'CHAR(2)' }]);
    const texts = [
      [0x61, 0xff, 0x62], // a byte that never starts a character
      [0xc3, 0x28], // a lead byte without its continuation
      [0xed, 0xa0, 0x80], // a UTF-16 surrogate
      [0xc0, 0x80], // an overlong NUL
      [0x61, 0xe2, 0x82], // cut short at the end
      [0xf0, 0x9f, 0x98, 0x80], // well formed: 😀
    ];
    const bad = texts.map((bytes) => Uint8Array.from([0, bytes.length, ...bytes, 2, 0x78, 0xc3]));
    const b = new ColumnBatchBuilder(of);
    for (const r of bad) b.appendCompactedRow(r);
    const batch = b.build();
    assert.deepEqual(payloadOf(batch), payloadOf(throughValues(bad, of)));
    assert.equal(batch.getChild('s')!.get(0), 'a\ufffdb');
  });

  it('refuses a row that does not decode as CompactedRowDecoder does, keeping what it had', () => {
    const b = new ColumnBatchBuilder(schema);
    for (const r of rows.slice(0, 9)) b.appendCompactedRow(r);
    const size = b.estimatedSizeInBytes;
    const broken: Uint8Array[] = [];
    // Every truncation of rows with and without nulls (the null row starts a bitmap), and a trailing byte.
    for (const r of [rows[1], rows[2]]) {
      for (let len = 0; len < r.length; len++) broken.push(r.subarray(0, len));
      broken.push(Uint8Array.from([...r, 0]));
    }
    // A value outside its type: 2 as the first column's boolean, right after the null bits.
    const badBoolean = Uint8Array.from(rows[3]);
    badBoolean[(schema.columns.length + 7) >> 3] = 2;
    broken.push(badBoolean);
    for (const r of broken) {
      assert.throws(() => decoder.decode(r), { errorName: 'CORRUPT_MESSAGE' });
      assert.throws(() => b.appendCompactedRow(r), { errorName: 'CORRUPT_MESSAGE' }, `${r.length} bytes`);
    }
    assert.equal(b.rowCount, 9);
    assert.equal(b.estimatedSizeInBytes, size);
    for (const r of rows.slice(9)) b.appendCompactedRow(r);
    assert.deepEqual(payloadOf(b.build()), payloadOf(throughValues(rows)));
  });
});

describe('ColumnBatchBuilder field by field', () => {
  const schema = buildSchema([
    { name: 'bin', type: 'BYTES' },
    { name: 's', type: 'STRING' },
    { name: 'ltz', type: 'TIMESTAMP_LTZ(3)' },
  ]);
  const source = Buffer.concat([Buffer.from('héllo'), Buffer.from([0x61, 0xff, 0x62]), Buffer.alloc(100, 0x7a)]);
  /** [start, end) of `source` per row and column, null for null: short, not UTF-8, long (a native copy), empty. */
  const spans: ([number, number] | null)[][] = Array.from({ length: 21 }, (_, i) => [
    i % 4 === 3 ? null : [[0, 6], [6, 9], [9, 109], [3, 3]][i % 4] as [number, number],
    i % 5 === 2 ? null : [[6, 9], [0, 6], [9, 109], [5, 5], [0, 109]][i % 5] as [number, number],
  ]);
  const micros = (i: number): bigint | null => (i % 6 === 5 ? null : 1_700_000_000_000_000n + BigInt(i) * 1000n);
  const payloadOf = (batch: arrow.RecordBatch): Buffer => Buffer.from(encodeArrowPayload(batch, 'NONE'));

  function throughRows(count: number): arrow.RecordBatch {
    const b = new ColumnBatchBuilder(schema);
    for (let i = 0; i < count; i++) {
      const [bin, s] = spans[i].map((span) => (span === null ? null : source.subarray(...span)));
      b.appendInternalRow([bin, s === null ? null : s.toString('utf8'), micros(i)]);
    }
    return b.build();
  }

  function appendFields(b: ColumnBatchBuilder, from: number, to: number): void {
    for (let i = from; i < to; i++) {
      spans[i].forEach((span, column) => (span === null ? b.appendValue(column, null) : b.appendBytes(column, source, ...span)));
      b.appendValue(2, micros(i));
      b.endRow();
    }
  }

  it('gives exactly the Arrow data appendInternalRow gives, through transient batches too', () => {
    const b = new ColumnBatchBuilder(schema);
    for (const count of [spans.length, 3, 1, spans.length]) {
      appendFields(b, 0, count);
      assert.equal(b.rowCount, count);
      assert.deepEqual(payloadOf(b.buildTransient()), payloadOf(throughRows(count)));
    }
    appendFields(b, 0, 2);
    assert.equal(b.build().getChild('s')!.get(1), 'héllo');
  });

  it('refuses bytes for a column of another type and a row without exactly one value per column', () => {
    const b = new ColumnBatchBuilder(schema);
    assert.throws(() => b.appendBytes(2, source, 0, 8), { errorName: 'INVALID_ROW', message: /column 'ltz' \(TIMESTAMP_LTZ\(3\)\) does not take bytes/ });
    b.appendBytes(0, source, 0, 1);
    b.appendValue(1, null);
    assert.throws(() => b.endRow(), /column 'ltz' has 0 values of a row/);
    b.appendValue(2, 0n);
    b.appendValue(2, 0n);
    assert.throws(() => b.endRow(), /column 'ltz' has 2 values of a row/);
    assert.equal(b.rowCount, 0);
  });

  it('truncate takes back whole rows and a row left unended, nulls and bitmaps included', () => {
    const b = new ColumnBatchBuilder(schema);
    appendFields(b, 0, 7);
    const size = b.estimatedSizeInBytes;
    // Rows with values and nulls where the kept ones have none, and half a row.
    appendFields(b, 7, 19);
    b.appendBytes(0, source, 9, 109);
    b.appendValue(1, null);
    b.truncate(7);
    assert.equal(b.rowCount, 7);
    assert.equal(b.estimatedSizeInBytes, size);
    assert.throws(() => b.truncate(8), RangeError);
    appendFields(b, 7, spans.length);
    assert.deepEqual(payloadOf(b.build()), payloadOf(throughRows(spans.length)));
  });
});
