/**
 * The SQL dialect tested as data (test/sql/*.sqltest, format in test/sql/README.md) against a real
 * server, plus the `tributary sql` command itself: -e, -f, the output formats and exit codes.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, test } from 'node:test';
import { Connection, TributaryError } from '../src/client/index.js';
import { DEFAULT_DATABASE } from '../src/common/schema.js';
import { formatResult } from '../src/query/duckdb/format.js';
import { DuckSession } from '../src/query/duckdb/session.js';
import { SqlExecutor } from '../src/query/executor.js';
import { useCluster } from './support/cluster.js';
import { CLI, CLI_ARGS } from './support/server-process.js';

const SQL_DIR = path.join(path.dirname(CLI), '..', '..', 'test', 'sql');
const run = promisify(execFile);

type Block =
  | { kind: 'ok'; sql: string; plan?: string; message?: string }
  | { kind: 'error'; name: string; sql: string; message?: string }
  | { kind: 'query'; sql: string; plan?: string; expected: string };

/** Splits a block's lines at `----`: the SQL before, the expectation after (if any). */
function splitAtSeparator(body: string[]): { sql: string; expected?: string } {
  const sep = body.indexOf('----');
  return sep < 0 ? { sql: body.join('\n') } : { sql: body.slice(0, sep).join('\n'), expected: body.slice(sep + 1).join('\n') };
}

function parseSqlTest(text: string): Block[] {
  const blocks: Block[] = [];
  for (const raw of text.split(/\n\s*\n/)) {
    const lines = raw.split('\n').filter((l) => !l.startsWith('#') && l.trim() !== '');
    if (lines.length === 0) continue;
    const [head, ...body] = lines;
    const [directive, plan] = head.split(/\s+plan=/);
    const withPlan = plan === undefined ? {} : { plan: plan.trim() };
    if (directive === 'statement ok') {
      const { sql, expected } = splitAtSeparator(body);
      blocks.push({ kind: 'ok', sql, ...withPlan, ...(expected !== undefined ? { message: expected.trim() } : {}) });
    } else if (head.startsWith('statement error ')) {
      const { sql, expected } = splitAtSeparator(body);
      blocks.push({ kind: 'error', name: head.slice(16).trim(), sql, ...(expected !== undefined ? { message: expected.trim() } : {}) });
    }
    else if (directive === 'query') {
      const { sql, expected } = splitAtSeparator(body);
      assert.ok(sql && expected !== undefined, `query block without ---- : ${raw}`);
      blocks.push({ kind: 'query', sql, ...withPlan, expected });
    } else throw new Error(`unknown block header '${head}'`);
  }
  return blocks;
}

const cluster = useCluster();

describe('SQL scripts', () => {
  for (const file of fs.readdirSync(SQL_DIR).filter((f) => f.endsWith('.sqltest')).sort()) {
    test(file, async () => {
      const conn = await Connection.create({ 'bootstrap.servers': cluster.bootstrap });
      const duck = await DuckSession.create();
      const database = `db_${file.replace(/\W/g, '_')}`;
      await conn.getAdmin().createDatabase(database);
      const executor = new SqlExecutor(conn, duck, database);
      try {
        for (const block of parseSqlTest(fs.readFileSync(path.join(SQL_DIR, file), 'utf8'))) {
          const where = `${file}: ${block.sql.split('\n')[0]}`;
          if (block.kind === 'error') {
            await assert.rejects(executor.execute(block.sql), (e: unknown) => {
              assert.ok(e instanceof TributaryError, `${where}: expected ${block.name}, got ${String(e)}`);
              assert.equal(e.errorName, block.name, `${where}: ${e.message}`);
              if (block.message !== undefined) assert.equal(e.message, block.message, where);
              return true;
            });
            continue;
          }
          const out = await executor.execute(block.sql);
          if (block.plan !== undefined) assert.equal(out.plan, block.plan, `${where}: plan`);
          if (block.kind === 'ok' && block.message !== undefined) assert.equal(out.message, block.message, where);
          if (block.kind === 'query') {
            assert.ok(out.result, `${where}: returns rows`);
            assert.equal(formatResult(out.result, 'csv').replaceAll('\r\n', '\n').trim(), block.expected.trim(), where);
          }
        }
      } finally {
        duck.close();
        await conn.close();
      }
    });
  }
});

describe('tributary sql', () => {
  const cli = async (...args: string[]) => {
    const out = await run(process.execPath, [...CLI_ARGS, 'sql', '--bootstrap', cluster.bootstrap, ...args]);
    return { stdout: out.stdout.replaceAll('\r\n', '\n'), stderr: out.stderr };
  };

  test('-e runs statements; --format json prints one object per row with exact values', async () => {
    await cli('-e', "CREATE TABLE cli_t (id BIGINT, price DECIMAL(20, 4), at TIMESTAMP_LTZ(6)); INSERT INTO cli_t VALUES (9007199254740993, 1.5, TIMESTAMPTZ '2024-05-01 12:00:00.000001+00'), (7, NULL, NULL)");
    const { stdout } = await cli('--format', 'json', '-e', 'SELECT * FROM cli_t ORDER BY id');
    assert.deepEqual(stdout.trim().split('\n').map((l) => JSON.parse(l)), [
      { id: 7, price: null, at: null },
      { id: '9007199254740993', price: '1.5000', at: '2024-05-01T12:00:00.000001Z' },
    ]);
    const csv = await cli('--format', 'csv', '-e', 'SELECT id FROM cli_t ORDER BY id');
    assert.equal(csv.stdout, 'id\n7\n9007199254740993\n');
  });

  test('-f runs a script file; an error names itself and makes the exit code 1', async () => {
    const file = path.join(cluster.tempDir('sql'), 'script.sql');
    fs.writeFileSync(file, "-- a script\nCREATE TABLE f_t (a INT);\nINSERT INTO f_t VALUES (1), (2);\nSELECT sum(a) AS s FROM f_t;\n");
    const { stdout } = await cli('--format', 'csv', '-f', file);
    assert.equal(stdout, 's\n3\n');
    await assert.rejects(cli('-e', 'SELECT * FROM nope'), (e: { code: number; stderr: string }) => {
      assert.equal(e.code, 1);
      assert.match(e.stderr, /ERROR TABLE_NOT_EXIST: table 'tributary.nope' does not exist/);
      return true;
    });
    assert.equal(DEFAULT_DATABASE, 'tributary');
  });
});

describe('SHOW TABLET SERVERS', () => {
  test('lists the one node of tributary start, leading and holding every bucket of every table', async () => {
    const conn = await Connection.create({ 'bootstrap.servers': cluster.bootstrap });
    const duck = await DuckSession.create();
    await conn.getAdmin().createDatabase('servers');
    const executor = new SqlExecutor(conn, duck, 'servers');
    try {
      await executor.execute("CREATE TABLE spread (id INT) WITH ('bucket.num' = '5')");
      const { result } = await executor.execute('SHOW TABLET SERVERS');
      assert.ok(result);
      assert.deepEqual(
        result.columns.map((c) => c.name),
        ['server_id', 'host', 'port', 'rack', 'alive', 'tags', 'leader_count', 'replica_count'],
      );
      assert.equal(result.rows.length, 1);
      const [id, host, port, rack, alive, tags, leaders, replicas] = result.rows[0];
      assert.deepEqual([id, `${host}:${port}`, rack, alive, tags], [0, cluster.server.bootstrap, null, true, null]);
      const admin = conn.getAdmin();
      let buckets = 0;
      for (const database of await admin.listDatabases()) {
        for (const table of await admin.listTables(database)) {
          const info = await admin.getTableInfo({ database, table });
          const partitions = info.partitionKeys.length > 0 ? (await admin.listPartitionInfos(info.path)).length : 1;
          buckets += info.bucketCount * partitions;
        }
      }
      assert.ok(buckets >= 5);
      assert.deepEqual([leaders, replicas], [buckets, buckets], 'every bucket of every table, as its leader and only replica');
    } finally {
      duck.close();
      await conn.close();
    }
  });
});

describe('EXPLAIN', () => {
  test("shows how Tributary reads each table (lookup, KV scan, log scan with its columns and ranges) before DuckDB's plan", async () => {
    const conn = await Connection.create({ 'bootstrap.servers': cluster.bootstrap });
    const duck = await DuckSession.create();
    await conn.getAdmin().createDatabase('explained');
    const executor = new SqlExecutor(conn, duck, 'explained');
    try {
      await executor.execute("CREATE TABLE events (id INT, kind STRING, at BIGINT) WITH ('bucket.num' = '2', 'bucket.key' = 'id')");
      await executor.execute("CREATE TABLE users (id INT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket.num' = '1')");
      await executor.execute("INSERT INTO events VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)");
      await executor.execute("INSERT INTO users VALUES (1, 'ann'), (2, 'bob')");
      const plan = async (sql: string): Promise<{ tributary: string; duckdb: unknown[] }> => {
        const { result } = await executor.execute(sql);
        assert.ok(result);
        assert.deepEqual(result.rows[0][0], 'tributary_plan');
        return { tributary: String(result.rows[0][1]), duckdb: result.rows.slice(1).map((r) => r[0]) };
      };
      const offsets = async (bucket: number): Promise<bigint> => (await conn.getAdmin().listOffsets({ database: 'explained', table: 'events' }, [bucket], 'latest')).get(bucket)!;
      const [end0, end1] = [await offsets(0), await offsets(1)];
      const joined = await plan('EXPLAIN SELECT e.kind, u.name FROM events e JOIN users u ON u.id = e.id');
      assert.equal(
        joined.tributary,
        ['explained.events: log scan, columns (id, kind)', `  bucket 0: log offsets [0, ${end0})`, `  bucket 1: log offsets [0, ${end1})`, 'explained.users: KV scan (the committed state of every bucket), columns (id, name)'].join('\n'),
      );
      assert.deepEqual(joined.duckdb, ['physical_plan']);
      assert.equal((await plan('EXPLAIN SELECT name FROM users WHERE id IN (1, 2)')).tributary, 'explained.users: key lookup of 2 key(s), columns (id, name)');
      assert.equal((await plan('EXPLAIN SELECT 1')).tributary, 'reads no table');
    } finally {
      duck.close();
      await conn.close();
    }
  });
});
