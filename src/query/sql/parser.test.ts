import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import { type DataType, formatDataType } from '../../common/types.js';
import type { Statement } from './ast.js';
import { endsWithStatement, splitStatements } from './lexer.js';
import { parseStatement } from './parser.js';

interface Case {
  directive: 'parse' | 'split' | 'script';
  sql: string;
  expected: string;
  line: number;
}

/** Reads parser.cases.txt; its header comment describes the format. */
function readCases(): Case[] {
  const lines = fs.readFileSync(new URL('./parser.cases.txt', import.meta.url), 'utf8').split('\n');
  const cases: Case[] = [];
  let i = 0;
  while (i < lines.length) {
    const directive = lines[i].trim();
    if (directive === '' || directive.startsWith('#')) {
      i++;
      continue;
    }
    if (directive !== 'parse' && directive !== 'split' && directive !== 'script') throw new Error(`parser.cases.txt:${i + 1}: unknown directive '${directive}'`);
    const line = i + 1;
    const sql: string[] = [];
    for (i++; i < lines.length && lines[i] !== '----'; i++) sql.push(lines[i]);
    if (i >= lines.length) throw new Error(`parser.cases.txt:${line}: no '----' line`);
    const expected: string[] = [];
    for (i++; i < lines.length && lines[i].trim() !== ''; i++) expected.push(lines[i]);
    cases.push({ directive, sql: sql.join('\n'), expected: expected.join('\n'), line });
  }
  return cases;
}

/** Column types in their SQL spelling, and the shape JSON would give (no undefined members). */
function normalize(statement: Statement): unknown {
  return JSON.parse(
    JSON.stringify(statement, (key, value) => (key === 'type' && value && typeof value === 'object' ? formatDataType(value as DataType) : value)),
  );
}

function run(c: Case): unknown {
  switch (c.directive) {
    case 'parse':
      return normalize(parseStatement(c.sql));
    case 'split':
      return splitStatements(c.sql);
    case 'script':
      return splitStatements(c.sql).map((s) => normalize(parseStatement(s.sql, s)));
  }
}

const cases = readCases();

test('parser.cases.txt holds cases', () => {
  assert.ok(cases.length > 50);
});

for (const c of cases) {
  const title = `${c.directive} (line ${c.line}): ${c.sql.trim().split('\n')[0].slice(0, 60)}`;
  test(title, () => {
    if (c.expected.startsWith('{') || c.expected.startsWith('[')) {
      assert.deepEqual(run(c), JSON.parse(c.expected));
      return;
    }
    const space = c.expected.indexOf(' ');
    const name = space < 0 ? c.expected : c.expected.slice(0, space);
    const fragment = space < 0 ? '' : c.expected.slice(space + 1);
    assert.throws(
      () => run(c),
      (err: unknown) => {
        assert.ok(err instanceof TributaryError, `expected a TributaryError, got ${String(err)}`);
        assert.equal(err.errorName, name, err.message);
        assert.ok(err.message.includes(fragment), `message '${err.message}' lacks '${fragment}'`);
        return true;
      },
    );
  });
}

test('endsWithStatement: a `;` outside literals, identifiers and comments ends the statement read so far', () => {
  assert.equal(endsWithStatement('SELECT 1;\n'), true);
  assert.equal(endsWithStatement('SELECT 1; -- done\n'), true);
  assert.equal(endsWithStatement('SELECT 1\n'), false);
  assert.equal(endsWithStatement("INSERT INTO t VALUES ('a;\n"), false, 'a string literal still open');
  assert.equal(endsWithStatement("INSERT INTO t VALUES ('a;\nb');\n"), true);
  assert.equal(endsWithStatement('SELECT 1 /* ;\n'), false, 'a comment still open');
  assert.equal(endsWithStatement('SELECT 1 -- ;\n'), false);
  assert.equal(endsWithStatement('SELECT "";\n'), true, 'an error the statement reports');
});
