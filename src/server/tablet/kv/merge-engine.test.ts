import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TributaryError, type ErrorName } from '../../../common/errors.js';
import { buildSchema, type ColumnSpec, type Schema } from '../../../common/schema.js';
import { createMergeEngine, type MergeEngine, type MergeInput, type MergeResult } from './merge-engine.js';
import { random } from '../../../../test/support/random.js';

const fails = (name: ErrorName, pattern?: RegExp) => (e: unknown): boolean =>
  e instanceof TributaryError && e.errorName === name && (pattern === undefined || pattern.test(e.message));

/**
 * A key's stored row kept between steps, the way the KV tablet keeps it: each step gives the
 * engine the stored row (unless the engine says it does not need it) and stores what it returns.
 */
class Key {
  row: unknown[] | undefined;
  constructor(readonly engine: MergeEngine) {}

  upsert(row: unknown[], targetColumns?: number[]): MergeResult {
    return this.apply({ old: this.engine.needsOldValue || targetColumns ? this.row : undefined, upsert: row, ...(targetColumns ? { targetColumns } : {}) });
  }

  delete(row: unknown[], targetColumns?: number[]): MergeResult {
    return this.apply({ old: this.row, delete: row, ...(targetColumns ? { targetColumns } : {}) });
  }

  private apply(input: MergeInput): MergeResult {
    const result = this.engine.merge(input);
    if (result.value !== undefined) this.row = result.value ?? undefined;
    else assert.deepEqual(result.changes, [], 'no change emits no changelog');
    return result;
  }
}

const people: ColumnSpec[] = [
  { name: 'id', type: 'INT' },
  { name: 'name', type: 'STRING' },
  { name: 'score', type: 'BIGINT' },
];
const peopleSchema = buildSchema(people, ['id']);
const key = (properties: Record<string, string> = {}, schema: Schema = peopleSchema) => new Key(createMergeEngine({ schema, properties }));

describe('last_row', () => {
  it('inserts, replaces and deletes with a full changelog', () => {
    const k = key();
    assert.equal(k.engine.insertOnly, false);
    assert.equal(k.engine.needsOldValue, true);
    assert.equal(k.engine.upsertsBlind, true);
    assert.deepEqual(k.upsert([1, 'a', 10n]), { value: [1, 'a', 10n], changes: [{ type: '+I', row: [1, 'a', 10n] }] });
    assert.deepEqual(k.upsert([1, 'b', null]), {
      value: [1, 'b', null],
      changes: [{ type: '-U', row: [1, 'a', 10n] }, { type: '+U', row: [1, 'b', null] }],
    });
    // a row equal to the stored one is still an update, as in Fluss
    assert.deepEqual(k.upsert([1, 'b', null]).changes, [{ type: '-U', row: [1, 'b', null] }, { type: '+U', row: [1, 'b', null] }]);
    assert.deepEqual(k.delete([1, null, null]), { value: null, changes: [{ type: '-D', row: [1, 'b', null] }] });
    assert.equal(k.row, undefined);
    assert.deepEqual(k.delete([1, null, null]), { value: undefined, changes: [] });
    assert.deepEqual(k.upsert([1, 'c', 2n ** 60n]).changes, [{ type: '+I', row: [1, 'c', 2n ** 60n] }]);
  });

  it('with the WAL image writes only +U, and full-row upserts need no stored row', () => {
    const k = key({ 'table.changelog.image': 'WAL' });
    assert.equal(k.engine.needsOldValue, false);
    assert.deepEqual(k.upsert([1, 'a', 1n]), { value: [1, 'a', 1n], changes: [{ type: '+U', row: [1, 'a', 1n] }] });
    // given the stored row anyway, a full-row upsert is still +U alone
    assert.deepEqual(k.engine.merge({ old: [1, 'a', 1n], upsert: [1, 'b', 2n] }).changes, [{ type: '+U', row: [1, 'b', 2n] }]);
    k.row = [1, 'a', 1n];
    assert.deepEqual(k.upsert([1, 'z', 9n], [0, 1]), { value: [1, 'z', 1n], changes: [{ type: '+U', row: [1, 'z', 1n] }] });
    assert.deepEqual(k.delete([1, null, null]), { value: null, changes: [{ type: '-D', row: [1, 'z', 1n] }] });
    assert.deepEqual(k.upsert([2, 'n', null], [0, 1]).changes, [{ type: '+I', row: [2, 'n', null] }]);
    // every column targeted is a full-row write, which needs no stored row either
    assert.deepEqual(k.engine.merge({ old: undefined, upsert: [3, 'm', 1n], targetColumns: [2, 0, 1] }).changes, [{ type: '+U', row: [3, 'm', 1n] }]);
  });

  it('partially updates the target columns and keeps the others', () => {
    const k = key();
    assert.deepEqual(k.upsert([1, 'a', 99n], [0, 1]), { value: [1, 'a', null], changes: [{ type: '+I', row: [1, 'a', null] }] });
    assert.deepEqual(k.upsert([1, 'ignored', 5n], [2, 0]), {
      value: [1, 'a', 5n],
      changes: [{ type: '-U', row: [1, 'a', null] }, { type: '+U', row: [1, 'a', 5n] }],
    });
    assert.deepEqual(k.upsert([1, null, 6n], [0, 1]).value, [1, null, 5n]);
    // every column targeted is a full-row write
    assert.deepEqual(k.upsert([1, 'x', 7n], [2, 1, 0]).value, [1, 'x', 7n]);
  });

  it('changes nothing when a partial update targets only the primary key of a stored key', () => {
    const k = key();
    k.upsert([1, 'a', 1n]);
    assert.deepEqual(k.upsert([1, 'b', 2n], [0]), { value: undefined, changes: [] });
    assert.deepEqual(k.row, [1, 'a', 1n]);
    const fresh = key();
    assert.deepEqual(fresh.upsert([3, 'b', 2n], [0]).changes, [{ type: '+I', row: [3, null, null] }]);
  });

  it('partially deletes: nulls the target columns, removes the row once the others are all null', () => {
    const k = key();
    k.upsert([1, 'a', 5n]);
    assert.deepEqual(k.delete([1, null, null], [0, 2]), {
      value: [1, 'a', null],
      changes: [{ type: '-U', row: [1, 'a', 5n] }, { type: '+U', row: [1, 'a', null] }],
    });
    // 'score' (not a target) is null now, so deleting 'name' removes the row
    assert.deepEqual(k.delete([1, null, null], [0, 1]), { value: null, changes: [{ type: '-D', row: [1, 'a', null] }] });
    assert.deepEqual(k.delete([1, null, null], [0, 1]), { value: undefined, changes: [] });
  });

  it('rejects a partial delete that would null a NOT NULL column', () => {
    const schema = buildSchema([{ name: 'id', type: 'INT' }, { name: 'req', type: 'INT', nullable: false }, { name: 'opt', type: 'STRING' }], ['id']);
    const k = key({}, schema);
    k.upsert([1, 7, 'x']);
    assert.throws(() => k.delete([1, null, null], [0, 1]), fails('INVALID_TARGET_COLUMN', /column 'req' is NOT NULL/));
    assert.deepEqual(k.row, [1, 7, 'x']);
    // with every other column null the row goes as a whole, nothing is nulled
    const bare = key({}, schema);
    bare.upsert([2, 7, null]);
    assert.deepEqual(bare.delete([2, null, null], [0, 1]).changes, [{ type: '-D', row: [2, 7, null] }]);
  });

  it('rejects target columns without the primary key or leaving a NOT NULL column out', () => {
    const k = key();
    assert.throws(() => k.upsert([1, 'a', 1n], [1, 2]), fails('INVALID_TARGET_COLUMN', /must include the primary key/));
    const schema = buildSchema([{ name: 'id', type: 'INT' }, { name: 'req', type: 'INT', nullable: false }, { name: 'opt', type: 'STRING' }], ['id']);
    assert.throws(() => key({}, schema).upsert([1, 1, 'a'], [0, 2]), fails('INVALID_TARGET_COLUMN', /'req' is NOT NULL/));
  });

  it('ignores or refuses deletes per table.delete.behavior', () => {
    const ignoring = key({ 'table.delete.behavior': 'IGNORE' });
    ignoring.upsert([1, 'a', 1n]);
    assert.deepEqual(ignoring.delete([1, null, null]), { value: undefined, changes: [] });
    assert.deepEqual(ignoring.delete([1, null, null], [0, 1]), { value: undefined, changes: [] });
    const refusing = key({ 'table.delete.behavior': 'DISABLE' });
    refusing.upsert([1, 'a', 1n]);
    assert.throws(() => refusing.delete([1, null, null]), fails('DELETION_DISABLED_EXCEPTION', /table.delete.behavior/));
    assert.throws(() => refusing.delete([2, null, null]), fails('DELETION_DISABLED_EXCEPTION'));
    assert.deepEqual(refusing.row, [1, 'a', 1n]);
  });

  it('reads a stored row of an older, shorter schema with nulls in the added columns', () => {
    const engine = createMergeEngine({ schema: peopleSchema, properties: {} });
    assert.deepEqual(engine.merge({ old: [1, 'a'], upsert: [1, 'b', 3n] }).changes, [
      { type: '-U', row: [1, 'a', null] },
      { type: '+U', row: [1, 'b', 3n] },
    ]);
    assert.deepEqual(engine.merge({ old: [1, 'a'], upsert: [1, null, 3n], targetColumns: [0, 2] }).value, [1, 'a', 3n]);
    assert.deepEqual(engine.merge({ old: [1, 'a'], delete: [1, null, null] }).changes, [{ type: '-D', row: [1, 'a', null] }]);
    assert.deepEqual(engine.merge({ old: [1, 'a'], delete: [1, null, null], targetColumns: [0, 1] }).value, null);
  });

  it('never mutates its inputs', () => {
    const engine = createMergeEngine({ schema: peopleSchema, properties: {} });
    const old = Object.freeze([1, 'a', 1n]) as unknown[];
    const row = Object.freeze([1, 'b', null]) as unknown[];
    const targets = Object.freeze([0, 1]) as number[];
    engine.merge({ old, upsert: row, targetColumns: targets });
    engine.merge({ old, delete: row, targetColumns: [0, 2] });
    engine.merge({ old: undefined, upsert: row, targetColumns: targets });
  });
});

describe('first_row', () => {
  const firstRow = { 'table.merge-engine': 'first_row' };

  it('keeps the first row and writes an insert-only changelog', () => {
    const k = key(firstRow);
    assert.equal(k.engine.insertOnly, true);
    assert.deepEqual(k.upsert([1, 'first', 1n]), { value: [1, 'first', 1n], changes: [{ type: '+I', row: [1, 'first', 1n] }] });
    assert.deepEqual(k.upsert([1, 'second', 2n]), { value: undefined, changes: [] });
    assert.deepEqual(k.row, [1, 'first', 1n]);
  });

  it('ignores deletes by default and refuses them when disabled', () => {
    const k = key(firstRow);
    k.upsert([1, 'first', 1n]);
    assert.deepEqual(k.delete([1, null, null]), { value: undefined, changes: [] });
    assert.deepEqual(k.row, [1, 'first', 1n]);
    const refusing = key({ ...firstRow, 'table.delete.behavior': 'DISABLE' });
    assert.throws(() => refusing.delete([1, null, null]), fails('DELETION_DISABLED_EXCEPTION'));
    assert.throws(() => createMergeEngine({ schema: peopleSchema, properties: { ...firstRow, 'table.delete.behavior': 'ALLOW' } }), fails('INVALID_CONFIG_EXCEPTION'));
  });

  it('refuses partial updates', () => {
    assert.throws(() => key(firstRow).upsert([1, 'a', 1n], [0, 1]), fails('INVALID_TARGET_COLUMN', /first_row/));
    assert.throws(() => key(firstRow).upsert([1, 'a', 1n], [0, 1, 2]), fails('INVALID_TARGET_COLUMN', /first_row/));
  });

  it('writes +I with the WAL image too', () => {
    const k = key({ ...firstRow, 'table.changelog.image': 'WAL' });
    assert.equal(k.engine.needsOldValue, true);
    assert.equal(k.engine.upsertsBlind, false, 'first_row keeps the stored row');
    assert.deepEqual(k.upsert([1, 'a', 1n]).changes, [{ type: '+I', row: [1, 'a', 1n] }]);
    assert.deepEqual(k.upsert([1, 'b', 1n]).changes, []);
  });
});

describe('versioned', () => {
  const versioned = (column: string, extra: Record<string, string> = {}) => ({ 'table.merge-engine': 'versioned', 'table.merge-engine.versioned.ver-column': column, ...extra });

  it('keeps the row of the highest version, replacing on an equal version', () => {
    const k = key(versioned('score'));
    assert.deepEqual(k.upsert([1, 'v5', 5n]).changes, [{ type: '+I', row: [1, 'v5', 5n] }]);
    assert.deepEqual(k.upsert([1, 'v3', 3n]), { value: undefined, changes: [] });
    assert.deepEqual(k.upsert([1, 'v5 again', 5n]).changes, [{ type: '-U', row: [1, 'v5', 5n] }, { type: '+U', row: [1, 'v5 again', 5n] }]);
    assert.deepEqual(k.upsert([1, 'big', 2n ** 62n]).value, [1, 'big', 2n ** 62n]);
    assert.deepEqual(k.upsert([1, 'just below', 2n ** 62n - 1n]).value, undefined);
    assert.deepEqual(k.upsert([1, 'negative', -1n]).value, undefined);
  });

  it('treats a null version as the smallest', () => {
    const k = key(versioned('score'));
    k.upsert([1, 'v1', 1n]);
    assert.deepEqual(k.upsert([1, 'no version', null]), { value: undefined, changes: [] });
    const n = key(versioned('score'));
    assert.deepEqual(n.upsert([2, 'no version', null]).changes, [{ type: '+I', row: [2, 'no version', null] }]);
    assert.deepEqual(n.upsert([2, 'still none', null]).value, [2, 'still none', null]);
    assert.deepEqual(n.upsert([2, 'min', -(2n ** 63n)]).value, [2, 'min', -(2n ** 63n)]);
    assert.deepEqual(n.upsert([2, 'none again', null]).value, undefined);
  });

  it('compares INT and timestamp versions', () => {
    const schema = buildSchema([{ name: 'id', type: 'INT' }, { name: 'v', type: 'INT' }, { name: 'ts', type: 'TIMESTAMP_LTZ(6)' }], ['id']);
    const byInt = key(versioned('v'), schema);
    byInt.upsert([1, 10, 0n]);
    assert.equal(byInt.upsert([1, 9, 0n]).value, undefined);
    assert.deepEqual(byInt.upsert([1, 11, 0n]).value, [1, 11, 0n]);
    const byTime = key(versioned('ts'), schema);
    byTime.upsert([1, 0, 1_700_000_000_000_000n]);
    assert.equal(byTime.upsert([1, 1, 1_699_999_999_999_999n]).value, undefined);
    assert.deepEqual(byTime.upsert([1, 2, 1_700_000_000_000_001n]).value, [1, 2, 1_700_000_000_000_001n]);
  });

  it('writes only +U for updates with the WAL image', () => {
    const k = key(versioned('score', { 'table.changelog.image': 'WAL' }));
    assert.equal(k.engine.needsOldValue, true);
    assert.equal(k.engine.upsertsBlind, false, 'versioned compares the rows');
    k.upsert([1, 'a', 1n]);
    assert.deepEqual(k.upsert([1, 'b', 2n]).changes, [{ type: '+U', row: [1, 'b', 2n] }]);
  });

  it('ignores or refuses deletes and refuses partial updates', () => {
    const k = key(versioned('score'));
    k.upsert([1, 'a', 1n]);
    assert.deepEqual(k.delete([1, null, null]), { value: undefined, changes: [] });
    assert.throws(() => key(versioned('score', { 'table.delete.behavior': 'DISABLE' })).delete([1, null, null]), fails('DELETION_DISABLED_EXCEPTION'));
    assert.throws(() => k.upsert([1, 'b', 2n], [0, 2]), fails('INVALID_TARGET_COLUMN', /versioned/));
  });
});

describe('aggregation', () => {
  // Fluss's documented example: price max, sales sum, last_update_time the default function
  const stats = buildSchema(
    [
      { name: 'product_id', type: 'BIGINT' },
      { name: 'price', type: 'DOUBLE' },
      { name: 'sales', type: 'BIGINT' },
      { name: 'last_update_time', type: 'TIMESTAMP(3)' },
    ],
    ['product_id'],
  );
  const aggregation = { 'table.merge-engine': 'aggregation', 'fields.price.agg': 'max', 'fields.sales.agg': 'sum' };
  const t1 = 1_704_103_200_000_000n;
  const t2 = 1_704_106_800_000_000n;

  it('aggregates each column with its function', () => {
    const k = key(aggregation, stats);
    assert.deepEqual(k.upsert([1n, 23.0, 15n, t1]).changes, [{ type: '+I', row: [1n, 23.0, 15n, t1] }]);
    assert.deepEqual(k.upsert([1n, 30.2, 20n, t2]), {
      value: [1n, 30.2, 35n, t2],
      changes: [{ type: '-U', row: [1n, 23.0, 15n, t1] }, { type: '+U', row: [1n, 30.2, 35n, t2] }],
    });
    assert.deepEqual(k.upsert([1n, null, null, null]), {
      value: [1n, 30.2, 35n, t2],
      changes: [{ type: '-U', row: [1n, 30.2, 35n, t2] }, { type: '+U', row: [1n, 30.2, 35n, t2] }],
    });
    assert.deepEqual(k.upsert([1n, 1.5, 2n ** 62n, null]).value, [1n, 30.2, 2n ** 62n + 35n, t2]);
  });

  it('fails a write that overflows and leaves the row as it was', () => {
    const k = key(aggregation, stats);
    k.upsert([1n, 1.0, 2n ** 62n, t1]);
    assert.throws(() => k.upsert([1n, 2.0, 2n ** 62n, t2]), fails('INVALID_ROW', /sum of column 'sales' overflows BIGINT/));
    assert.deepEqual(k.row, [1n, 1.0, 2n ** 62n, t1]);
  });

  it('aggregates only the target columns of a partial update', () => {
    const k = key(aggregation, stats);
    assert.deepEqual(k.upsert([1n, 9.0, 5n, t1], [0, 2]).changes, [{ type: '+I', row: [1n, null, 5n, null] }]);
    assert.deepEqual(k.upsert([1n, 9.0, 5n, t1], [0, 2]).value, [1n, null, 10n, null]);
    assert.deepEqual(k.upsert([1n, 4.0, 100n, t2], [1, 0]).value, [1n, 4.0, 10n, null]);
    assert.deepEqual(k.upsert([1n, 3.0, 1n, t2], [0]), { value: undefined, changes: [] });
  });

  it('ignores deletes by default; with ALLOW removes the row or nulls the target columns', () => {
    const k = key(aggregation, stats);
    k.upsert([1n, 1.0, 1n, t1]);
    assert.deepEqual(k.delete([1n, null, null, null]), { value: undefined, changes: [] });
    const allowing = key({ ...aggregation, 'table.delete.behavior': 'ALLOW' }, stats);
    allowing.upsert([1n, 1.0, 1n, t1]);
    assert.deepEqual(allowing.delete([1n, null, null, null], [0, 2]).changes, [
      { type: '-U', row: [1n, 1.0, 1n, t1] },
      { type: '+U', row: [1n, 1.0, null, t1] },
    ]);
    // sums restart from the nulled value
    assert.deepEqual(allowing.upsert([1n, null, 4n, null]).value, [1n, 1.0, 4n, t1]);
    assert.deepEqual(allowing.delete([1n, null, null, null]).changes, [{ type: '-D', row: [1n, 1.0, 4n, t1] }]);
    const refusing = key({ ...aggregation, 'table.delete.behavior': 'DISABLE' }, stats);
    assert.throws(() => refusing.delete([1n, null, null, null]), fails('DELETION_DISABLED_EXCEPTION'));
  });

  it('cannot be created with the WAL image', () => {
    assert.throws(() => createMergeEngine({ schema: stats, properties: { ...aggregation, 'table.changelog.image': 'WAL' } }), fails('INVALID_CONFIG_EXCEPTION', /needs 'table.changelog.image' = FULL/));
  });
});

// ---------------------------------------------------------------------------------------------
// Randomized: thousands of operation sequences against a model that keeps, per key and column, the
// list of values the column received since the row was created, and recomputes each column from
// that list (whole-list functions instead of the engine's pairwise steps).

/** The wide table of the randomized runs: a two-column key in the middle and one column per function. */
const WIDE: ColumnSpec[] = [
  { name: 'id', type: 'INT' },
  { name: 'ver', type: 'BIGINT' },
  { name: 'region', type: 'STRING' },
  { name: 's_int', type: 'INT' },
  { name: 's_big', type: 'BIGINT' },
  { name: 's_dec', type: 'DECIMAL(10, 2)' },
  { name: 'p_dec', type: 'DECIMAL(12, 2)' },
  { name: 'p_int', type: 'INT' },
  { name: 'f', type: 'FLOAT' },
  { name: 'mx', type: 'STRING' },
  { name: 'mn', type: 'TIMESTAMP(6)' },
  { name: 'lv', type: 'STRING' },
  { name: 'lvn', type: 'STRING' },
  { name: 'fv', type: 'STRING' },
  { name: 'fvn', type: 'INT' },
  { name: 'la', type: 'STRING' },
  { name: 'ba', type: 'BOOLEAN' },
  { name: 'bo', type: 'BOOLEAN' },
];
const wide = buildSchema(WIDE, ['id', 'region']);
const NAMES = WIDE.map((c) => c.name);
const KEY = new Set(['id', 'region']);
const AGGREGATION_PROPS: Record<string, string> = {
  'table.merge-engine': 'aggregation',
  'fields.ver.agg': 'max',
  'fields.s_int.agg': 'sum',
  'fields.s_big.agg': 'sum',
  'fields.s_dec.agg': 'sum',
  'fields.p_dec.agg': 'product',
  'fields.p_int.agg': 'product',
  'fields.f.agg': 'sum',
  'fields.mx.agg': 'max',
  'fields.mn.agg': 'min',
  'fields.lv.agg': 'last_value',
  'fields.fv.agg': 'first_value',
  'fields.fvn.agg': 'first_value_ignore_nulls',
  'fields.la.agg': 'listagg',
  'fields.la.listagg.delimiter': ';',
  'fields.ba.agg': 'bool_and',
  'fields.bo.agg': 'bool_or',
};

class Overflow extends Error {}

function inRange(v: bigint, lo: bigint, hi: bigint): bigint {
  if (v < lo || v > hi) throw new Overflow();
  return v;
}
const I32 = [-(2n ** 31n), 2n ** 31n - 1n] as const;
const I64 = [-(2n ** 63n), 2n ** 63n - 1n] as const;
const D10 = [-(10n ** 10n) + 1n, 10n ** 10n - 1n] as const;
const D12 = [-(10n ** 12n) + 1n, 10n ** 12n - 1n] as const;
const present = (values: unknown[]) => values.filter((v) => v !== null);
const utf8Max = (a: string, b: string) => (Buffer.compare(Buffer.from(b, 'utf8'), Buffer.from(a, 'utf8')) > 0 ? b : a);
/** HALF_UP rounding of n / 100, written as floor((2|n| + 100) / 200) with the sign put back. */
const centsRound = (n: bigint) => (n < 0n ? -1n : 1n) * ((2n * (n < 0n ? -n : n) + 100n) / 200n);

/** Each aggregated column's value from the values it received, in order; throws Overflow. */
const MODEL_AGGREGATES: Record<string, (values: unknown[]) => unknown> = {
  ver: (vs) => present(vs).reduce<unknown>((m, v) => (m === null || (v as bigint) > (m as bigint) ? v : m), null),
  s_int: (vs) => (present(vs).length ? Number(inRange(present(vs).reduce<bigint>((s, v) => s + BigInt(v as number), 0n), ...I32)) : null),
  s_big: (vs) => (present(vs).length ? inRange(present(vs).reduce<bigint>((s, v) => s + (v as bigint), 0n), ...I64) : null),
  s_dec: (vs) => (present(vs).length ? inRange(present(vs).reduce<bigint>((s, v) => s + (v as bigint), 0n), ...D10) : null),
  p_dec: (vs) => {
    const p = present(vs) as bigint[];
    return p.length ? p.slice(1).reduce((acc, v) => inRange(centsRound(acc * v), ...D12), p[0]) : null;
  },
  p_int: (vs) => {
    const p = present(vs) as number[];
    return p.length ? p.slice(1).reduce((acc, v) => Number(inRange(BigInt(acc) * BigInt(v), ...I32)), p[0]) : null;
  },
  f: (vs) => {
    const p = present(vs) as number[];
    return p.length ? p.slice(1).reduce((acc, v) => Math.fround(acc + v), p[0]) : null;
  },
  mx: (vs) => (present(vs) as string[]).reduce<string | null>((m, v) => (m === null ? v : utf8Max(m, v)), null),
  mn: (vs) => (present(vs) as bigint[]).reduce<bigint | null>((m, v) => (m === null || v < m ? v : m), null),
  lv: (vs) => vs[vs.length - 1],
  lvn: (vs) => present(vs).at(-1) ?? null,
  fv: (vs) => vs[0],
  fvn: (vs) => present(vs)[0] ?? null,
  la: (vs) => (present(vs).length ? present(vs).join(';') : null),
  ba: (vs) => (present(vs).length ? present(vs).every((v) => v === true) : null),
  bo: (vs) => (present(vs).length ? present(vs).some((v) => v === true) : null),
};

type Op = { kind: 'upsert' | 'delete'; row: Record<string, unknown>; targets?: string[] };
type ModelConfig = { engine: 'last_row' | 'first_row' | 'versioned' | 'aggregation'; deletes: 'ALLOW' | 'IGNORE' | 'DISABLE'; wal: boolean };
type Outcome = { error: string } | { changes: [string, Record<string, unknown>][] };

/** The model: key → column → values received since the row was created. */
class Model {
  private readonly rows = new Map<string, Map<string, unknown[]>>();
  constructor(private readonly config: ModelConfig) {}

  /** The row of a key as column → value, or undefined. */
  current(keyOf: string): Record<string, unknown> | undefined {
    const histories = this.rows.get(keyOf);
    return histories && this.materialize(histories);
  }

  private materialize(histories: Map<string, unknown[]>): Record<string, unknown> {
    const row: Record<string, unknown> = {};
    for (const [name, values] of histories) {
      const aggregate = this.config.engine === 'aggregation' && !KEY.has(name) ? (MODEL_AGGREGATES[name] ?? MODEL_AGGREGATES.lvn) : (vs: unknown[]) => vs[vs.length - 1];
      row[name] = aggregate(values);
    }
    return row;
  }

  apply(op: Op): Outcome {
    const { engine, deletes, wal } = this.config;
    const k = `${op.row.id}/${op.row.region}`;
    const before = this.current(k);
    const partial = op.targets !== undefined && op.targets.length < NAMES.length;
    if (op.targets && (engine === 'first_row' || engine === 'versioned')) return { error: 'INVALID_TARGET_COLUMN' };
    const targeted = (name: string) => !partial || op.targets!.includes(name);

    if (op.kind === 'delete') {
      if (deletes === 'DISABLE') return { error: 'DELETION_DISABLED_EXCEPTION' };
      if (deletes === 'IGNORE' || before === undefined) return { changes: [] };
      if (!partial || NAMES.every((n) => targeted(n) || before[n] === null)) {
        this.rows.delete(k);
        return { changes: [['-D', before]] };
      }
      const histories = this.rows.get(k)!;
      for (const n of NAMES) if (targeted(n) && !KEY.has(n)) histories.set(n, [null]);
      return this.updated(before, this.materialize(histories));
    }

    if (engine === 'last_row' && wal && !partial) {
      this.rows.set(k, new Map(NAMES.map((n) => [n, [op.row[n]]])));
      return { changes: [['+U', { ...op.row }]] };
    }
    if (before === undefined) {
      const histories = new Map(NAMES.map((n) => [n, [targeted(n) ? op.row[n] : null]]));
      this.rows.set(k, histories);
      return { changes: [['+I', this.materialize(histories)]] };
    }
    if (partial && op.targets!.every((n) => KEY.has(n))) return { changes: [] };
    if (engine === 'first_row') return { changes: [] };
    if (engine === 'versioned') {
      const [w, s] = [op.row.ver as bigint | null, before.ver as bigint | null];
      const wins = w === null ? s === null : s === null || w >= s;
      if (!wins) return { changes: [] };
      this.rows.set(k, new Map(NAMES.map((n) => [n, [op.row[n]]])));
      return this.updated(before, { ...op.row });
    }
    // last_row and aggregation: append the targeted values to their columns' histories
    const histories = this.rows.get(k)!;
    const next = new Map([...histories].map(([n, vs]) => [n, targeted(n) && !KEY.has(n) ? [...vs, op.row[n]] : vs]));
    let after: Record<string, unknown>;
    try {
      after = this.materialize(next);
    } catch (e) {
      if (e instanceof Overflow) return { error: 'INVALID_ROW' };
      throw e;
    }
    this.rows.set(k, next);
    return this.updated(before, after);
  }

  private updated(before: Record<string, unknown>, after: Record<string, unknown>): Outcome {
    return { changes: this.config.wal ? [['+U', after]] : [['-U', before], ['+U', after]] };
  }
}


function generator(rnd: () => number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
  const nullable = (v: () => unknown) => () => (rnd() < 0.25 ? null : v());
  const values: Record<string, () => unknown> = {
    id: () => pick([1, 2, 3]),
    region: () => pick(['eu', 'us']),
    ver: nullable(() => BigInt(pick([-2, 0, 1, 2, 3]))),
    s_int: nullable(() => pick([-5, 1, 7, 2147483000, -2147483000])),
    s_big: nullable(() => pick([1n, -3n, 2n ** 53n + 1n, 2n ** 61n, -(2n ** 61n)])),
    s_dec: nullable(() => pick([1n, -250n, 99_999n, 4_000_000_000n])),
    p_dec: nullable(() => pick([150n, 25n, -200n, 333n, 1n, 100n, 99_999_999n])),
    p_int: nullable(() => pick([-1, 2, 3, 0, 50_000])),
    f: nullable(() => pick([0.1, -2.5, 1e30, 3.4e38, 7]).valueOf()),
    mx: nullable(() => pick(['', 'a', 'ab', 'b', '\uFFFD', '😀', 'é'])),
    mn: nullable(() => pick([0n, -1n, 1_700_000_000_000_000n, 2n ** 62n])),
    lv: nullable(() => pick(['x', 'y', ''])),
    lvn: nullable(() => pick(['p', 'q'])),
    fv: nullable(() => pick(['first', 'second'])),
    fvn: nullable(() => pick([1, 2, 3])),
    la: nullable(() => pick(['x', 'y', '', 'z'])),
    ba: nullable(() => rnd() < 0.7),
    bo: nullable(() => rnd() < 0.3),
  };
  return (partials: boolean): Op => {
    const row: Record<string, unknown> = {};
    for (const n of NAMES) row[n] = values[n]();
    if (row.f !== null) row.f = Math.fround(row.f as number);
    const kind = rnd() < 0.25 ? 'delete' : 'upsert';
    if (!partials || rnd() < 0.5) return { kind, row };
    const targets = NAMES.filter((n) => KEY.has(n) || rnd() < 0.3);
    return { kind, row, targets };
  }
}

/**
 * Runs random sequences through the engine and the model side by side, comparing changelog, errors
 * and stored rows after every step; returns the outcomes seen (change types and error names).
 */
function runSequences(properties: Record<string, string>, config: ModelConfig, sequences: number, seed: number, partials: boolean): Set<string> {
  const columnIndex = new Map(NAMES.map((n, i) => [n, i]));
  const toArray = (row: Record<string, unknown>) => NAMES.map((n) => row[n]);
  const seen = new Set<string>();
  for (let s = 0; s < sequences; s++) {
    const rnd = random(seed + s);
    const next = generator(rnd);
    const engine = createMergeEngine({ schema: wide, properties });
    const model = new Model(config);
    const store = new Map<string, unknown[]>();
    const length = 5 + Math.floor(rnd() * 40);
    for (let step = 0; step < length; step++) {
      const op = next(partials);
      try {
        const k = `${op.row.id}/${op.row.region}`;
        const targetColumns = op.targets?.map((n) => columnIndex.get(n)!);
        const expected = model.apply(op);
        const lookUp = op.kind === 'delete' || targetColumns !== undefined || engine.needsOldValue;
        const input: MergeInput = { old: lookUp ? store.get(k) : undefined, [op.kind]: toArray(op.row), ...(targetColumns ? { targetColumns } : {}) };
        let result: MergeResult;
        try {
          result = engine.merge(input);
        } catch (e) {
          assert.ok(e instanceof TributaryError);
          assert.deepEqual({ error: e.errorName }, expected);
          seen.add(e.errorName);
          continue;
        }
        assert.deepEqual(
          { changes: result.changes.map((c) => [c.type, c.row]) },
          'changes' in expected ? { changes: expected.changes.map(([t, r]) => [t, toArray(r)]) } : expected,
        );
        for (const c of result.changes) seen.add(c.type);
        if (result.changes.length === 0) seen.add('none');
        if (result.value === null) store.delete(k);
        else if (result.value !== undefined) store.set(k, result.value);
        const modelRow = model.current(k);
        assert.deepEqual(store.get(k), modelRow && toArray(modelRow), 'stored row');
      } catch (e) {
        const shown = JSON.stringify(op, (_, v) => (typeof v === 'bigint' ? `${v}n` : v));
        throw new Error(`seed ${seed + s}, step ${step}: ${shown}`, { cause: e });
      }
    }
  }
  return seen;
}

describe('merge engines against the model, on random operation sequences', () => {
  const SEQUENCES = 400;
  const SUPPRESSED = ['none', 'INVALID_TARGET_COLUMN'];
  const cases: [string, Record<string, string>, ModelConfig, boolean, string[]][] = [
    ['last_row', {}, { engine: 'last_row', deletes: 'ALLOW', wal: false }, true, ['+I', '-U', '+U', '-D', 'none']],
    ['last_row, WAL image', { 'table.changelog.image': 'WAL' }, { engine: 'last_row', deletes: 'ALLOW', wal: true }, true, ['+I', '+U', '-D', 'none']],
    ['last_row, deletes ignored', { 'table.delete.behavior': 'IGNORE' }, { engine: 'last_row', deletes: 'IGNORE', wal: false }, true, ['+I', '-U', '+U', 'none']],
    ['last_row, deletes disabled', { 'table.delete.behavior': 'DISABLE' }, { engine: 'last_row', deletes: 'DISABLE', wal: false }, true, ['+I', '-U', '+U', 'none', 'DELETION_DISABLED_EXCEPTION']],
    ['first_row', { 'table.merge-engine': 'first_row' }, { engine: 'first_row', deletes: 'IGNORE', wal: false }, false, ['+I', 'none']],
    ['first_row, deletes disabled, WAL, partial writes refused', { 'table.merge-engine': 'first_row', 'table.delete.behavior': 'DISABLE', 'table.changelog.image': 'WAL' }, { engine: 'first_row', deletes: 'DISABLE', wal: true }, true, ['+I', 'none', ...SUPPRESSED, 'DELETION_DISABLED_EXCEPTION']],
    ['versioned', { 'table.merge-engine': 'versioned', 'table.merge-engine.versioned.ver-column': 'ver' }, { engine: 'versioned', deletes: 'IGNORE', wal: false }, false, ['+I', '-U', '+U', 'none']],
    ['versioned, WAL, partial writes refused', { 'table.merge-engine': 'versioned', 'table.merge-engine.versioned.ver-column': 'ver', 'table.changelog.image': 'WAL' }, { engine: 'versioned', deletes: 'IGNORE', wal: true }, true, ['+I', '+U', ...SUPPRESSED]],
    ['aggregation', AGGREGATION_PROPS, { engine: 'aggregation', deletes: 'IGNORE', wal: false }, true, ['+I', '-U', '+U', 'none', 'INVALID_ROW']],
    ['aggregation, deletes allowed', { ...AGGREGATION_PROPS, 'table.delete.behavior': 'ALLOW' }, { engine: 'aggregation', deletes: 'ALLOW', wal: false }, true, ['+I', '-U', '+U', '-D', 'none', 'INVALID_ROW']],
    ['aggregation, full-row writes only', { ...AGGREGATION_PROPS, 'table.delete.behavior': 'ALLOW' }, { engine: 'aggregation', deletes: 'ALLOW', wal: false }, false, ['+I', '-U', '+U', '-D', 'none', 'INVALID_ROW']],
  ];
  cases.forEach(([name, properties, config, partials, outcomes], i) => {
    it(name, () => {
      const seen = runSequences(properties, config, SEQUENCES, 1000 * (i + 1), partials);
      assert.deepEqual([...seen].sort(), [...new Set(outcomes)].sort(), 'the sequences reach every outcome of this engine');
    });
  });
});
