import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import type { TableReferences } from './references.js';
import { DuckSession } from './session.js';

let session: DuckSession;
before(async () => {
  session = await DuckSession.create();
});
after(() => session.close());

/** Tables as `catalog.schema.table` text (absent parts left out), columns sorted. */
async function refs(sql: string): Promise<{ tables: string[]; columns: string[] | '*' }> {
  const r: TableReferences = await session.tableReferences(sql);
  return {
    tables: r.tables.map((t) => [t.catalog, t.schema, t.table].filter((p) => p !== undefined).join('.')),
    columns: r.columns === '*' ? '*' : [...r.columns].sort(),
  };
}

const cases: [string, { tables: string[]; columns: string[] | '*' }][] = [
  ['SELECT a, b FROM t WHERE c > 1 ORDER BY d', { tables: ['t'], columns: ['a', 'b', 'c', 'd'] }],
  ['SELECT count(*) FROM shop.orders', { tables: ['shop.orders'], columns: [] }],
  ['SELECT o.id, c.name FROM shop.orders o JOIN lake.shop.customers c ON o.cust = c.id', { tables: ['shop.orders', 'lake.shop.customers'], columns: ['c', 'cust', 'id', 'name', 'o'] }],
  ['SELECT a FROM t1 JOIN t2 USING (k) LEFT JOIN t1 AS again ON again.x = t2.y', { tables: ['t1', 't2'], columns: ['a', 'again', 'k', 't2', 'x', 'y'] }],
  ['SELECT * FROM t', { tables: ['t'], columns: '*' }],
  ['FROM t', { tables: ['t'], columns: '*' }],
  ['SELECT t.* EXCLUDE (a) FROM t', { tables: ['t'], columns: '*' }],
  ['SELECT COLUMNS(\'a.*\') FROM t', { tables: ['t'], columns: '*' }],
  // CTE names are not base tables; a star over a CTE or a subquery reads only what they select.
  ['WITH c AS (SELECT a, b FROM t WHERE x = 1) SELECT * FROM c', { tables: ['t'], columns: ['a', 'b', 'x'] }],
  ['WITH c AS (SELECT a FROM t), d AS (SELECT a FROM c) SELECT * FROM d JOIN c USING (a)', { tables: ['t'], columns: ['a'] }],
  ['SELECT * FROM (SELECT a FROM t) sub', { tables: ['t'], columns: ['a'] }],
  ['SELECT * FROM (SELECT * FROM t) sub', { tables: ['t'], columns: '*' }],
  // A CTE's own name inside its body (not recursive) is the base table of that name.
  ['WITH t AS (SELECT a + 1 AS a FROM t) SELECT a FROM t', { tables: ['t'], columns: ['a'] }],
  ['WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r', { tables: [], columns: ['n'] }],
  // A CTE name qualified with a schema is a base table.
  ['WITH orders AS (SELECT 1 AS a) SELECT a FROM shop.orders', { tables: ['shop.orders'], columns: ['a'] }],
  ['SELECT a FROM t1 UNION ALL SELECT b FROM t2 EXCEPT SELECT c FROM t3', { tables: ['t1', 't2', 't3'], columns: ['a', 'b', 'c'] }],
  ['SELECT a FROM t WHERE b IN (SELECT b FROM u WHERE u.c = t.c) AND EXISTS (SELECT 1 FROM v)', { tables: ['t', 'u', 'v'], columns: ['a', 'b', 'c', 't', 'u'] }],
  ['SELECT a FROM t UNION ALL VALUES (1)', { tables: ['t'], columns: ['a'] }],
  ['SELECT "Mixed Case", x FROM "My Table"', { tables: ['My Table'], columns: ['Mixed Case', 'x'] }],
  ['SELECT k FROM "orders$changelog"', { tables: ['orders$changelog'], columns: ['k'] }],
  ['SELECT * FROM read_parquet(\'f.parquet\')', { tables: [], columns: [] }],
  // Columns that only binding could name.
  ['SELECT a FROM t1 NATURAL JOIN t2', { tables: ['t1', 't2'], columns: '*' }],
  ['SELECT #1 FROM t', { tables: ['t'], columns: '*' }],
  ['SELECT t FROM t', { tables: ['t'], columns: '*' }],
  ['SELECT y FROM t PIVOT (sum(x) FOR y IN (1, 2))', { tables: ['t'], columns: '*' }],
  ['EXPLAIN SELECT a FROM t', { tables: ['t'], columns: ['a'] }],
  ['explain analyze SELECT a FROM t', { tables: ['t'], columns: ['a'] }],
];

for (const [sql, expected] of cases) {
  test(`references of: ${sql}`, async () => {
    assert.deepEqual(await refs(sql), expected);
  });
}

test('a syntax error names its line and column', async () => {
  await assert.rejects(session.tableReferences('SELECT a\nFROM t WHERE WHERE'), (err: unknown) => {
    assert.ok(err instanceof TributaryError);
    assert.equal(err.errorName, 'SQL_PARSE_ERROR');
    assert.match(err.message, /^line 2, column 14: syntax error at or near "WHERE"/);
    return true;
  });
});

test('a statement that is not a query is SQL_UNSUPPORTED', async () => {
  await assert.rejects(session.tableReferences('CREATE TABLE x (a INT)'), (err: unknown) => err instanceof TributaryError && err.errorName === 'SQL_UNSUPPORTED');
});
