import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BucketAssigner } from '../../common/bucketing.js';
import { TributaryError } from '../../common/errors.js';
import { buildSchema } from '../../common/schema.js';
import { type SourceValue, parseTransform } from './transforms.js';

const hex = (h: string): Uint8Array => Uint8Array.from(Buffer.from(h, 'hex'));
const isError = (name: string) => (e: unknown) => e instanceof TributaryError && e.errorName === name;
const INTEGER_MAX_VALUE = 0x7fffffff;

/** Microseconds since the epoch of an ISO instant with up to six fractional digits. */
function micros(iso: string): bigint {
  const m = /^(.*?)(?:\.(\d{1,6}))?(Z|[+-]\d\d:\d\d)$/.exec(iso)!;
  return BigInt(Date.parse(`${m[1]}${m[3]}`)) * 1000n + BigInt((m[2] ?? '').padEnd(6, '0'));
}
const days = (date: string): number => Date.parse(`${date}T00:00:00Z`) / 86_400_000;

/**
 * Every row of the spec's hash table (Appendix B), [source type, source value, hash]. The bucket
 * of a value is (hash & Integer.MAX_VALUE) % N.
 */
const SPEC_HASHES: [string, SourceValue, number][] = [
  ['int', 34, 2017239379],
  ['long', 34n, 2017239379],
  ['decimal(4,2)', 1420n, -500754589], // 14.20
  ['date', days('2017-11-16'), -653330422],
  ['time', 81_068_000_000n, -662762989], // 22:31:08
  ['timestamp', micros('2017-11-16T22:31:08Z'), -2047944441],
  ['timestamp', micros('2017-11-16T22:31:08.000001Z'), -1207196810],
  ['timestamptz', micros('2017-11-16T14:31:08-08:00'), -2047944441],
  ['timestamptz', micros('2017-11-16T14:31:08.000001-08:00'), -1207196810],
  ['timestamp_ns', micros('2017-11-16T22:31:08Z') * 1000n, -2047944441],
  ['timestamp_ns', micros('2017-11-16T22:31:08.000001Z') * 1000n + 1n, -1207196810], // ...08.000001001
  ['timestamptz_ns', micros('2017-11-16T14:31:08-08:00') * 1000n, -2047944441],
  ['timestamptz_ns', micros('2017-11-16T14:31:08.000001-08:00') * 1000n + 1n, -1207196810],
  ['string', 'iceberg', 1210000089],
  ['uuid', hex('f79c3e09677c4bbda4793f349cb785e7'), 1488055340],
  ['fixed[4]', hex('00010203'), -188683207],
  ['binary', hex('00010203'), -188683207],
];

describe('bucket[N]', () => {
  it('buckets every value of the spec\'s hash table as (hash & Integer.MAX_VALUE) % N', () => {
    for (const n of [1, 2, 7, 16, 100, 1000, INTEGER_MAX_VALUE]) {
      const bucket = parseTransform(`bucket[${n}]`);
      for (const [type, value, hash] of SPEC_HASHES) {
        assert.equal(bucket.apply(type, value), (hash & INTEGER_MAX_VALUE) % n, `${type} ${String(value)} bucket[${n}]`);
      }
    }
  });

  it('hashes ints and longs alike, and a string differently from its number', () => {
    const b = parseTransform('bucket[2147483647]');
    assert.equal(b.apply('int', 34), b.apply('long', 34n));
    assert.equal(b.apply('long', 34), b.apply('long', 34n));
    assert.equal(b.apply('string', '34'), -427558391 & INTEGER_MAX_VALUE); // the spec's 34 vs "34" example
    // A time as Tributary holds it (a number of µs) hashes like the bigint.
    assert.equal(b.apply('time', 81_068_000_000), (-662762989 & INTEGER_MAX_VALUE) % INTEGER_MAX_VALUE);
  });

  it('gives int results in [0, N) and null for null', () => {
    const b = parseTransform('bucket[16]');
    assert.equal(b.resultType('string'), 'int');
    assert.equal(b.resultType('decimal(10,2)'), 'int');
    assert.equal(b.apply('string', null), null);
    for (let i = -50; i < 50; i++) {
      const v = b.apply('long', BigInt(i) * 1_000_003n) as number;
      assert.ok(Number.isInteger(v) && v >= 0 && v < 16);
    }
    assert.equal(b.toHumanString('long', 5), '5');
    assert.equal(b.toHumanString('long', null), 'null');
  });

  it('does not bucket booleans, floats or doubles', () => {
    const b = parseTransform('bucket[4]');
    for (const t of ['boolean', 'float', 'double']) assert.throws(() => b.resultType(t), isError('INVALID_ARGUMENT'));
    assert.throws(() => b.apply('double', 1.5), isError('INVALID_ARGUMENT'));
  });
});

describe('truncate[W]', () => {
  it('follows the spec\'s examples', () => {
    assert.equal(parseTransform('truncate[10]').apply('int', 1), 0);
    assert.equal(parseTransform('truncate[10]').apply('int', -1), -10);
    assert.equal(parseTransform('truncate[10]').apply('long', 1n), 0n);
    assert.equal(parseTransform('truncate[10]').apply('long', -1n), -10n);
    assert.equal(parseTransform('truncate[50]').apply('decimal(4,2)', 1065n), 1050n); // 10.65 → 10.50
    assert.equal(parseTransform('truncate[3]').apply('string', 'iceberg'), 'ice');
    assert.deepEqual(parseTransform('truncate[3]').apply('binary', hex('0102030405')), hex('010203'));
  });

  it('keeps remainders positive and values already on the grid', () => {
    const t = parseTransform('truncate[10]');
    assert.equal(t.apply('int', 10), 10);
    assert.equal(t.apply('int', -10), -10);
    assert.equal(t.apply('int', -11), -20);
    assert.equal(t.apply('long', 123456789012345n), 123456789012340n);
    assert.equal(t.apply('decimal(10,2)', -1065n), -1070n);
    assert.equal(t.resultType('long'), 'long');
  });

  it('wraps at the ends of int and long as Java does', () => {
    const t = parseTransform('truncate[10]');
    assert.equal(t.apply('int', -2147483648), 2147483646); // -2147483650 wrapped
    assert.equal(t.apply('long', -(2n ** 63n)), 2n ** 63n - 2n);
  });

  it('cuts strings at code points, never inside a surrogate pair, and leaves short values alone', () => {
    assert.equal(parseTransform('truncate[2]').apply('string', '😀😀😀'), '😀😀');
    assert.equal(parseTransform('truncate[2]').apply('string', 'a😀b'), 'a😀');
    assert.equal(parseTransform('truncate[4]').apply('string', 'iceberg'), 'iceb');
    assert.equal(parseTransform('truncate[16]').apply('string', 'ice'), 'ice');
    assert.deepEqual(parseTransform('truncate[16]').apply('binary', hex('01')), hex('01'));
  });

  it('applies only to int, long, decimal, string and binary', () => {
    for (const t of ['date', 'timestamp', 'uuid', 'fixed[4]', 'boolean', 'double']) {
      assert.throws(() => parseTransform('truncate[4]').resultType(t), isError('INVALID_ARGUMENT'), t);
    }
  });

  it('shows a truncated value as its source type', () => {
    assert.equal(parseTransform('truncate[50]').toHumanString('decimal(4,2)', 1050n), '10.50');
    assert.equal(parseTransform('truncate[3]').toHumanString('string', 'ice'), 'ice');
  });
});

describe('year, month, day, hour', () => {
  const ts = micros('2017-11-16T22:31:08.000001Z');

  it('count whole units since the epoch in UTC', () => {
    assert.equal(parseTransform('year').apply('timestamp', ts), 47);
    assert.equal(parseTransform('month').apply('timestamp', ts), 47 * 12 + 10);
    assert.equal(parseTransform('day').apply('timestamp', ts), days('2017-11-16'));
    assert.equal(parseTransform('hour').apply('timestamp', ts), Math.floor(1510871468 / 3600));
    assert.equal(parseTransform('hour').apply('timestamptz', micros('2017-11-16T14:31:08-08:00')), Math.floor(1510871468 / 3600));
    assert.equal(parseTransform('day').apply('timestamp_ns', ts * 1000n), days('2017-11-16'));
    assert.equal(parseTransform('year').apply('date', days('2017-11-16')), 47);
    assert.equal(parseTransform('month').apply('date', days('2017-11-16')), 574);
    assert.equal(parseTransform('day').apply('date', days('2017-11-16')), days('2017-11-16'));
  });

  it('round down before the epoch', () => {
    const justBefore = -1n; // 1969-12-31T23:59:59.999999
    for (const t of ['year', 'month', 'day', 'hour']) assert.equal(parseTransform(t).apply('timestamp', justBefore), -1, t);
    assert.equal(parseTransform('hour').apply('timestamp', -3_600_000_000n), -1);
    assert.equal(parseTransform('hour').apply('timestamp', -3_600_000_001n), -2);
    assert.equal(parseTransform('year').apply('date', days('1969-01-01')), -1);
    assert.equal(parseTransform('year').apply('date', days('1968-12-31')), -2);
    assert.equal(parseTransform('month').apply('date', days('1969-12-31')), -1);
    assert.equal(parseTransform('month').apply('date', days('1900-03-01')), -70 * 12 + 2);
  });

  it('agree with the calendar on leap days and century years', () => {
    const month = parseTransform('month');
    for (const date of ['2000-02-29', '2000-03-01', '2100-02-28', '2100-03-01', '1600-02-29', '2024-12-31', '0001-01-01', '9999-12-31']) {
      const [y, m] = date.split('-').map(Number);
      assert.equal(month.apply('date', days(date)), (y - 1970) * 12 + m - 1, date);
      assert.equal(parseTransform('day').toHumanString('date', days(date)), date);
    }
  });

  it('give int results and partition path text', () => {
    assert.equal(parseTransform('day').resultType('timestamptz'), 'int');
    assert.equal(parseTransform('year').toHumanString('timestamp', 47), '2017');
    assert.equal(parseTransform('month').toHumanString('timestamp', 574), '2017-11');
    assert.equal(parseTransform('day').toHumanString('timestamp', days('2017-11-16')), '2017-11-16');
    assert.equal(parseTransform('hour').toHumanString('timestamp', Math.floor(1510871468 / 3600)), '2017-11-16-22');
    assert.equal(parseTransform('month').toHumanString('date', -1), '1969-12');
    assert.equal(parseTransform('hour').toHumanString('timestamp', -1), '1969-12-31-23');
    assert.equal(parseTransform('year').toHumanString('date', null), 'null');
  });

  it('apply only to dates and timestamps (hour: timestamps)', () => {
    assert.throws(() => parseTransform('hour').apply('date', 1), isError('INVALID_ARGUMENT'));
    for (const t of ['year', 'month', 'day']) assert.throws(() => parseTransform(t).apply('long', 1n), isError('INVALID_ARGUMENT'));
    assert.throws(() => parseTransform('day').apply('time', 1n), isError('INVALID_ARGUMENT'));
  });
});

describe('identity and void', () => {
  it('identity keeps the value in its type\'s form and shows it as Iceberg does', () => {
    const id = parseTransform('identity');
    assert.equal(id.resultType('decimal(10,2)'), 'decimal(10,2)');
    assert.equal(id.apply('int', 5n), 5);
    assert.equal(id.apply('time', 81_068_000_000), 81_068_000_000n);
    const bytes = hex('0102');
    const copy = id.apply('binary', bytes);
    assert.deepEqual(copy, bytes);
    assert.notEqual(copy, bytes);
    const human: [string, SourceValue, string][] = [
      ['date', days('2017-11-16'), '2017-11-16'],
      ['time', 81_068_000_000n, '22:31:08'],
      ['time', 81_060_000_000n, '22:31'],
      ['time', 81_068_120_000n, '22:31:08.120'],
      ['time', 81_068_000_001n, '22:31:08.000001'],
      ['timestamp', ts('2017-11-16T22:31:08.000001Z'), '2017-11-16T22:31:08.000001'],
      ['timestamp', -1n, '1969-12-31T23:59:59.999999'],
      ['timestamptz', ts('2017-11-16T14:31:08-08:00'), '2017-11-16T22:31:08Z'],
      ['timestamptz_ns', ts('2017-11-16T22:31:08Z') * 1000n + 1n, '2017-11-16T22:31:08.000000001Z'],
      ['decimal(10,2)', -5n, '-0.05'],
      ['string', 'a/b c', 'a/b c'],
      ['long', 34n, '34'],
      ['boolean', true, 'true'],
      ['binary', hex('00ff10'), 'AP8Q'],
      ['uuid', hex('f79c3e09677c4bbda4793f349cb785e7'), 'f79c3e09-677c-4bbd-a479-3f349cb785e7'],
    ];
    for (const [type, value, text] of human) assert.equal(id.toHumanString(type, id.apply(type, value)), text, `${type} ${String(value)}`);
    function ts(iso: string): bigint {
      return micros(iso);
    }
  });

  it('void gives null of the source type', () => {
    const v = parseTransform('void');
    assert.equal(v.apply('string', 'x'), null);
    assert.equal(v.resultType('string'), 'string');
    assert.equal(v.toHumanString('string', null), 'null');
  });

  it('rejects values not of the source type', () => {
    const id = parseTransform('identity');
    const cases: [string, SourceValue][] = [
      ['int', 1.5],
      ['int', 2 ** 31],
      ['long', 'x'],
      ['long', 2n ** 63n],
      ['string', 1],
      ['uuid', hex('00')],
      ['fixed[2]', hex('000102')],
      ['date', 1n << 40n],
      ['boolean', 0],
    ];
    for (const [type, value] of cases) assert.throws(() => id.apply(type, value), isError('INVALID_ARGUMENT'), `${type} ${String(value)}`);
    assert.throws(() => parseTransform('bucket[4]').apply('int', '34'), isError('INVALID_ARGUMENT'));
    assert.throws(() => id.apply('list<int>', 1), isError('INVALID_TYPE'));
  });
});

describe('parseTransform', () => {
  it('reads the spec\'s spellings and writes them back', () => {
    for (const text of ['identity', 'bucket[16]', 'truncate[4]', 'year', 'month', 'day', 'hour', 'void']) {
      assert.equal(parseTransform(text).toString(), text);
    }
  });

  it('rejects unknown transforms and bad parameters', () => {
    for (const text of ['bucket', 'bucket[0]', 'truncate[-1]', 'bucket[2147483648]', 'years', 'zorder', 'bucket[1.5]']) {
      assert.throws(() => parseTransform(text), isError('INVALID_ARGUMENT'), text);
    }
  });
});

describe('bucket[N] and the table\'s bucket assigner', () => {
  it('agree on every key of a lake-aligned table, so Tributary bucket b is lake bucket b', () => {
    const schema = buildSchema([
      { name: 'i', type: 'INT' },
      { name: 'big', type: 'BIGINT' },
      { name: 's', type: 'STRING' },
      { name: 'd', type: 'DATE' },
      { name: 'amount', type: 'DECIMAL(20, 3)' },
    ]);
    // The Iceberg type of each column, and a value maker for seed k (negatives, wide values, non-ASCII).
    const keys: [string, string, (k: number) => unknown][] = [
      ['i', 'int', (k) => (k * 2654435761) | 0],
      ['big', 'long', (k) => BigInt(k) * -7_000_000_000_003n],
      ['s', 'string', (k) => `key-${k}-${'é😀'.repeat(k % 4)}`],
      ['d', 'date', (k) => k * 37 - 20000],
      ['amount', 'decimal(20,3)', (k) => BigInt(k) * 123_456_789_012_345n * (k % 2 ? -1n : 1n)],
    ];
    for (const bucketCount of [1, 5, 64]) {
      const bucket = parseTransform(`bucket[${bucketCount}]`);
      keys.forEach(([column, icebergType, valueOf], position) => {
        const assigner = new BucketAssigner({ schema, bucketKeys: [column], bucketCount, properties: { 'table.datalake.format': 'iceberg' } });
        const row: unknown[] = [null, null, null, null, null];
        for (let k = 0; k < 200; k++) {
          row[position] = valueOf(k);
          assert.equal(assigner.bucketOf(row), bucket.apply(icebergType, row[position] as SourceValue), `${column} = ${String(row[position])}`);
        }
      });
    }
  });
});
