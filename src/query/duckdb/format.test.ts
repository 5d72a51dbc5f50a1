import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatResult } from './format.js';
import type { QueryResult } from './result.js';

const result: QueryResult = {
  columns: [
    { name: 'id', type: 'BIGINT' },
    { name: 'name', type: 'VARCHAR' },
    { name: 'price', type: 'DECIMAL(38,2)' },
    { name: 'ts', type: 'TIMESTAMP WITH TIME ZONE' },
    { name: 'tags', type: 'VARCHAR[]' },
    { name: 'raw', type: 'BLOB' },
  ],
  rows: [
    [9007199254740993n, 'comma, "quoted"', '123456789012345678901234567890.25', '2024-01-02T03:04:05.000006Z', ['a', 'b'], new Uint8Array([0x61, 0x00, 0xff])],
    [42n, 'line\nbreak', '-0.50', null, [], null],
    [-7n, null, null, '1969-12-31T23:59:59.999999Z', null, new Uint8Array([0x5c])],
  ],
};

test('table: aligned box, numbers right-aligned, NULL shown, row count', () => {
  assert.equal(
    formatResult(result, 'table'),
    [
      '+------------------+-----------------+-----------------------------------+-----------------------------+-----------+-----------+',
      '| id               | name            | price                             | ts                          | tags      | raw       |',
      '+------------------+-----------------+-----------------------------------+-----------------------------+-----------+-----------+',
      '| 9007199254740993 | comma, "quoted" | 123456789012345678901234567890.25 | 2024-01-02T03:04:05.000006Z | ["a","b"] | a\\x00\\xFF |',
      '|               42 | line           +|                             -0.50 | NULL                        | []        | NULL      |',
      '|                  | break           |                                   |                             |           |           |',
      '|               -7 | NULL            |                              NULL | 1969-12-31T23:59:59.999999Z | NULL      | \\x5C      |',
      '+------------------+-----------------+-----------------------------------+-----------------------------+-----------+-----------+',
      '3 rows',
    ].join('\n'),
  );
});

test('table: multi-line values take several lines, marked + (as psql), other control characters escaped', () => {
  const plan: QueryResult = {
    columns: [{ name: 'create table', type: 'VARCHAR' }, { name: 'n', type: 'INTEGER' }],
    rows: [
      ['CREATE TABLE t (\r\n  a INT\n)', 1],
      ['tab\there', 22],
    ],
  };
  assert.equal(
    formatResult(plan, 'table'),
    [
      '+------------------+----+',
      '| create table     | n  |',
      '+------------------+----+',
      '| CREATE TABLE t (+|  1 |',
      '|   a INT         +|    |',
      '| )                |    |',
      '| tab\\there        | 22 |',
      '+------------------+----+',
      '2 rows',
    ].join('\n'),
  );
  // csv and json keep the value exact.
  assert.equal(formatResult(plan, 'csv'), 'create table,n\r\n"CREATE TABLE t (\r\n  a INT\n)",1\r\ntab\there,22');
  assert.equal(JSON.parse(formatResult(plan, 'json').split('\n')[0])['create table'], 'CREATE TABLE t (\r\n  a INT\n)');
});

test('table: one row, no rows, no columns', () => {
  const one: QueryResult = { columns: [{ name: 'n', type: 'INTEGER' }], rows: [[1]] };
  assert.equal(formatResult(one, 'table'), '+---+\n| n |\n+---+\n| 1 |\n+---+\n1 row');
  assert.equal(formatResult({ columns: one.columns, rows: [] }, 'table'), '+---+\n| n |\n+---+\n0 rows');
  assert.equal(formatResult({ columns: [], rows: [] }, 'table'), '0 rows');
});

test('json: one object per line; big integers and decimals as strings', () => {
  const lines = formatResult(result, 'json').split('\n');
  assert.equal(lines.length, 3);
  assert.equal(
    lines[0],
    '{"id":"9007199254740993","name":"comma, \\"quoted\\"","price":"123456789012345678901234567890.25","ts":"2024-01-02T03:04:05.000006Z","tags":["a","b"],"raw":"YQD/"}',
  );
  assert.equal(lines[1], '{"id":42,"name":"line\\nbreak","price":"-0.50","ts":null,"tags":[],"raw":null}');
  assert.deepEqual(JSON.parse(lines[2]), { id: -7, name: null, price: null, ts: '1969-12-31T23:59:59.999999Z', tags: null, raw: 'XA==' });
  const edge: QueryResult = {
    columns: [{ name: 'a', type: 'BIGINT' }, { name: 'b', type: 'BIGINT' }, { name: 'f', type: 'DOUBLE' }, { name: 's', type: 'STRUCT' }],
    rows: [[9007199254740991n, -9007199254740992n, Number.NaN, { x: 2n ** 64n, y: true }]],
  };
  assert.equal(formatResult(edge, 'json'), '{"a":9007199254740991,"b":"-9007199254740992","f":"NaN","s":{"x":"18446744073709551616","y":true}}');
  assert.equal(formatResult({ columns: edge.columns, rows: [] }, 'json'), '');
});

test('csv: RFC 4180 with a header row', () => {
  assert.equal(
    formatResult(result, 'csv'),
    [
      'id,name,price,ts,tags,raw',
      '9007199254740993,"comma, ""quoted""",123456789012345678901234567890.25,2024-01-02T03:04:05.000006Z,"[""a"",""b""]",a\\x00\\xFF',
      '42,"line\nbreak",-0.50,,[],',
      '-7,,,1969-12-31T23:59:59.999999Z,,\\x5C',
    ].join('\r\n'),
  );
  assert.equal(formatResult({ columns: [{ name: 'odd,name', type: 'INTEGER' }], rows: [] }, 'csv'), '"odd,name"');
});
