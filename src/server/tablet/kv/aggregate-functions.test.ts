import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TributaryError, type ErrorName } from '../../../common/errors.js';
import type { AggFunction } from '../../../common/pk-table.js';
import type { Column } from '../../../common/schema.js';
import { parseDataType } from '../../../common/types.js';
import { createAggregator } from './aggregate-functions.js';

const fails = (name: ErrorName, pattern?: RegExp) => (e: unknown): boolean =>
  e instanceof TributaryError && e.errorName === name && (pattern === undefined || pattern.test(e.message));

function column(type: string): Column {
  return { name: 'c', type: parseDataType(type), nullable: true, fieldId: 0 };
}

/** Folds written values into a stored one, as a key's successive writes would. */
function fold(fn: AggFunction, type: string, stored: unknown, written: unknown[], delimiter = ','): unknown {
  const aggregate = createAggregator(fn, column(type), delimiter);
  return written.reduce((acc, v) => aggregate(acc, v), stored);
}

describe('sum', () => {
  it('ignores nulls on either side', () => {
    assert.equal(fold('sum', 'INT', null, [5]), 5);
    assert.equal(fold('sum', 'INT', 5, [null]), 5);
    assert.equal(fold('sum', 'INT', null, [null]), null);
    assert.equal(fold('sum', 'INT', 1, [null, 2, null, -10]), -7);
  });

  it('fails on integer overflow instead of wrapping', () => {
    assert.equal(fold('sum', 'TINYINT', 100, [27]), 127);
    assert.throws(() => fold('sum', 'TINYINT', 100, [28]), fails('INVALID_ROW', /sum of column 'c' overflows TINYINT/));
    assert.throws(() => fold('sum', 'TINYINT', -100, [-29]), fails('INVALID_ROW'));
    assert.equal(fold('sum', 'SMALLINT', -32000, [-768]), -32768);
    assert.throws(() => fold('sum', 'SMALLINT', 32000, [768]), fails('INVALID_ROW', /SMALLINT/));
    assert.equal(fold('sum', 'INT', 2147483600, [47]), 2147483647);
    assert.throws(() => fold('sum', 'INT', 2147483600, [48]), fails('INVALID_ROW', /overflows INT/));
  });

  it('adds BIGINT exactly beyond 2^53 and fails past 2^63 - 1', () => {
    assert.equal(fold('sum', 'BIGINT', 2n ** 53n, [1n, 1n]), 2n ** 53n + 2n);
    assert.equal(fold('sum', 'BIGINT', 2n ** 62n, [2n ** 62n - 1n]), 2n ** 63n - 1n);
    assert.throws(() => fold('sum', 'BIGINT', 2n ** 62n, [2n ** 62n]), fails('INVALID_ROW', /overflows BIGINT/));
    assert.throws(() => fold('sum', 'BIGINT', -(2n ** 62n), [-(2n ** 62n), -1n]), fails('INVALID_ROW'));
    assert.equal(fold('sum', 'BIGINT', -(2n ** 62n), [-(2n ** 62n)]), -(2n ** 63n));
  });

  it('adds DECIMAL exactly, failing past its precision', () => {
    // 0.10 + 0.20 is exactly 0.30: unscaled values at scale 2
    assert.equal(fold('sum', 'DECIMAL(10, 2)', 10n, [20n]), 30n);
    assert.equal(fold('sum', 'DECIMAL(38, 2)', 10n ** 37n, [10n ** 37n, 7n]), 2n * 10n ** 37n + 7n);
    assert.equal(fold('sum', 'DECIMAL(5, 2)', 99_900n, [99n]), 99_999n);
    assert.throws(() => fold('sum', 'DECIMAL(5, 2)', 99_900n, [100n]), fails('INVALID_ROW', /overflows DECIMAL\(5, 2\)/));
    assert.throws(() => fold('sum', 'DECIMAL(5, 2)', -99_900n, [-100n]), fails('INVALID_ROW'));
    assert.throws(() => fold('sum', 'DECIMAL(38, 0)', 10n ** 38n - 1n, [1n]), fails('INVALID_ROW'));
  });

  it('adds FLOAT in 32 bits and DOUBLE in 64', () => {
    assert.equal(fold('sum', 'DOUBLE', 0.1, [0.2]), 0.30000000000000004);
    assert.equal(fold('sum', 'FLOAT', Math.fround(0.1), [Math.fround(0.2)]), Math.fround(Math.fround(0.1) + Math.fround(0.2)));
    assert.notEqual(fold('sum', 'FLOAT', Math.fround(0.1), [Math.fround(0.2)]), Math.fround(0.1) + Math.fround(0.2));
    assert.equal(fold('sum', 'FLOAT', 3.4e38, [3.4e38]), Infinity);
  });
});

describe('product', () => {
  it('multiplies integers exactly, failing on overflow and never giving -0', () => {
    assert.equal(fold('product', 'INT', 46340, [46340]), 2147395600);
    assert.throws(() => fold('product', 'INT', 46341, [46341]), fails('INVALID_ROW', /product of column 'c' overflows INT/));
    assert.throws(() => fold('product', 'TINYINT', 16, [8]), fails('INVALID_ROW', /TINYINT/));
    assert.equal(fold('product', 'TINYINT', -16, [8]), -128);
    assert.ok(Object.is(fold('product', 'INT', 0, [-3]), 0));
    assert.equal(fold('product', 'INT', null, [null, 3, null, 4]), 12);
  });

  it('multiplies BIGINT exactly', () => {
    assert.equal(fold('product', 'BIGINT', 3037000499n, [3037000499n]), 9223372030926249001n);
    assert.throws(() => fold('product', 'BIGINT', 3037000500n, [3037000500n]), fails('INVALID_ROW', /BIGINT/));
    assert.equal(fold('product', 'BIGINT', 2n ** 31n, [-(2n ** 32n)]), -(2n ** 63n));
  });

  it('rounds a DECIMAL product half up to the scale', () => {
    const p = (a: bigint, b: bigint) => fold('product', 'DECIMAL(10, 2)', a, [b]);
    assert.equal(p(150n, 25n), 38n); // 1.50 * 0.25 = 0.375 -> 0.38
    assert.equal(p(-150n, 25n), -38n); // halves go away from zero
    assert.equal(p(5n, 10n), 1n); // 0.005 -> 0.01
    assert.equal(p(4n, 10n), 0n); // 0.004 -> 0.00
    assert.equal(p(-4n, 10n), 0n);
    assert.equal(p(1234n, 100n), 1234n); // 12.34 * 1.00
    assert.equal(fold('product', 'DECIMAL(38, 0)', 10n ** 18n, [10n ** 19n]), 10n ** 37n);
    assert.throws(() => fold('product', 'DECIMAL(10, 2)', 10n ** 7n, [10n ** 5n]), fails('INVALID_ROW', /DECIMAL\(10, 2\)/));
  });

  it('multiplies DOUBLE as IEEE does (Fluss documents 0.9 * 0.8)', () => {
    assert.equal(fold('product', 'DOUBLE', 0.9, [0.8]), 0.7200000000000001);
    assert.equal(fold('product', 'FLOAT', Math.fround(0.9), [Math.fround(0.8)]), Math.fround(Math.fround(0.9) * Math.fround(0.8)));
  });
});

describe('max and min', () => {
  it('ignore nulls', () => {
    assert.equal(fold('max', 'INT', null, [3, null, 1]), 3);
    assert.equal(fold('min', 'INT', null, [null, 3, null, 1]), 1);
    assert.equal(fold('max', 'INT', null, [null]), null);
  });

  it('compare BIGINT, DECIMAL and timestamps as exact integers', () => {
    assert.equal(fold('max', 'BIGINT', 2n ** 60n, [2n ** 60n + 1n, 2n ** 60n - 1n]), 2n ** 60n + 1n);
    assert.equal(fold('min', 'BIGINT', 2n ** 53n + 1n, [2n ** 53n]), 2n ** 53n);
    assert.equal(fold('min', 'DECIMAL(38, 10)', 10n ** 30n, [-(10n ** 31n), 5n]), -(10n ** 31n));
    assert.equal(fold('max', 'TIMESTAMP(6)', 1_700_000_000_000_001n, [1_700_000_000_000_000n]), 1_700_000_000_000_001n);
    assert.equal(fold('min', 'TIMESTAMP_LTZ(3)', 0n, [-1000n]), -1000n);
    assert.equal(fold('max', 'DATE', 19000, [19001, -5]), 19001);
    assert.equal(fold('min', 'TIME(6)', 5_000_000, [4_999_999]), 4_999_999);
  });

  it('order strings by code point (UTF-8 byte order), not by UTF-16 unit', () => {
    // U+1F600 is above U+FFFD, though its first UTF-16 unit (D83D) is below FFFD
    assert.equal(fold('max', 'STRING', '\uFFFD', ['😀']), '😀');
    assert.equal(fold('min', 'STRING', '😀', ['\uFFFD']), '\uFFFD');
    assert.equal(fold('max', 'STRING', '\uE000', ['\uD7FF']), '\uE000');
    assert.equal(fold('max', 'STRING', 'b', ['ab', 'a']), 'b');
    assert.equal(fold('min', 'STRING', 'ab', ['a', 'b']), 'a');
    assert.equal(fold('min', 'CHAR(3)', 'a', ['']), '');
    assert.equal(fold('max', 'STRING', 'é', ['z']), 'é');
    for (const [a, b] of [['😀', '\uFFFD'], ['a😀', 'a\uFFFF'], ['\uFFFF', '𐀀']]) {
      const bytes = Buffer.compare(Buffer.from(a), Buffer.from(b)) > 0 ? a : b;
      assert.equal(fold('max', 'STRING', a, [b]), bytes, `${a} vs ${b}`);
      assert.equal(fold('max', 'STRING', b, [a]), bytes, `${b} vs ${a}`);
    }
  });

  it('order FLOAT and DOUBLE as Java does: NaN above all, -0 below 0', () => {
    assert.ok(Number.isNaN(fold('max', 'DOUBLE', 1, [NaN]) as number));
    assert.equal(fold('min', 'DOUBLE', NaN, [1]), 1);
    assert.equal(fold('max', 'DOUBLE', -Infinity, [NaN, Infinity]), NaN);
    assert.ok(Object.is(fold('max', 'DOUBLE', -0, [0]), 0));
    assert.ok(Object.is(fold('max', 'DOUBLE', 0, [-0]), 0));
    assert.ok(Object.is(fold('min', 'FLOAT', 0, [-0]), -0));
    assert.ok(Object.is(fold('min', 'FLOAT', -0, [0]), -0));
  });

  it('keep the stored value on a tie', () => {
    assert.ok(Object.is(fold('max', 'DOUBLE', -0, [-0]), -0));
    const stored = 5;
    assert.equal(fold('min', 'INT', stored, [5]), 5);
  });
});

describe('value functions', () => {
  it('last_value takes the written value, null included', () => {
    assert.equal(fold('last_value', 'STRING', 'a', ['b']), 'b');
    assert.equal(fold('last_value', 'STRING', 'a', ['b', null]), null);
    assert.equal(fold('last_value', 'STRING', null, [null]), null);
  });

  it('last_value_ignore_nulls takes the written value unless it is null', () => {
    assert.equal(fold('last_value_ignore_nulls', 'STRING', 'a', [null]), 'a');
    assert.equal(fold('last_value_ignore_nulls', 'STRING', 'a', ['b', null]), 'b');
    assert.equal(fold('last_value_ignore_nulls', 'BYTES', null, [null]), null);
    const bytes = Uint8Array.of(1, 2);
    assert.equal(fold('last_value_ignore_nulls', 'BYTES', Uint8Array.of(9), [bytes]), bytes);
  });

  it('first_value keeps the stored value, null included', () => {
    assert.equal(fold('first_value', 'INT', 1, [2, null, 3]), 1);
    assert.equal(fold('first_value', 'INT', null, [2, 3]), null);
  });

  it('first_value_ignore_nulls keeps the first non-null value', () => {
    assert.equal(fold('first_value_ignore_nulls', 'INT', null, [null, 2, 3]), 2);
    assert.equal(fold('first_value_ignore_nulls', 'INT', 1, [2]), 1);
    assert.equal(fold('first_value_ignore_nulls', 'BOOLEAN', false, [true]), false);
  });
});

describe('listagg', () => {
  it('joins with the delimiter, skipping nulls but not empty strings', () => {
    assert.equal(fold('listagg', 'STRING', 'developer', ['java', 'flink']), 'developer,java,flink');
    assert.equal(fold('listagg', 'STRING', 'a', [null, 'b', null]), 'a,b');
    assert.equal(fold('listagg', 'STRING', null, ['a']), 'a');
    assert.equal(fold('listagg', 'STRING', null, [null]), null);
    assert.equal(fold('listagg', 'STRING', '', ['a']), ',a');
    assert.equal(fold('listagg', 'STRING', 'a', ['']), 'a,');
    assert.equal(fold('listagg', 'STRING', '', ['']), ',');
    assert.equal(fold('listagg', 'CHAR(3)', 'x', ['y', 'z'], ' | '), 'x | y | z');
  });
});

describe('bool_and and bool_or', () => {
  it('combine booleans, ignoring nulls', () => {
    assert.equal(fold('bool_and', 'BOOLEAN', true, [true, null]), true);
    assert.equal(fold('bool_and', 'BOOLEAN', true, [true, false, true]), false);
    assert.equal(fold('bool_and', 'BOOLEAN', null, [false]), false);
    assert.equal(fold('bool_or', 'BOOLEAN', false, [false, null]), false);
    assert.equal(fold('bool_or', 'BOOLEAN', false, [true, false]), true);
    assert.equal(fold('bool_or', 'BOOLEAN', null, [null]), null);
  });
});

describe('createAggregator', () => {
  it('refuses column types the function cannot combine', () => {
    assert.throws(() => createAggregator('sum', column('STRING'), ','), fails('INVALID_CONFIG_EXCEPTION', /sum cannot aggregate column 'c' of type STRING/));
    assert.throws(() => createAggregator('product', column('DATE'), ','), fails('INVALID_CONFIG_EXCEPTION'));
    assert.throws(() => createAggregator('max', column('BOOLEAN'), ','), fails('INVALID_CONFIG_EXCEPTION', /max and min cannot compare/));
    assert.throws(() => createAggregator('min', column('BYTES'), ','), fails('INVALID_CONFIG_EXCEPTION'));
  });
});
