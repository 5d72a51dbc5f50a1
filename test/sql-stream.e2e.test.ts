/**
 * Streaming queries (EMIT CHANGES, `tributary sql --stream`) against a real server: the first
 * result and the changes after it hold every row of a log table exactly once, also while rows are
 * written during the start; a primary-key table's changes carry their change type; the CLI prints
 * results as they arrive and stops on Ctrl-C.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import type { QueryResult } from '../src/query/duckdb/result.js';
import { DuckSession } from '../src/query/duckdb/session.js';
import { SqlExecutor } from '../src/query/executor.js';
import { useCluster } from './support/cluster.js';
import { CLI_ARGS } from './support/server-process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const cluster = useCluster({ args: ['--no-tiering'] });

/** Takes results from a stream until `enough` says the rows so far suffice. */
async function take(changes: AsyncIterator<QueryResult>, enough: (rows: unknown[][]) => boolean, timeoutMs = 60_000): Promise<{ columns: string[]; rows: unknown[][] }> {
  const rows: unknown[][] = [];
  let columns: string[] = [];
  const deadline = Date.now() + timeoutMs;
  while (!enough(rows)) {
    assert.ok(Date.now() < deadline, `changes arrive (got ${rows.length} rows)`);
    const next = await changes.next();
    assert.ok(!next.done);
    columns = next.value.columns.map((c) => c.name);
    rows.push(...next.value.rows);
  }
  return { columns, rows };
}

test('log table: the first result and the changes hold every row once, also when rows are written meanwhile', { timeout: 120_000 }, async () => {
  const duck = await DuckSession.create();
  const executor = new SqlExecutor(cluster.conn, duck, 'tributary');
  try {
    await executor.execute("CREATE TABLE clicks (id BIGINT, region STRING, amount INT) PARTITIONED BY (region) WITH ('bucket.num' = '2', 'bucket.key' = 'id')");
    const writer = await (await cluster.conn.getTable({ database: 'tributary', table: 'clicks' })).newAppend().createWriter();
    const total = 3000;
    // Writes run on while the streaming query starts; a new partition appears in the middle.
    let third!: () => void;
    const thirdWritten = new Promise<void>((resolve) => (third = resolve));
    const writing = (async () => {
      for (let id = 0; id < total; id++) {
        if (id === total / 3) third();
        await writer.append({ id: BigInt(id), region: id < total / 2 ? (id % 2 === 0 ? 'eu' : 'us') : 'ap', amount: id % 10 });
        if (id % 30 === 29) {
          await writer.flush();
          await new Promise((r) => setTimeout(r, 15)); // writes span the start of the query
        }
      }
      await writer.flush();
    })();
    await thirdWritten;
    const out = await executor.execute('SELECT id, amount FROM clicks WHERE amount >= 5 EMIT CHANGES');
    assert.deepEqual(out.result!.columns.map((c) => c.name), ['id', 'amount']);
    const expected = Array.from({ length: total }, (_, id) => id).filter((id) => id % 10 >= 5);
    const first = out.result!.rows.map((r) => Number(r[0]));
    assert.ok(first.length > 0, 'the first result holds the rows written before');
    const changes = out.changes![Symbol.asyncIterator]();
    const rest = await take(changes, (rows) => first.length + rows.length >= expected.length, 20_000);
    await writing;
    assert.deepEqual(rest.columns, ['id', 'amount']);
    const seen = [...first, ...rest.rows.map((r) => Number(r[0]))].sort((a, b) => a - b);
    assert.deepEqual(seen, expected, 'every row passing the filter exactly once');
    assert.ok(rest.rows.every((r) => (r[1] as number) >= 5));
    await changes.return?.();
  } finally {
    duck.close();
  }
});

test('primary-key table: changes start with their change type', { timeout: 120_000 }, async () => {
  const duck = await DuckSession.create();
  const executor = new SqlExecutor(cluster.conn, duck, 'tributary');
  try {
    await executor.execute("CREATE TABLE accounts (id BIGINT, owner STRING, balance INT, PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket.num' = '1')");
    await executor.execute("INSERT INTO accounts VALUES (1, 'ann', 10), (2, 'bob', 20)");
    const out = await executor.execute('SELECT *, balance * 10 AS cents FROM accounts WHERE balance > 5 EMIT CHANGES');
    assert.deepEqual(out.result!.rows.sort(), [
      [1n, 'ann', 10, 100],
      [2n, 'bob', 20, 200],
    ]);
    const changes = out.changes![Symbol.asyncIterator]();
    await executor.execute("INSERT INTO accounts VALUES (3, 'cy', 30)");
    await executor.execute("UPDATE accounts SET balance = 11 WHERE id = 1");
    await executor.execute('DELETE FROM accounts WHERE id = 2');
    await executor.execute("INSERT INTO accounts VALUES (4, 'dee', 1)"); // filtered out
    const got = await take(changes, (rows) => rows.length >= 4);
    assert.deepEqual(got.columns, ['op', 'id', 'owner', 'balance', 'cents']);
    assert.deepEqual(got.rows, [
      ['+I', 3n, 'cy', 30, 300],
      ['-U', 1n, 'ann', 10, 100],
      ['+U', 1n, 'ann', 11, 110],
      ['-D', 2n, 'bob', 20, 200],
    ]);
    await changes.return?.();
  } finally {
    duck.close();
  }
});

test('tributary sql --stream prints the result, then changes as they arrive, until Ctrl-C', { timeout: 120_000 }, async () => {
  const admin = cluster.conn.getAdmin();
  await admin.createTable({ database: 'tributary', table: 'ticks' }, { columns: [{ name: 'n', type: 'INT' }], bucketCount: 1 });
  const writer = await (await cluster.conn.getTable({ database: 'tributary', table: 'ticks' })).newAppend().createWriter();
  for (let n = 0; n < 3; n++) await writer.append({ n });
  await writer.flush();
  const child = spawn(process.execPath, [...CLI_ARGS, 'sql', '--bootstrap', cluster.bootstrap, '--format', 'json', '--stream', '-e', 'SELECT n, n * n AS sq FROM ticks'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const lines = readline.createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => JSON.parse(((await lines.next()).value as string | undefined) ?? 'null');
  assert.deepEqual([await next(), await next(), await next()], [
    { n: 0, sq: 0 },
    { n: 1, sq: 1 },
    { n: 2, sq: 4 },
  ]);
  for (let n = 3; n < 5; n++) await writer.append({ n });
  await writer.flush();
  assert.deepEqual([await next(), await next()], [
    { n: 3, sq: 9 },
    { n: 4, sq: 16 },
  ]);
  child.kill('SIGINT');
  assert.equal(await exited, 0, stderr);
});
