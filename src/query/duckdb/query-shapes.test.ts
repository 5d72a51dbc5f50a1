import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseDataType } from '../../common/types.js';
import { columnFiltersOf, countStarOf, keyLookupOf } from './query-shapes.js';
import { DuckSession } from './session.js';
import { parseSerializedSql } from './syntax-tree.js';

let session: DuckSession;
before(async () => {
  session = await DuckSession.create();
});
after(() => session.close());

const tree = async (sql: string): Promise<unknown> => (await session.syntaxTree(sql)).json;

test('integers of 16 digits and more are read as strings of digits, other JSON as JSON.parse reads it', () => {
  const text = '{"a":9007199254740993,"b":[-12345678901234567,1.5e300,42],"s":"x\\":12345678901234567,\\\\","n":null}';
  assert.deepEqual(parseSerializedSql(text), { a: '9007199254740993', b: ['-12345678901234567', 1.5e300, 42], s: 'x":12345678901234567,\\', n: null });
});

test('EXPLAIN is looked through and said', async () => {
  assert.equal((await session.syntaxTree('EXPLAIN SELECT 1')).explain, true);
  assert.equal((await session.syntaxTree('SELECT 1')).explain, false);
});

const counts: [string, { table: string; column: string } | undefined][] = [
  ['SELECT count(*) FROM t', { table: 't', column: 'count_star()' }],
  ['select COUNT(*) AS n from shop.orders;', { table: 'shop.orders', column: 'n' }],
  ['SELECT count(*) n FROM "t$changelog"', { table: 't$changelog', column: 'n' }],
  ['SELECT count(*) FROM t WHERE a = 1', undefined],
  ['SELECT count(*) FROM t GROUP BY a', undefined],
  ['SELECT count(*) FROM t HAVING count(*) > 1', undefined],
  ['SELECT count(*) FROM t LIMIT 0', undefined],
  ['SELECT count(*) FROM t ORDER BY 1', undefined],
  ['SELECT DISTINCT count(*) FROM t', undefined],
  ['SELECT count(*) FROM t USING SAMPLE 10%', undefined],
  ['SELECT count(a) FROM t', undefined],
  ['SELECT count(1) FROM t', undefined],
  ['SELECT count(*) FILTER (WHERE a > 1) FROM t', undefined],
  ['SELECT count(*) + 1 FROM t', undefined],
  ['SELECT count(*), 1 FROM t', undefined],
  ['SELECT count(*) FROM t, u', undefined],
  ['SELECT count(*) FROM t JOIN u ON t.a = u.a', undefined],
  ['SELECT count(*) FROM (SELECT * FROM t)', undefined],
  ['WITH t AS (SELECT 1) SELECT count(*) FROM t', undefined],
  ['SELECT count(*) FROM t UNION ALL SELECT count(*) FROM t', undefined],
];

for (const [sql, expected] of counts) {
  test(`count shape of: ${sql}`, async () => {
    const shape = countStarOf(await tree(sql));
    assert.deepEqual(shape && { table: [shape.table.schema, shape.table.table].filter(Boolean).join('.'), column: shape.column }, expected);
  });
}

/** Key columns written `name TYPE; name TYPE`. */
const key = (spec: string) =>
  spec.split(';').map((c) => {
    const [name, ...type] = c.trim().split(' ');
    return { name, type: parseDataType(type.join(' ')) };
  });

/** The keys' literals as DuckDB evaluates them, as text joined with '|'; undefined when no lookup. */
async function lookup(sql: string, keySpec: string, maxKeys = 100): Promise<string[] | undefined> {
  const columns = key(keySpec);
  const keys = keyLookupOf(await tree(sql), columns, maxKeys);
  if (!keys) return undefined;
  const out: string[] = [];
  for (const k of keys) {
    const r = await session.run(`SELECT ${k.map((lit) => `CAST(${lit} AS VARCHAR)`).join(', ')}`);
    out.push(r.rows[0].join('|'));
  }
  return out;
}

const lookups: [string, string, string[] | undefined][] = [
  ['SELECT * FROM t WHERE id = 1', 'id BIGINT', ['1']],
  ['SELECT * FROM t WHERE 1 = id AND v > 3', 'id BIGINT', ['1']],
  ['SELECT v FROM t x WHERE x.id IN (1, 2) OR t.id = -3', 'id BIGINT', ['1', '2', '-3']],
  ['SELECT * FROM db.t WHERE db.t.id = 9007199254740993', 'id BIGINT', ['9007199254740993']],
  ['SELECT * FROM t WHERE id = 170141183460469231731687303715884105727', 'id DECIMAL(38,0)', ['170141183460469231731687303715884105727']],
  ['SELECT * FROM t WHERE id = 12345678901234567890.123456789012345678', 'id DECIMAL(38,18)', ['12345678901234567890.123456789012345678']],
  ['SELECT * FROM t WHERE id = 1.5e0', 'id DOUBLE', ['1.5']],
  ['SELECT * FROM t WHERE ID = \'7\'', 'id INT', ['7']],
  ['SELECT * FROM t WHERE id = NULL', 'id INT', []],
  ['SELECT * FROM t WHERE id IN (1, NULL)', 'id INT', ['1']],
  ['SELECT * FROM t WHERE name = \'it\'\'s\'', 'name STRING', ["it's"]],
  ['SELECT * FROM t WHERE d = DATE \'2024-01-02\' AND ts = TIMESTAMPTZ \'2024-01-01 10:00:00+02\'', 'd DATE; ts TIMESTAMP_LTZ(6)', ['2024-01-02|2024-01-01 08:00:00+00']],
  ['SELECT * FROM t WHERE flag = true AND b = \'\\xAA\'::BLOB', 'flag BOOLEAN; b BYTES', ['true|\\xAA']],
  ['SELECT * FROM t WHERE (a = 1 AND b = \'x\') OR (a = 2 AND b = \'y\')', 'a INT; b STRING', ['1|x', '2|y']],
  ['SELECT * FROM t WHERE a IN (1, 2) AND (b = \'x\' OR b = \'y\')', 'a INT; b STRING', ['1|x', '1|y', '2|x', '2|y']],
  ['SELECT * FROM t WHERE a = 1 AND a = 2 AND b = \'x\'', 'a INT; b STRING', ['1|x']],
  // Not every key column pinned, or not in the column's own type, or not one table: not a lookup.
  ['SELECT * FROM t WHERE a = 1', 'a INT; b STRING', undefined],
  ['SELECT * FROM t WHERE (a = 1 AND b = \'x\') OR a = 2', 'a INT; b STRING', undefined],
  ['SELECT * FROM t WHERE a = 1 OR v > 2', 'a INT', undefined],
  ['SELECT * FROM t WHERE NOT a = 1', 'a INT', undefined],
  ['SELECT * FROM t WHERE a = b', 'a INT', undefined],
  ['SELECT * FROM t WHERE a = 1 + 1', 'a INT', undefined],
  ['SELECT * FROM t WHERE a = ?', 'a INT', undefined],
  ['SELECT * FROM t WHERE name = 1', 'name STRING', undefined],
  ['SELECT * FROM t WHERE d = TIME \'10:00:00\'', 'd DATE', undefined],
  ['SELECT * FROM t WHERE u.a = 1', 'a INT', undefined],
  ['SELECT * FROM t WHERE a = TRY_CAST(\'1\' AS INT)', 'a INT', undefined],
  ['SELECT * FROM t', 'a INT', undefined],
  ['SELECT * FROM t JOIN u USING (a) WHERE a = 1', 'a INT', undefined],
  ['SELECT * FROM t WHERE a = 1 AND v IN (SELECT v FROM t)', 'a INT', undefined],
  ['SELECT * FROM (SELECT * FROM t) WHERE a = 1', 'a INT', undefined],
  ['WITH t AS (SELECT 1 AS a) SELECT * FROM t WHERE a = 1', 'a INT', undefined],
  ['SELECT * FROM t WHERE a = 1 UNION ALL SELECT * FROM t WHERE a = 2', 'a INT', undefined],
  ['SELECT * FROM t WHERE a IN (1, 2, 3)', 'a INT', ['1', '2', '3']],
];

for (const [sql, keySpec, expected] of lookups) {
  test(`key lookup of: ${sql}`, async () => {
    assert.deepEqual(await lookup(sql, keySpec), expected);
  });
}

test('a lookup of more keys than allowed is no lookup', async () => {
  assert.equal(await lookup('SELECT * FROM t WHERE a IN (1, 2, 3)', 'a INT', 2), undefined);
  assert.equal(await lookup('SELECT * FROM t WHERE a IN (1, 2) AND b IN (1, 2)', 'a INT; b INT', 3), undefined);
  assert.deepEqual(await lookup('SELECT * FROM t WHERE a IN (1, 2) AND b IN (1, 2)', 'a INT; b INT', 4), ['1|1', '1|2', '2|1', '2|2']);
});

/** The column filters of a query, each as `column op literal|literal` with the literals as DuckDB evaluates them. */
async function filters(sql: string, columnSpec: string): Promise<string[]> {
  const out: string[] = [];
  for (const f of columnFiltersOf(await tree(sql), key(columnSpec))) {
    const literals = [];
    for (const lit of f.literals) literals.push(lit === null ? 'NULL' : String((await session.run(`SELECT CAST(${lit} AS VARCHAR)`)).rows[0][0]));
    out.push(`${f.column} ${f.op} ${literals.join('|')}`);
  }
  return out;
}

const filterCases: [string, string, string[]][] = [
  ['SELECT * FROM t WHERE a = 1', 'a INT', ['a = 1']],
  ["SELECT * FROM t x WHERE 5 < x.A AND t.b >= '2024-01-01' AND c IN (1, 2) AND a <= 9", 'a INT; b DATE; c BIGINT', ['a > 5', 'b >= 2024-01-01', 'c in 1|2', 'a <= 9']],
  ['SELECT * FROM db.t WHERE db.t.a BETWEEN 1 AND 5 AND a <> 3', 'a INT', ['a >= 1', 'a <= 5']],
  ["SELECT * FROM t WHERE a = NULL AND d > DATE '2024-01-01'", 'a INT; d TIMESTAMP(6)', ['a = NULL', 'd > 2024-01-01']],
  ['SELECT count(*) FROM t WHERE (a = 1 AND b = 2) AND c = 3 GROUP BY b', 'a INT; b INT; c INT', ['a = 1', 'b = 2', 'c = 3']],
  // Only conjuncts, only literals that compare in the column's type, only one table read once.
  ['SELECT * FROM t WHERE a = 1 OR a = 2', 'a INT', []],
  ['SELECT * FROM t WHERE NOT a = 1 AND name = 1 AND a = b AND a = 1 + 1', 'a INT; b INT; name STRING', []],
  ['SELECT * FROM t WHERE a IN (1, b)', 'a INT; b INT', []],
  ['SELECT * FROM t WHERE u.a = 1 AND z = 1', 'a INT', []],
  ['SELECT * FROM t JOIN u USING (a) WHERE a = 1', 'a INT', []],
  ['SELECT * FROM t WHERE a = 1 AND a IN (SELECT a FROM t)', 'a INT', []],
  ['SELECT * FROM (SELECT * FROM t) WHERE a = 1', 'a INT', []],
  ['WITH t AS (SELECT 1 AS a) SELECT * FROM t WHERE a = 1', 'a INT', []],
];

for (const [sql, columnSpec, expected] of filterCases) {
  test(`column filters of: ${sql}`, async () => {
    assert.deepEqual(await filters(sql, columnSpec), expected);
  });
}
