/**
 * One SQL statement cannot exhaust a real server process: results held past their row and byte
 * limits fail with RESULT_TOO_LARGE while the server's memory stays bounded, statements stop at
 * their timeout and when their client goes away, DuckDB's memory is capped, more statements than
 * `sql.max-concurrent-queries` are refused with SERVER_BUSY, and after each of these the server
 * answers the next client at once. The shell (`tributary sql`) prints rows as they come, honours
 * the timeout, and Ctrl-C cancels its statement.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { startCluster, useCluster } from './support/cluster.js';
import { CLI_ARGS, type ServerProcess } from './support/server-process.js';

/** A statement that runs for hours unless stopped. */
const ENDLESS = 'SELECT count(*) FROM range(1000000000000) a';

interface Answer {
  status: number;
  json: any;
}

async function sql(server: ServerProcess, body: Record<string, unknown>, signal: AbortSignal = AbortSignal.timeout(60_000)): Promise<Answer> {
  const res = await fetch(`http://${server.http}/api/v1/sql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal });
  return { status: res.status, json: await res.json() };
}

/** The server answers SELECT 1 (bounded: a stuck server fails the test rather than hanging it). */
async function answersSelectOne(server: ServerProcess): Promise<void> {
  const out = await sql(server, { sql: 'SELECT 1 AS one' }, AbortSignal.timeout(10_000));
  assert.equal(out.status, 200, JSON.stringify(out.json));
  assert.deepEqual(out.json.rows, [[1]]);
}

/** Asks `ask` until `done` holds of its answer, for at most 20 s. */
async function until(ask: () => Promise<Answer>, done: (a: Answer) => boolean, what: string): Promise<Answer> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const a = await ask();
    if (done(a)) return a;
    if (Date.now() > deadline) assert.fail(`${what}: still ${a.status} ${JSON.stringify(a.json)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The most memory the process has held (VmHWM), in bytes. */
function peakRss(pid: number): number {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  assert.ok(m, 'VmHWM in /proc/<pid>/status');
  return Number(m[1]) * 1024;
}

describe('default limits', () => {
  const cluster = useCluster({ args: ['--no-tiering'] });

  test('a billion rows stop at sql.result.max-rows, the server staying small', async () => {
    const out = await sql(cluster.server, { sql: 'SELECT * FROM generate_series(1, 1000000000)' });
    assert.equal(out.status, 400);
    assert.equal(out.json.error.name, 'RESULT_TOO_LARGE');
    assert.match(out.json.error.message, /more than 1000000 rows.*sql\.result\.max-rows/);
    const peak = peakRss(cluster.server.child.pid!);
    assert.ok(peak < 1.5 * 1024 ** 3, `peak RSS ${(peak / 1024 ** 2).toFixed(0)} MiB`);
    await answersSelectOne(cluster.server);
  });

  test('wide rows stop at sql.result.max-bytes', async () => {
    const out = await sql(cluster.server, { sql: "SELECT repeat('x', 100000) AS s FROM range(2000)" });
    assert.equal(out.status, 400);
    assert.equal(out.json.error.name, 'RESULT_TOO_LARGE');
    assert.match(out.json.error.message, /sql\.result\.max-bytes/);
  });

  test('a request may ask for a shorter timeout, not for a malformed one', async () => {
    const out = await sql(cluster.server, { sql: ENDLESS, timeout: '300ms' });
    assert.equal(out.status, 504);
    assert.equal(out.json.error.name, 'QUERY_TIMEOUT');
    await answersSelectOne(cluster.server);
    const bad = await sql(cluster.server, { sql: 'SELECT 1', timeout: 'soon' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.name, 'INVALID_ARGUMENT');
  });

  test('the shell prints the rows of an endless query as they come, and Ctrl-C cancels it', async () => {
    const shell = spawn(process.execPath, [...CLI_ARGS, 'sql', '--bootstrap', cluster.bootstrap, '--format', 'csv', '-e', 'SELECT * FROM generate_series(1, 1000000000000) t(n); SELECT 2'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    shell.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = once(shell, 'exit');
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no rows from the shell: ${err}`)), 60_000);
      shell.stdout.on('data', (d: Buffer) => {
        if (out.length < 1_000_000) out += d.toString();
        if (out.includes('\r\n100000\r\n')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    assert.ok(out.startsWith('n\r\n1\r\n2\r\n'), out.slice(0, 100));
    shell.kill('SIGINT');
    const [code] = await exited;
    assert.equal(code, 1, 'the script stops at the cancelled statement');
    assert.match(err, /ERROR QUERY_CANCELLED: the query was cancelled: Ctrl-C/);
  });

  test('the shell stops a statement at sql.query.timeout', async () => {
    const shell = spawn(process.execPath, [...CLI_ARGS, 'sql', '--bootstrap', cluster.bootstrap, '--set', 'sql.query.timeout=300ms', '-e', ENDLESS], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    shell.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const [code] = await once(shell, 'exit');
    assert.equal(code, 1);
    assert.match(err, /ERROR QUERY_TIMEOUT: the query ran longer than 300 ms/);
  });

  test('one statement per request', async () => {
    for (const text of ['SELECT 1; SELECT 2', 'SELECT 1; INSERT INTO t VALUES (1)', "SHOW DATABASES; SELECT ';'"]) {
      const out = await sql(cluster.server, { sql: text });
      assert.equal(out.status, 400, text);
      assert.equal(out.json.error.name, 'SQL_UNSUPPORTED', text);
      assert.match(out.json.error.message, /one statement at a time: the text holds 2 statements/);
    }
    // A trailing semicolon ends the one statement.
    assert.deepEqual((await sql(cluster.server, { sql: 'SELECT 1 AS one;' })).json.rows, [[1]]);
  });
});

test('sql.query.timeout stops a statement, a longer timeout asked for included', async (t) => {
  const { server } = await startCluster(t, { args: ['--no-tiering'], settings: { 'sql.query.timeout': '500ms' } });
  for (const body of [{ sql: ENDLESS }, { sql: ENDLESS, timeout: '10min' }]) {
    const out = await sql(server, body);
    assert.equal(out.status, 504);
    assert.equal(out.json.error.name, 'QUERY_TIMEOUT');
    assert.match(out.json.error.message, /500 ms \(sql\.query\.timeout/);
    await answersSelectOne(server);
  }
});

describe('one statement at a time, DuckDB in 32 MB', () => {
  const cluster = useCluster({ args: ['--no-tiering'], settings: { 'sql.max-concurrent-queries': '1', 'sql.memory-limit': '32mb' } });

  test('a client that goes away takes its statement with it; until then others are SERVER_BUSY', async () => {
    const client = new AbortController();
    const endless = sql(cluster.server, { sql: ENDLESS }, client.signal).catch((err: unknown) => err);
    const busy = await until(() => sql(cluster.server, { sql: 'SELECT 1' }), (a) => a.status !== 200, 'the endless statement should hold the only place');
    assert.equal(busy.status, 503);
    assert.equal(busy.json.error.name, 'SERVER_BUSY');
    assert.match(busy.json.error.message, /sql\.max-concurrent-queries/);
    client.abort();
    assert.equal(((await endless) as Error).name, 'AbortError');
    // The statement is interrupted as its client leaves: the place is free again.
    await until(() => sql(cluster.server, { sql: 'SELECT 1' }), (a) => a.json.error?.name !== 'SERVER_BUSY', 'the cancelled statement should free its place');
    await answersSelectOne(cluster.server);
  });

  test('a statement needing more than sql.memory-limit fails with QUERY_MEMORY_EXCEEDED', async () => {
    const out = await sql(cluster.server, { sql: "SELECT length(string_agg(i::VARCHAR, ',')) FROM range(20000000) t(i)" });
    assert.equal(out.status, 400);
    assert.equal(out.json.error.name, 'QUERY_MEMORY_EXCEEDED');
    assert.match(out.json.error.message, /Out of Memory Error.*sql\.memory-limit/);
    await answersSelectOne(cluster.server);
  });

  test("a sort larger than the memory limit spills under the data dir, which is emptied after", async () => {
    const out = await sql(cluster.server, { sql: 'SELECT sum(x) AS s FROM (SELECT i * 7919 % 1000003 AS x FROM range(3000000) t(i) ORDER BY x LIMIT 2000000)' });
    assert.equal(out.status, 200, JSON.stringify(out.json));
    // The session's spill directory goes as the request ends, just after its answer.
    const spill = path.join(cluster.server.dataDir, 'sql-spill');
    const deadline = Date.now() + 10_000;
    while (fs.readdirSync(spill).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(fs.readdirSync(spill), []);
  });
});
