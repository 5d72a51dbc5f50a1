/**
 * The docs against the code: docs/configuration.md is generated from the option declaration (this
 * fails when someone changes an option without `npm run docs:config`), docs/dependencies.md names
 * every package, and the examples of docs/sql.md and docs/http.md run as the pages show them on a
 * real server. The README's and docs/client.md's examples run in test/install.e2e.test.ts, where
 * the package is installed by its name.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { CONFIGURATION_DOC, renderConfigurationDocs } from '../scripts/gen-config-docs.js';
import { Connection } from '../src/client/index.js';
import { OPTIONS } from '../src/common/config.js';
import { DEFAULT_DATABASE } from '../src/common/schema.js';
import { DuckSession } from '../src/query/duckdb/session.js';
import { SqlExecutor } from '../src/query/executor.js';
import { splitStatements } from '../src/query/sql/lexer.js';
import { parseStatement } from '../src/query/sql/parser.js';
import { atServer, codeBlocks } from './support/doc-blocks.js';
import { ServerProcess } from './support/server-process.js';

const run = promisify(execFile);

/** Runs `body` with a fresh server of its own: each page's examples start from an empty database. */
async function withServer(body: (server: ServerProcess) => Promise<void>): Promise<void> {
  const server = await ServerProcess.start({ args: ['--no-tiering'] });
  try {
    await body(server);
  } finally {
    assert.equal(await server.stopAndRemove(), 0, 'a clean shutdown');
  }
}

test('docs/configuration.md matches the option declaration', () => {
  const expected = renderConfigurationDocs();
  for (const o of OPTIONS) assert.ok(expected.includes(`| \`${o.key}\` |`), `the generated text documents ${o.key}`);
  assert.equal(fs.readFileSync(CONFIGURATION_DOC, 'utf8'), expected, 'docs/configuration.md is stale: run `npm run docs:config`');
});

test('docs/dependencies.md says why each package of package.json is there', () => {
  const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as Record<string, Record<string, string>>;
  const doc = fs.readFileSync(new URL('../docs/dependencies.md', import.meta.url), 'utf8');
  for (const name of [...Object.keys(pkg.dependencies), ...Object.keys(pkg.devDependencies)]) {
    assert.ok(doc.includes(`| \`${name}\` | ${pkg.dependencies[name] ?? pkg.devDependencies[name]} |`), `${name} is documented with its pinned version`);
  }
});

/** docs/sql.md's example statements in page order; the blocks that show the grammar (`[IF EXISTS]`, `...`) are not examples. */
function sqlExamples(): { where: string; sql: string }[] {
  return codeBlocks('docs/sql.md', 'sql')
    .filter((b) => !/\[(db\.|[A-Z])|\.\.\./.test(b.text))
    .flatMap((b) => splitStatements(b.text).map((st) => ({ where: `docs/sql.md:${b.line + st.line - 1}`, sql: st.sql })));
}

test('every example statement of docs/sql.md parses', () => {
  const examples = sqlExamples();
  assert.ok(examples.length > 40, 'the page has its examples');
  for (const e of examples) assert.doesNotThrow(() => parseStatement(e.sql), `${e.where}: ${e.sql}`);
});

test('the examples of docs/sql.md run in page order on a fresh database', () =>
  withServer(async (server) => {
    const conn = await Connection.create({ 'bootstrap.servers': server.bootstrap });
    const duck = await DuckSession.create();
    try {
      const executor = new SqlExecutor(conn, duck, DEFAULT_DATABASE);
      for (const e of sqlExamples()) {
        // The lake's examples need tiered snapshots (test/lake-sql.e2e.test.ts runs them), and a
        // streaming query runs until it is stopped (test/sql-stream.e2e.test.ts), and the procedures
        // need a cluster (test/cluster-rebalance.e2e.test.ts).
        if (/\$lake|LAKE STATUS|EMIT CHANGES|^\s*CALL\b/i.test(e.sql)) continue;
        await executor.execute(e.sql).catch((err: unknown) => assert.fail(`${e.where}: ${e.sql}\n${String(err)}`));
      }
    } finally {
      duck.close();
      await conn.close();
    }
  }));

test("docs/http.md's curl examples answer what their comments say", () =>
  withServer(async (server) => {
    const [block] = codeBlocks('docs/http.md', 'sh').filter((b) => b.text.includes('curl '));
    assert.ok(block, 'docs/http.md has curl examples');
    // Each command prints one JSON answer without a newline; the comment under it shows the answer.
    const expected = [...block.text.matchAll(/^# (.*)$/gm)].map((m) => m[1]).join('');
    const { stdout } = await run('bash', ['-c', atServer(block.text, server)]);
    assert.equal(stdout, expected, block.where);
  }));
