import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import type { PartitionValue } from './data-file.js';
import { fromSingleValue, toSingleValue } from './single-value.js';

const hex = (h: string): Uint8Array => Uint8Array.from(Buffer.from(h.replace(/\s+/g, ''), 'hex'));
const isError = (name: string) => (e: unknown) => e instanceof TributaryError && e.errorName === name;

/** Java's BigInteger.toByteArray, by its definition: the fewest bytes n with -2^(8n-1) <= v < 2^(8n-1). */
function javaToByteArray(v: bigint): Uint8Array {
  let n = 1;
  while (v < -(1n << BigInt(8 * n - 1)) || v >= 1n << BigInt(8 * n - 1)) n++;
  const out = new Uint8Array(n);
  let u = v < 0n ? (1n << BigInt(8 * n)) + v : v;
  for (let i = n - 1; i >= 0; i--, u >>= 8n) out[i] = Number(u % 256n);
  return out;
}

/** [type, value, bytes]: each value encodes to exactly these bytes and decodes back to itself. */
const FIXTURES: [string, Exclude<PartitionValue, null>, string][] = [
  ['boolean', false, '00'],
  ['boolean', true, '01'],
  ['int', 34, '22000000'],
  ['int', -1, 'ffffffff'],
  ['int', -2147483648, '00000080'],
  ['date', 17486, '4e440000'], // 2017-11-16
  ['date', -1, 'ffffffff'], // 1969-12-31
  ['long', 34n, '2200000000000000'],
  ['long', -2n, 'feffffffffffffff'],
  ['long', 9223372036854775807n, 'ffffffffffffff7f'],
  ['time', 81068000000n, '008307e012000000'], // 22:31:08
  ['timestamp', 1510871468000001n, '01c3262d215e0500'], // 2017-11-16T22:31:08.000001
  ['timestamptz', -1n, 'ffffffffffffffff'],
  ['timestamp_ns', 1510871468000001001n, 'e9bb695f98b1f714'],
  ['float', 1, '0000803f'],
  ['float', -0, '00000080'],
  ['float', -1.5, '0000c0bf'],
  ['double', 1, '000000000000f03f'],
  ['double', -0, '0000000000000080'],
  ['double', Number.POSITIVE_INFINITY, '000000000000f07f'],
  ['decimal(4,2)', 1420n, '058c'], // 14.20
  ['decimal(9, 2)', 0n, '00'],
  ['decimal(9,2)', 127n, '7f'],
  ['decimal(9,2)', 128n, '0080'],
  ['decimal(9,2)', -1n, 'ff'],
  ['decimal(9,2)', -128n, '80'],
  ['decimal(9,2)', -129n, 'ff7f'],
  ['decimal(9,2)', -32768n, '8000'],
  ['decimal(38,0)', 2n ** 63n, '008000000000000000'],
  ['decimal(38,10)', -(10n ** 38n - 1n), 'b4c4b357a5793b85f675ddc000000001'],
  ['string', 'iceberg', '69636562657267'],
  ['string', 'é', 'c3a9'],
  ['string', '', ''],
  ['uuid', hex('f79c3e09677c4bbda4793f349cb785e7'), 'f79c3e09677c4bbda4793f349cb785e7'],
  ['fixed[4]', hex('00010203'), '00010203'],
  ['binary', hex('00ff80'), '00ff80'],
  ['binary', new Uint8Array(0), ''],
];

function bytesHex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}

describe('single-value serialization', () => {
  it('encodes each type as the spec lays out, and decodes it back', () => {
    for (const [type, value, bytes] of FIXTURES) {
      const encoded = toSingleValue(type, value);
      assert.equal(bytesHex(encoded), bytes, `${type} ${String(value)}`);
      assert.equal(Object.getPrototypeOf(encoded), Uint8Array.prototype);
      const decoded = fromSingleValue(type, hex(bytes));
      if (typeof value === 'number' && Object.is(value, -0)) assert.ok(Object.is(decoded, -0), `${type} keeps the sign of -0.0`);
      else assert.deepEqual(decoded, value, `${type} ${String(value)}`);
    }
  });

  it('writes decimals in the fewest two\'s-complement bytes, as Java does', () => {
    const values = [0n, 1n, -1n, 255n, 256n, -256n, -257n, 2n ** 31n - 1n, -(2n ** 31n), 2n ** 31n, -(2n ** 31n) - 1n, 10n ** 18n, -(10n ** 18n), 10n ** 38n - 1n, -(10n ** 38n - 1n)];
    for (const v of values) {
      assert.deepEqual(toSingleValue('decimal(38,4)', v), javaToByteArray(v), `${v}`);
      assert.equal(fromSingleValue('decimal(38,4)', javaToByteArray(v)), v);
    }
  });

  it('takes safe-integer numbers for longs and decimals, and bigints for ints', () => {
    assert.deepEqual(toSingleValue('long', 34), hex('2200000000000000'));
    assert.deepEqual(toSingleValue('timestamp', -1), hex('ffffffffffffffff'));
    assert.deepEqual(toSingleValue('decimal(4,2)', 1420), hex('058c'));
    assert.deepEqual(toSingleValue('int', 34n), hex('22000000'));
  });

  it('writes a uuid given as text in its 16 big-endian bytes', () => {
    assert.deepEqual(toSingleValue('uuid', 'F79C3E09-677C-4BBD-A479-3F349CB785E7'), hex('f79c3e09677c4bbda4793f349cb785e7'));
  });

  it('reads any non-zero byte as true and NaN bits as NaN', () => {
    assert.equal(fromSingleValue('boolean', hex('02')), true);
    assert.ok(Number.isNaN(fromSingleValue('double', toSingleValue('double', Number.NaN)) as number));
    assert.ok(Number.isNaN(fromSingleValue('float', hex('0000c07f')) as number));
  });

  it('reads bounds written before a type promotion by their length', () => {
    assert.equal(fromSingleValue('long', hex('feffffff')), -2n); // an int bound
    assert.equal(fromSingleValue('double', hex('0000c0bf')), -1.5); // a float bound
    assert.equal(fromSingleValue('timestamp', hex('4e440000')), 17486n * 86_400_000_000n); // a date bound
    assert.equal(fromSingleValue('timestamp_ns', hex('01000000')), 86_400_000_000_000n);
  });

  it('copies byte values both ways', () => {
    const source = hex('0102');
    const encoded = toSingleValue('binary', source);
    source[0] = 9;
    assert.deepEqual(encoded, hex('0102'));
    const decoded = fromSingleValue('binary', encoded) as Uint8Array;
    encoded[0] = 7;
    assert.deepEqual(decoded, hex('0102'));
  });

  it('rejects values that are not of the type', () => {
    const cases: [string, PartitionValue | number | bigint][] = [
      ['boolean', 1],
      ['int', 2147483648],
      ['int', 1.5],
      ['date', '2017-11-16'],
      ['long', 2n ** 63n],
      ['long', 2 ** 53],
      ['long', 'x'],
      ['double', 1n],
      ['string', hex('00')],
      ['uuid', hex('00')],
      ['uuid', 'not-a-uuid'],
      ['fixed[4]', hex('000102')],
      ['binary', 'x'],
      ['decimal(9,2)', 1.5],
      ['int', null],
    ];
    for (const [type, value] of cases) assert.throws(() => toSingleValue(type, value), isError('INVALID_ARGUMENT'), `${type} ${String(value)}`);
  });

  it('rejects bytes of the wrong length and strings that are not UTF-8', () => {
    const cases: [string, string][] = [
      ['boolean', ''],
      ['int', '000000'],
      ['long', '000000000000'],
      ['time', '00000000'],
      ['float', '0000000000000000'],
      ['double', '000000'],
      ['uuid', '00'],
      ['fixed[2]', '000000'],
      ['decimal(9,2)', ''],
      ['string', 'c3'],
      ['string', 'ff'],
    ];
    for (const [type, bytes] of cases) assert.throws(() => fromSingleValue(type, hex(bytes)), isError('CORRUPT_MESSAGE'), `${type} ${bytes}`);
  });

  it('refuses types without a single-value form', () => {
    assert.throws(() => toSingleValue('struct', 1), isError('INVALID_TYPE'));
    assert.throws(() => fromSingleValue('variant', hex('00')), isError('INVALID_TYPE'));
  });
});
