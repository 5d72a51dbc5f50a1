import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TributaryError } from './errors.js';
import { CompactedKeyEncoder, encodeKey } from './key-encoder.js';
import { CompactedRowDecoder, CompactedRowEncoder, encodeKvValue, KvValueDecoder, KvValuePacker, primaryKeyLayout, readKvValue } from './row-encoder.js';
import { addColumns, buildSchema } from './schema.js';
import { type DataType, parseDataType } from './types.js';

const T = (text: string): DataType => parseDataType(text);
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex').toUpperCase();
const fromHex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s.replace(/\s+/g, ''), 'hex'));
const corrupt = (e: unknown): boolean => e instanceof TributaryError && e.errorName === 'CORRUPT_MESSAGE';

/** Every type, each with values at its extremes (internal form); columns are nullable. */
const columns: [string, unknown[]][] = [
  ['BOOLEAN', [true, false]],
  ['TINYINT', [-128, 127, 0, -1]],
  ['SMALLINT', [-32768, 32767, -2]],
  ['INT', [-2147483648, 2147483647, -1, 0, 300]],
  ['BIGINT', [-(2n ** 63n), 2n ** 63n - 1n, -1n, 0n, 2n ** 32n]],
  ['FLOAT', [Math.fround(-3.4028234663852886e38), Math.fround(13.2), Number.NEGATIVE_INFINITY, Number.NaN, -0]],
  ['DOUBLE', [-Number.MAX_VALUE, Number.MIN_VALUE, -0, Number.NaN, 15.21]],
  ['DECIMAL(5, 2)', [99999n, -99999n, 0n, -1n]],
  ['DECIMAL(18, 4)', [10n ** 18n - 1n, -(10n ** 18n - 1n), 42n]],
  ['DECIMAL(19, 0)', [10n ** 19n - 1n, -(10n ** 19n - 1n), 0n, -128n]],
  ['DECIMAL(38, 10)', [10n ** 38n - 1n, -(10n ** 38n - 1n), 1n, -129n, 2n ** 64n]],
  ['CHAR(4)', ['äöü€', '', 'ab', '𝄞😀']],
  ['STRING', ['', 'héllo wörld, 漢字, 𝄞 😀', 'x'.repeat(70_000), '\u0000']],
  ['BINARY(3)', [new Uint8Array([0, 0, 0]), new Uint8Array([255, 128, 1])]],
  ['BYTES', [new Uint8Array(0), new Uint8Array(300).fill(0xab), new Uint8Array([0])]],
  ['DATE', [-719162, 2932896, -1, 0, 19655]],
  ['TIME(0)', [0, 86_399_000_000, 34_200_000_000]],
  ['TIME(3)', [86_399_999_000, 1000]],
  ['TIME(6)', [0, 86_399_999_999, 34_200_000_123, 1]],
  ['TIMESTAMP(3)', [-9_223_372_036_854_775_000n, 9_223_372_036_854_775_000n, 1_698_235_273_182_000n, -1000n]],
  ['TIMESTAMP(6)', [-(2n ** 63n), 2n ** 63n - 1n, -1n, -1500n, 1_698_235_273_182_456n, 9_000_000_000_000_000_123n]],
  ['TIMESTAMP_LTZ(3)', [1_700_000_000_123_000n, -1000n]],
  ['TIMESTAMP_LTZ(6)', [-(2n ** 63n), 2n ** 63n - 1n, 0n]],
];
const types = columns.map(([t]) => T(t));

/** Row r takes value r of each column (cycling), with nulls where `nullAt(r, c)`. */
function rowOf(r: number, nullAt: (r: number, c: number) => boolean): unknown[] {
  return columns.map(([, values], c) => (nullAt(r, c) ? null : values[r % values.length]));
}

describe('CompactedRowEncoder / CompactedRowDecoder', () => {
  it('writes the null bits, then the non-null values in the key encoding (fixture)', () => {
    const rowTypes = ['INT', 'STRING', 'BIGINT', 'BOOLEAN', 'DECIMAL(5, 2)', 'TIMESTAMP(6)', 'DOUBLE', 'BYTES', 'DATE', 'DECIMAL(20, 0)'].map(T);
    const values = [100, 'hello', null, true, 9n, 1_698_235_273_182_456n, null, new Uint8Array([1, 2]), -1, -129n];
    const bytes = fromHex(
      [
        ['44 00', 'null bits: columns 2 and 6'],
        ['64', 'INT 100'],
        ['05 68656C6C6F', "STRING 'hello'"],
        ['01', 'BOOLEAN true'],
        ['09', 'DECIMAL(5, 2) unscaled 9'],
        ['DE9FD7B5B631 C0EA1B', 'TIMESTAMP(6): ms 1698235273182, then 456000 ns'],
        ['02 0102', 'BYTES'],
        ['FFFFFFFF0F', 'DATE -1: unsigned varint of the two\'s complement'],
        ['02 FF7F', 'DECIMAL(20, 0) -129 as BigInteger.toByteArray'],
      ]
        .map(([bytes]) => bytes)
        .join(''),
    );
    assert.equal(hex(new CompactedRowEncoder(rowTypes).encode(values)), hex(bytes));
    assert.deepEqual(new CompactedRowDecoder(rowTypes).decode(bytes), values);
  });

  it('is the zero null bits followed by the compacted key of the same values when nothing is null', () => {
    const encoder = new CompactedRowEncoder(types);
    for (let r = 0; r < 6; r++) {
      const row = rowOf(r, () => false);
      const expected = new Uint8Array(3 + encodeKey(types, row).length);
      expected.set(encodeKey(types, row), 3);
      assert.equal(hex(encoder.encode(row)), hex(expected));
    }
  });

  it('round-trips every type at its extremes, unicode, empty strings and bytes, and all-null rows', () => {
    const encoder = new CompactedRowEncoder(types);
    const decoder = new CompactedRowDecoder(types);
    const rows = [
      ...Array.from({ length: 6 }, (_, r) => rowOf(r, () => false)),
      ...Array.from({ length: 6 }, (_, r) => rowOf(r, (r2, c) => (r2 + c) % 3 === 0)),
      rowOf(0, () => true),
    ];
    for (const row of rows) {
      const bytes = encoder.encode(row);
      assert.deepEqual(decoder.decode(bytes), row);
    }
    assert.equal(hex(encoder.encode(rowOf(0, () => true))), 'FFFF7F'); // 23 columns: 3 bytes of null bits, nothing else
  });

  it('round-trips rows of random values and nulls into a reused array', () => {
    let seed = 12345;
    const rand = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    const encoder = new CompactedRowEncoder(types);
    const decoder = new CompactedRowDecoder(types);
    const out: unknown[] = [];
    for (let i = 0; i < 2000; i++) {
      const row = columns.map(([, values]) => (rand(4) === 0 ? null : values[rand(values.length)]));
      assert.equal(decoder.decode(encoder.encode(row), out), out);
      assert.deepEqual(out, row);
    }
  });

  it('returns copies: later encodes and changes to the input bytes do not reach earlier results', () => {
    const rowTypes = [T('STRING'), T('BYTES')];
    const encoder = new CompactedRowEncoder(rowTypes);
    const first = encoder.encode(['aaaa', new Uint8Array([1])]);
    encoder.encode(['bbbb', new Uint8Array([2])]);
    assert.equal(hex(first), '00046161616101 01'.replace(/ /g, ''));
    const bytes = Buffer.from(first);
    const decoded = new CompactedRowDecoder(rowTypes).decode(bytes);
    bytes.fill(0x7f);
    assert.deepEqual(decoded, ['aaaa', new Uint8Array([1])]);
    assert.ok(!Buffer.isBuffer(decoded[1]));
  });

  it('rejects rows of the wrong width', () => {
    assert.throws(() => new CompactedRowEncoder([T('INT'), T('INT')]).encode([1]), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ROW');
  });

  it('rejects every truncation and any trailing byte', () => {
    const encoder = new CompactedRowEncoder(types);
    const decoder = new CompactedRowDecoder(types);
    for (const row of [rowOf(1, () => false), rowOf(2, (_, c) => c % 2 === 0), rowOf(0, () => true)]) {
      const bytes = encoder.encode(row);
      for (let len = 0; len < bytes.length; len++) assert.throws(() => decoder.decode(bytes.subarray(0, len)), corrupt, `${len} of ${bytes.length} bytes`);
      const longer = new Uint8Array(bytes.length + 1);
      longer.set(bytes);
      assert.throws(() => decoder.decode(longer), /1 bytes after the last of 23 columns/);
    }
  });

  it('rejects bytes that hold no value of the column type', () => {
    const bad: [string, string, RegExp][] = [
      ['INT', '00 FFFFFFFFFF01', /longer than 5 bytes/],
      ['BIGINT', '00 FFFFFFFFFFFFFFFFFFFF01', /longer than 10 bytes/],
      ['STRING', '00 05 6162', /runs past the end/],
      ['STRING', '00 FFFFFFFF0F', /runs past the end/], // length -1
      ['BOOLEAN', '00 02', /boolean byte 2/],
      ['DECIMAL(5, 2)', '00 A08D06', /unscaled value 100000/],
      ['DECIMAL(20, 0)', '00 09 056BC75E2D63100000', /unscaled value 100000000000000000000/],
      ['DECIMAL(20, 0)', '00 00', /unscaled value of 0 bytes/],
      ['CHAR(2)', '00 03 616263', /3 characters/],
      ['BINARY(3)', '00 02 0102', /2 bytes/],
      ['TIME(0)', '00 80B89929', /time of day 86400000 ms/],
      ['TIME(6)', '00 01 C0843D', /time of day 1 ms \+ 1000000 ns/],
      ['TIMESTAMP(6)', '00 00 C0843D', /1000000 nanoseconds/],
      ['TIMESTAMP(6)', '00 FFFFFFFFFFFFFFFF7F 00', /beyond 64 bits/],
      ['INT', '02', /null bits set beyond the 1 columns/],
      ['INT', '', /cannot hold the null bits/],
    ];
    for (const [type, bytes, message] of bad) {
      assert.throws(() => new CompactedRowDecoder([T(type)]).decode(fromHex(bytes)), (e: unknown) => corrupt(e) && message.test((e as Error).message), `${type} ${bytes}`);
    }
    // The same bytes are fine where the type allows them.
    assert.deepEqual(new CompactedRowDecoder([T('CHAR(3)')]).decode(fromHex('00 03 616263')), ['abc']);
    assert.deepEqual(new CompactedRowDecoder([T('CHAR(1)')]).decode(fromHex('00 02 C3A9')), ['é']);
    assert.deepEqual(new CompactedRowDecoder([T('DECIMAL(6, 2)')]).decode(fromHex('00 A08D06')), [100000n]);
  });
});

describe('CompactedRowDecoder.visit', () => {
  /** Reads each column the way a consumer without JS values does, and gives back the values decode gives. */
  function visited(decoder: CompactedRowDecoder, rowTypes: readonly DataType[], bytes: Uint8Array): unknown[] {
    const out: unknown[] = [];
    const words = new Int32Array(2);
    const int64 = new BigInt64Array(words.buffer);
    decoder.visit(bytes, {
      nullColumn: (c) => (out[c] = null),
      column: (c, reader) => {
        const t = rowTypes[c];
        if (t.kind === 'BIGINT' || t.kind === 'TIMESTAMP' || t.kind === 'TIMESTAMP_LTZ' || t.kind === 'TIME' || (t.kind === 'DECIMAL' && t.precision <= 18)) {
          reader.readInt64(c, words, 0);
          out[c] = t.kind === 'TIME' ? Number(int64[0]) : int64[0];
        } else if (t.kind === 'STRING' || t.kind === 'CHAR' || t.kind === 'BINARY' || t.kind === 'BYTES') {
          const start = reader.span(c);
          const raw = reader.input.subarray(start, reader.position);
          out[c] = t.kind === 'STRING' || t.kind === 'CHAR' ? raw.toString('utf8') : new Uint8Array(raw);
        } else out[c] = reader.read(c);
      },
    });
    return out;
  }

  it('hands each field to the visitor in its stored form, the values decode gives', () => {
    const encoder = new CompactedRowEncoder(types);
    const decoder = new CompactedRowDecoder(types);
    for (let r = 0; r < 6; r++) {
      const bytes = encoder.encode(rowOf(r, (row, c) => (row + c) % 4 === 0));
      assert.deepEqual(visited(decoder, types, bytes), decoder.decode(bytes), `row ${r}`);
    }
  });

  it('refuses what decode refuses', () => {
    const bad: [string, string][] = [
      ['BIGINT', '00 FFFFFFFFFFFFFFFFFFFF01'],
      ['DECIMAL(5, 2)', '00 A08D06'],
      ['DECIMAL(18, 0)', '00 808090BBBAD6ADF00D'], // 10^18: beyond what a number holds exactly
      ['DECIMAL(18, 0)', '00 8080F0C4C5A9D28FF201'], // -10^18
      ['CHAR(2)', '00 03 616263'],
      ['BINARY(3)', '00 02 0102'],
      ['STRING', '00 05 6162'],
      ['TIME(6)', '00 01 C0843D'],
      ['TIMESTAMP(6)', '00 00 C0843D'],
      ['TIMESTAMP(6)', '00 FFFFFFFFFFFFFFFF7F 00'],
      ['INT', '02'],
      ['INT', '00 01 00'],
    ];
    for (const [type, bytes] of bad) {
      const decoder = new CompactedRowDecoder([T(type)]);
      assert.throws(() => decoder.decode(fromHex(bytes)), corrupt, `${type} ${bytes}`);
      assert.throws(() => visited(decoder, [T(type)], fromHex(bytes)), corrupt, `${type} ${bytes}`);
    }
  });
});

describe('KV values', () => {
  it('prefix the row with its schema id, little-endian, and read it back as a view', () => {
    const row = new CompactedRowEncoder([T('INT')]).encode([1]);
    const value = encodeKvValue(0x1234, row);
    assert.equal(hex(value), '3412' + '0001');
    const read = readKvValue(value);
    assert.equal(read.schemaId, 0x1234);
    assert.equal(hex(read.row), '0001');
    assert.equal(read.row.buffer, value.buffer);
    assert.equal(readKvValue(encodeKvValue(32767, new Uint8Array(0))).schemaId, 32767);
    assert.throws(() => readKvValue(new Uint8Array([1])), corrupt);
    for (const bad of [-1, 32768, 1.5]) assert.throws(() => encodeKvValue(bad, row), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT');
  });

  it('packed side by side are the same bytes, each kept when a row is reused or the packer moves to a new buffer', () => {
    const encoder = new CompactedRowEncoder([T('INT'), T('STRING')]);
    const packer = new KvValuePacker(7, 10);
    const rows: unknown[][] = [[1, 'a'], [2, 'a longer string than the first buffer'], [null, 'b'], [3, null], [4, 'c']];
    // Views of the encoder's buffer, which the next encode overwrites.
    const packed = rows.map((r) => packer.pack(encoder.encodeView(r)));
    assert.deepEqual(packed.map(hex), rows.map((r) => hex(encodeKvValue(7, encoder.encode(r)))));
    assert.equal(packed[2].buffer, packed[3].buffer, 'small values share a buffer');
    assert.throws(() => new KvValuePacker(-1, 10), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT');
  });
});

describe('KvValueDecoder', () => {
  const v0 = buildSchema([{ name: 'id', type: 'BIGINT' }, { name: 'name', type: 'STRING' }], ['id']);
  const v1 = addColumns(v0, [{ name: 'price', type: 'DECIMAL(10, 2)' }]);
  const v2 = addColumns(v1, [{ name: 'tags', type: 'BYTES' }]);
  const schemas = new Map([[0, v0], [1, v1], [2, v2]]);
  const valueOf = (schemaId: number, values: unknown[]): Uint8Array =>
    encodeKvValue(schemaId, new CompactedRowEncoder(schemas.get(schemaId)!.columns.map((c) => c.type)).encode(values));

  it("reads values of older and newer schemas in the reader's columns, nulls where the writer had none", () => {
    const asked: number[] = [];
    const decoder = new KvValueDecoder(v1, 1, (id) => (asked.push(id), schemas.get(id)));
    assert.deepEqual(decoder.decode(valueOf(1, [1n, 'a', 150n])), [1n, 'a', 150n]);
    assert.deepEqual(decoder.decode(valueOf(0, [2n, 'b'])), [2n, 'b', null]);
    assert.deepEqual(decoder.decode(valueOf(2, [3n, null, 7n, Uint8Array.of(9)])), [3n, null, 7n]);
    const out: unknown[] = ['stale', 'stale', 'stale', 'stale'];
    assert.equal(decoder.decodeRow(0, readKvValue(valueOf(0, [4n, null])).row, out), out);
    assert.deepEqual(out, [4n, null, null]);
    assert.deepEqual(asked, [0, 2], 'each other schema is asked for once');
    assert.ok(decoder.knows(0) && decoder.knows(1) && decoder.knows(2) && !decoder.knows(3));
  });

  it('refuses values of a schema the table does not have', () => {
    const decoder = new KvValueDecoder(v1, 1, (id) => schemas.get(id));
    assert.throws(() => decoder.decode(encodeKvValue(7, Uint8Array.of(0))), (e: unknown) => e instanceof TributaryError && e.errorName === 'SCHEMA_NOT_EXIST');
  });
});

describe('primaryKeyLayout', () => {
  const schema = buildSchema(
    [
      { name: 'region', type: 'STRING' },
      { name: 'dt', type: 'DATE' },
      { name: 'user_id', type: 'BIGINT' },
      { name: 'seq', type: 'INT' },
      { name: 'name', type: 'STRING' },
      { name: 'score', type: 'DOUBLE' },
    ],
    ['user_id', 'dt', 'name', 'seq'],
  );

  it('puts the bucket key first, then the rest of the primary key in its order, without partition keys', () => {
    assert.deepEqual(primaryKeyLayout(schema, ['name']), ['name', 'user_id', 'dt', 'seq']);
    assert.deepEqual(primaryKeyLayout(schema, ['seq', 'user_id'], ['dt']), ['seq', 'user_id', 'name']);
    assert.deepEqual(primaryKeyLayout(schema, ['user_id', 'name', 'seq'], ['dt']), ['user_id', 'name', 'seq']);
  });

  it('rejects bucket keys outside the primary key or among the partition keys, and keys left empty', () => {
    const named = (name: string) => (e: unknown) => e instanceof TributaryError && e.errorName === name;
    assert.throws(() => primaryKeyLayout(schema, ['score']), named('INVALID_BUCKET_KEY'));
    assert.throws(() => primaryKeyLayout(schema, ['dt'], ['dt']), named('INVALID_BUCKET_KEY'));
    assert.throws(() => primaryKeyLayout(schema, ['seq', 'seq']), named('INVALID_BUCKET_KEY'));
    assert.throws(() => primaryKeyLayout(buildSchema([{ name: 'a', type: 'INT' }]), []), named('INVALID_ARGUMENT'));
    const onlyPartition = buildSchema([{ name: 'dt', type: 'DATE' }, { name: 'v', type: 'INT' }], ['dt']);
    assert.throws(() => primaryKeyLayout(onlyPartition, [], ['dt']), named('INVALID_ARGUMENT'));
  });

  it('makes the encoded bucket key a prefix of the encoded primary key, and of no key of another bucket key', () => {
    const bucketKeys = ['name', 'seq'];
    const bucketKey = CompactedKeyEncoder.forColumns(schema, bucketKeys);
    const primaryKey = CompactedKeyEncoder.forColumns(schema, primaryKeyLayout(schema, bucketKeys, ['dt']));
    // Values chosen so that naive concatenations collide: 'a' + 1 vs 'a\u0001', short and long names.
    const names = ['', 'a', 'a\u0001', 'ab', 'b', 'x'.repeat(130)];
    const seqs = [0, 1, -1, 127, 128, 0x61];
    const rows: unknown[][] = [];
    for (const name of names) for (const seq of seqs) for (const user of [0n, -1n, 97n]) rows.push(['r', 19655, user, seq, name, 1.5]);
    const keys = rows.map((row) => ({ bucket: Buffer.from(bucketKey.encode(row)), pk: Buffer.from(primaryKey.encode(row)), id: `${row[4]}|${row[3]}` }));
    for (const a of keys) {
      assert.ok(a.pk.subarray(0, a.bucket.length).equals(a.bucket), `prefix of ${a.id}`);
      for (const b of keys) {
        const sharesPrefix = b.pk.length >= a.bucket.length && b.pk.subarray(0, a.bucket.length).equals(a.bucket);
        assert.equal(sharesPrefix, a.id === b.id, `bucket key ${a.id} against primary key of ${b.id}`);
      }
    }
  });
});
