import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as arrow from 'apache-arrow';
import { buildSchema } from '../common/schema.js';
import { parseDataType } from '../common/types.js';
import { sameArrowType, toArrowSchema, toArrowType } from './arrow-schema.js';
import { sampleSchema } from './fixtures/sample.js';

describe('toArrowType', () => {
  const cases: [string, arrow.DataType][] = [
    ['BOOLEAN', new arrow.Bool()],
    ['TINYINT', new arrow.Int8()],
    ['SMALLINT', new arrow.Int16()],
    ['INT', new arrow.Int32()],
    ['BIGINT', new arrow.Int64()],
    ['FLOAT', new arrow.Float32()],
    ['DOUBLE', new arrow.Float64()],
    ['DECIMAL(38, 10)', new arrow.Decimal(10, 38, 128)],
    ['DECIMAL(5, 0)', new arrow.Decimal(0, 5, 128)],
    ['CHAR(3)', new arrow.Utf8()],
    ['STRING', new arrow.Utf8()],
    ['BINARY(16)', new arrow.Binary()],
    ['BYTES', new arrow.Binary()],
    ['DATE', new arrow.DateDay()],
    ['TIME(3)', new arrow.TimeMicrosecond()],
    ['TIMESTAMP(3)', new arrow.TimestampMicrosecond()],
    ['TIMESTAMP_LTZ(6)', new arrow.TimestampMicrosecond('UTC')],
  ];
  for (const [sql, expected] of cases) {
    it(`maps ${sql} to ${String(expected)}`, () => {
      const actual = toArrowType(parseDataType(sql));
      assert.ok(sameArrowType(actual, expected), `${String(actual)} != ${String(expected)}`);
    });
  }

  it('keeps decimal scale, precision and a 128-bit width', () => {
    const t = toArrowType(parseDataType('DECIMAL(12, 4)')) as arrow.Decimal;
    assert.deepEqual([t.precision, t.scale, t.bitWidth], [12, 4, 128]);
  });

  it('puts a UTC zone on TIMESTAMP_LTZ only', () => {
    assert.equal((toArrowType(parseDataType('TIMESTAMP_LTZ(3)')) as arrow.Timestamp).timezone, 'UTC');
    assert.equal((toArrowType(parseDataType('TIMESTAMP(3)')) as arrow.Timestamp).timezone, null);
  });
});

describe('sameArrowType', () => {
  it('tells types, units, zones and decimal shapes apart', () => {
    assert.ok(!sameArrowType(new arrow.Int32(), new arrow.Int64()));
    assert.ok(!sameArrowType(new arrow.TimestampMicrosecond(), new arrow.TimestampMillisecond()));
    assert.ok(!sameArrowType(new arrow.TimestampMicrosecond(), new arrow.TimestampMicrosecond('UTC')));
    assert.ok(!sameArrowType(new arrow.Decimal(2, 10, 128), new arrow.Decimal(2, 10, 256)));
    assert.ok(!sameArrowType(new arrow.Decimal(2, 10, 128), new arrow.Decimal(3, 10, 128)));
    assert.ok(!sameArrowType(new arrow.Utf8(), new arrow.LargeUtf8()));
  });

  it('treats a missing and an absent time zone alike', () => {
    assert.ok(sameArrowType(new arrow.TimestampMicrosecond(), new arrow.TimestampMicrosecond(null)));
  });
});

describe('toArrowSchema', () => {
  it('has one field per column with the column name and nullability', () => {
    const s = toArrowSchema(sampleSchema);
    assert.deepEqual(
      s.fields.map((f) => [f.name, f.nullable]),
      sampleSchema.columns.map((c) => [c.name, c.nullable]),
    );
    s.fields.forEach((f, i) => assert.ok(sameArrowType(f.type, toArrowType(sampleSchema.columns[i].type))));
  });

  it('makes primary-key columns non-nullable', () => {
    const s = toArrowSchema(buildSchema([{ name: 'k', type: 'INT' }, { name: 'v', type: 'STRING' }], ['k']));
    assert.deepEqual(s.fields.map((f) => f.nullable), [false, true]);
  });

  it('expresses projections in the order asked for', () => {
    const p = toArrowSchema(sampleSchema, [10, 0, 4]);
    assert.deepEqual(p.fields.map((f) => f.name), ['s', 'b', 'i64']);
    assert.ok(sameArrowType(p.fields[0].type, new arrow.Utf8()));
    assert.equal(p.fields[2].nullable, false);
  });

  it('returns the same object for the same schema and projection', () => {
    assert.equal(toArrowSchema(sampleSchema), toArrowSchema(sampleSchema));
    assert.equal(toArrowSchema(sampleSchema, [2, 1]), toArrowSchema(sampleSchema, [2, 1]));
    assert.notEqual(toArrowSchema(sampleSchema, [2, 1]), toArrowSchema(sampleSchema, [1, 2]));
  });

  it('rejects out-of-range and repeated projections', () => {
    for (const columns of [[17], [-1], [1.5], [3, 3]]) {
      assert.throws(() => toArrowSchema(sampleSchema, columns), { errorName: 'INVALID_COLUMN_PROJECTION' }, String(columns));
    }
  });

  it('projects on no column to a schema without fields', () => {
    assert.equal(toArrowSchema(sampleSchema, []).fields.length, 0);
  });
});
