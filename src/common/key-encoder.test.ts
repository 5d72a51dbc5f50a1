import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TributaryError } from './errors.js';
import { CompactedKeyEncoder, encodeKey } from './key-encoder.js';
import { buildSchema } from './schema.js';
import { type DataType, parseDataType } from './types.js';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex').toUpperCase();
const fromHex = (s: string): string => s.replace(/\s+/g, '').toUpperCase();
const T = (text: string): DataType => parseDataType(text);

/** Unsigned LEB128 of the 64-bit two's complement, by BigInt arithmetic: an independent reference. */
function referenceVarLong(v: bigint): string {
  let u = BigInt.asUintN(64, v);
  const out: number[] = [];
  while (u > 0x7fn) {
    out.push(Number(u & 0x7fn) | 0x80);
    u >>= 7n;
  }
  out.push(Number(u));
  return hex(Uint8Array.from(out));
}

describe('CompactedKeyEncoder', () => {
  it('encodes every scalar type as Fluss does (Fluss/Rust cross-client fixture)', () => {
    // The fixture of Fluss's CompactedKeyEncoderTest, with its values in Tributary's internal form.
    const fields: [string, unknown, string][] = [
      ['BOOLEAN', true, '01'],
      ['TINYINT', 2, '02'],
      ['SMALLINT', 10, '0A 00'],
      ['INT', 100, '64'],
      ['BIGINT', -6101065172474983726n, 'D2 95 FC D8 CE B1 AA AA AB 01'],
      ['FLOAT', 13.2, '33 33 53 41'],
      ['DOUBLE', 15.21, 'EC 51 B8 1E 85 6B 2E 40'],
      ['DATE', 19655, 'C7 99 01'], // 2023-10-25
      ['TIME(0)', 34_200_000_000, 'C0 B3 A7 10'], // 09:30:00 as µs of day; written as ms
      ['BINARY(10)', Buffer.from('1234567890'), '0A 31 32 33 34 35 36 37 38 39 30'],
      ['BYTES', Buffer.from('20'), '02 32 30'],
      ['CHAR(2)', '1', '01 31'],
      ['STRING', 'hello', '05 68 65 6C 6C 6F'],
      ['DECIMAL(5, 2)', 9n, '09'],
      ['DECIMAL(20, 0)', 10n, '01 0A'],
      ['TIMESTAMP(1)', 1698235273182000n, 'DE 9F D7 B5 B6 31'],
      ['TIMESTAMP(5)', 1698235273182000n, 'DE 9F D7 B5 B6 31 00'],
      ['TIMESTAMP_LTZ(1)', 1698235273182000n, 'DE 9F D7 B5 B6 31'],
      ['TIMESTAMP_LTZ(5)', 1698235273182000n, 'DE 9F D7 B5 B6 31 00'],
    ];
    const key = encodeKey(
      fields.map(([t]) => T(t)),
      fields.map(([, v]) => v),
    );
    assert.equal(hex(key), fromHex(fields.map(([, , h]) => h).join('')));
  });

  it('matches Fluss on composite keys picked out of a row', () => {
    const schema = buildSchema([
      { name: 'partition', type: 'STRING' },
      { name: 'f1', type: 'BIGINT' },
      { name: 'f2', type: 'STRING' },
    ]);
    assert.deepEqual([...CompactedKeyEncoder.forColumns(schema, ['f2']).encode(['p1', 1n, 'a2'])], [2, 97, 50]);
    const ints = buildSchema([
      { name: 'a', type: 'INT' },
      { name: 'b', type: 'BIGINT' },
      { name: 'c', type: 'INT' },
      { name: 'd', type: 'STRING' },
    ]);
    const enc = CompactedKeyEncoder.forColumns(ints, ['a', 'b', 'c']);
    assert.deepEqual([...enc.encode([1, 3n, 2, 'a1'])], [1, 3, 2]);
    assert.deepEqual([...enc.encode([2, 5n, 6, 'a1'])], [2, 5, 6]);
    // Key order is the order given, not the schema's.
    assert.deepEqual([...CompactedKeyEncoder.forColumns(ints, ['c', 'a']).encode([1, 3n, 2, 'a1'])], [2, 1]);
  });

  it('writes ints as unsigned varints of the two\'s complement, not zigzag', () => {
    const int = (v: number): string => hex(encodeKey([T('INT')], [v]));
    assert.equal(int(0), '00');
    assert.equal(int(127), '7F');
    assert.equal(int(128), '8001');
    assert.equal(int(16384), '808001');
    assert.equal(int(2147483647), 'FFFFFFFF07');
    assert.equal(int(-1), 'FFFFFFFF0F');
    assert.equal(int(-2147483648), '8080808008');
    assert.equal(hex(encodeKey([T('DATE')], [-1])), 'FFFFFFFF0F'); // 1969-12-31
    assert.equal(hex(encodeKey([T('TINYINT')], [-1])), 'FF');
    assert.equal(hex(encodeKey([T('SMALLINT')], [-2])), 'FEFF');
    assert.equal(hex(encodeKey([T('SMALLINT')], [0x1234])), '3412');
  });

  it('writes longs as unsigned varints of the 64-bit two\'s complement', () => {
    const long = (v: bigint): string => hex(encodeKey([T('BIGINT')], [v]));
    assert.equal(long(0n), '00');
    assert.equal(long(-1n), 'FFFFFFFFFFFFFFFFFF01');
    assert.equal(long(2n ** 63n - 1n), 'FFFFFFFFFFFFFFFF7F');
    assert.equal(long(-(2n ** 63n)), '80808080808080808001');
    assert.equal(long(2n ** 32n), '8080808010');
    // Many values across the range against the BigInt reference.
    let x = 0x9e3779b97f4a7c15n;
    for (let i = 0; i < 2000; i++) {
      x = BigInt.asIntN(64, x * 6364136223846793005n + 1442695040888963407n);
      const v = BigInt.asIntN(64, x >> BigInt(i % 64));
      assert.equal(long(v), referenceVarLong(v), `value ${v}`);
      assert.equal(hex(encodeKey([T('DECIMAL(18, 2)')], [v])), referenceVarLong(v));
    }
  });

  it('writes wide decimals as length-prefixed minimal two\'s-complement big-endian bytes', () => {
    // Expected bytes are Java's BigInteger.toByteArray.
    const dec = (v: bigint): string => hex(encodeKey([T('DECIMAL(38, 0)')], [v]));
    assert.equal(dec(0n), '0100');
    assert.equal(dec(-1n), '01FF');
    assert.equal(dec(127n), '017F');
    assert.equal(dec(128n), '020080');
    assert.equal(dec(-128n), '0180');
    assert.equal(dec(-129n), '02FF7F');
    assert.equal(dec(32768n), '03008000');
    assert.equal(dec(10n ** 37n), '10' + '0785EE10D5DA46D900F436A000000000');
    assert.equal(dec(-(10n ** 37n)), '10' + 'F87A11EF2A25B926FF0BC96000000000');
  });

  it('splits timestamps into floor milliseconds and nanoseconds of the millisecond', () => {
    const ts = (v: bigint, t = 'TIMESTAMP(6)'): string => hex(encodeKey([T(t)], [v]));
    // 1 µs before the epoch: millisecond -1, then 999 µs = 999000 ns.
    assert.equal(ts(-1n), referenceVarLong(-1n) + hex(encodeKey([T('INT')], [999_000])));
    assert.equal(ts(-1500n), referenceVarLong(-2n) + hex(encodeKey([T('INT')], [500_000])));
    assert.equal(ts(1698235273182456n), 'DE9FD7B5B631' + hex(encodeKey([T('INT')], [456_000])));
    assert.equal(ts(1698235273182456n, 'TIMESTAMP_LTZ(3)'), 'DE9FD7B5B631');
    // Beyond 2^53 µs the exact (BigInt) path is taken.
    assert.equal(ts(9_000_000_000_000_000_123n), referenceVarLong(9_000_000_000_000_000n) + hex(encodeKey([T('INT')], [123_000])));
    assert.equal(ts(-9_000_000_000_000_000_001n), referenceVarLong(-9_000_000_000_000_001n) + hex(encodeKey([T('INT')], [999_000])));
  });

  it('keeps microseconds of TIME(p > 3) so distinct keys stay distinct', () => {
    const nineThirty = 34_200_000_000;
    assert.equal(hex(encodeKey([T('TIME(3)')], [nineThirty])), 'C0B3A710');
    assert.equal(hex(encodeKey([T('TIME(6)')], [nineThirty])), 'C0B3A71000');
    assert.equal(hex(encodeKey([T('TIME(6)')], [nineThirty + 123])), 'C0B3A710' + hex(encodeKey([T('INT')], [123_000])));
  });

  it('writes strings as byte length and UTF-8, growing its buffer for long keys', () => {
    assert.equal(hex(encodeKey([T('STRING')], ['é'])), '02C3A9');
    assert.equal(hex(encodeKey([T('STRING')], ['日本'])), '06E697A5E69CAC');
    assert.equal(hex(encodeKey([T('STRING')], [''])), '00');
    const long = 'x'.repeat(300) + 'é';
    const key = encodeKey([T('STRING'), T('INT')], [long, 5]);
    assert.equal(key.length, 2 + 302 + 1);
    assert.equal(hex(key.subarray(0, 2)), 'AE02'); // 302
    assert.equal(Buffer.from(key.subarray(2, 304)).toString('utf8'), long);
    assert.equal(key[304], 5);
  });

  it('returns copies that later calls do not overwrite, and views that they do', () => {
    const enc = new CompactedKeyEncoder([{ name: 'k', type: T('STRING'), position: 1 }]);
    const first = enc.encode([0, 'aaaa']);
    const view = enc.encodeView([0, 'bbbb']);
    assert.equal(hex(view), '0462626262');
    enc.encode([0, 'cccc']);
    assert.equal(hex(first), '0461616161');
    assert.equal(hex(view), '0463636363');
  });

  it('rejects null key values with the column name', () => {
    const schema = buildSchema([
      { name: 'id', type: 'INT' },
      { name: 'name', type: 'STRING' },
    ]);
    const enc = CompactedKeyEncoder.forColumns(schema, ['id', 'name']);
    for (const row of [[1, null], [undefined, 'a'], [1]]) {
      assert.throws(() => enc.encode(row), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ROW' && /must not be null/.test(e.message));
    }
    assert.throws(() => enc.encode([1, null]), /'name' \(STRING\)/);
  });

  it('rejects unknown key columns and empty keys', () => {
    const schema = buildSchema([{ name: 'id', type: 'INT' }]);
    assert.throws(() => CompactedKeyEncoder.forColumns(schema, ['nope']), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT');
    assert.throws(() => CompactedKeyEncoder.forColumns(schema, []), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT');
  });
});
