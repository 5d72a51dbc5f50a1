/**
 * Union read end to end, with real server and tiering processes: `SELECT … FROM t` of a
 * lake-enabled table equals a reference computed independently (every row written, for log tables;
 * the last write of each key, for primary-key tables), whatever the lake holds at the moment:
 *
 *   - rounds the test runs itself, so that each case meets the lake where it wants it: rows on both
 *     sides, keys updated and deleted after the lake took them, buckets and partitions the lake has
 *     not seen, projections, filters, startup modes, time travel and the lake's file list;
 *   - random moments while a writer writes and a standalone tiering worker (300 ms freshness)
 *     commits rounds, across a kill -9 of that worker;
 *   - after retention has dropped tiered segments from the log, the lake still answers.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, test } from 'node:test';
import { Connection, TributaryError } from '../src/client/index.js';
import type { TablePath } from '../src/common/schema.js';
import { lakeFormat } from '../src/lake/formats/index.js';
import type { DuckSession } from '../src/query/duckdb/session.js';
import type { ExecutionResult } from '../src/query/executor.js';
import { startCluster, type TestCluster, useCluster } from './support/cluster.js';
import { onEachWarehouse } from './support/warehouses.js';
import { localCopies } from '../src/storage/stores.js';
import { tierOnce } from './support/tiering-rounds.js';

const DB = 'union_read';
const json = (v: unknown): string => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x));

/** The SQL executor of a cluster (started with `sql: DB`) and its connection. */
class Sql {
  constructor(private readonly cluster: TestCluster) {}

  get conn(): Connection {
    return this.cluster.conn;
  }

  get duck(): DuckSession {
    return this.cluster.duck;
  }

  run(sql: string): Promise<ExecutionResult> {
    return this.cluster.sql.execute(sql);
  }

  /** The rows of a query, asserting how it read its table when `plan` is given. */
  async rows(sql: string, plan?: string): Promise<unknown[][]> {
    const out = await this.run(sql);
    if (plan !== undefined) assert.equal(out.plan, plan, `${sql}: plan`);
    return out.result!.rows;
  }
}

const rejectsWith = async (p: Promise<unknown>, name: string, message: RegExp): Promise<void> => {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof TributaryError, String(e));
    assert.equal(e.errorName, name, e.message);
    assert.match(e.message, message);
    return true;
  });
};

onEachWarehouse('union read, lake rounds run by the test', (warehouse) => {
  const sql = new Sql(useCluster({ args: ['--no-tiering'], sql: DB, ...warehouse.cluster }));
  const format = lakeFormat('iceberg', { writerThreads: 1 });
  const tier = (table: string) => tierOnce(sql.conn, { database: DB, table }, format);
  after(() => format.close());

  const LAKE = "'table.datalake.enabled' = 'true', 'table.datalake.freshness' = '1s'";
  const ids = (rows: unknown[][]): number[] => rows.map((r) => Number(r[0]));
  const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);

  test('a log table: lake rows and the log after them, projected and filtered, in the table types', async () => {
    await sql.run(`CREATE TABLE events (id BIGINT, g TINYINT, x DOUBLE, note STRING) WITH ('bucket.num' = '3', 'bucket.key' = 'id', ${LAKE})`);
    await sql.run("INSERT INTO events SELECT range, range % 5, range * 0.5, 'n' || range FROM range(0, 100)");
    // No lake snapshot yet: the log alone.
    assert.deepEqual(ids(await sql.rows('SELECT id FROM events ORDER BY id', 'scan')), range(0, 100));
    await tier('events');
    await sql.run("INSERT INTO events SELECT range, range % 5, range * 0.5, 'n' || range FROM range(100, 130)");

    const all = await sql.run('SELECT * FROM events ORDER BY id');
    assert.equal(all.plan, 'union');
    assert.deepEqual(
      all.result!.rows,
      range(0, 130).map((i) => [BigInt(i), i % 5, i * 0.5, `n${i}`]),
    );
    // Lake columns are cast back to the table's types: the same as a read of the log alone.
    const logOnly = await sql.run("SELECT * FROM events /*+ OPTIONS('scan.startup.mode' = 'earliest') */ ORDER BY id");
    assert.equal(logOnly.plan, 'scan');
    assert.deepEqual(all.result!.columns, logOnly.result!.columns);
    assert.deepEqual(all.result!.rows, logOnly.result!.rows);

    assert.deepEqual(ids(await sql.rows('SELECT id FROM events WHERE id >= 95 AND id < 105 AND g <> 0 ORDER BY id', 'union')), [96, 97, 98, 99, 101, 102, 103, 104]);
    assert.deepEqual(await sql.rows('SELECT g, count(*), sum(x) FROM events WHERE id IN (1, 2, 120, 999) GROUP BY g ORDER BY g'), [
      [0, 1n, 60],
      [1, 1n, 0.5],
      [2, 1n, 1],
    ]);
    // EXPLAIN says what the union read reads: the snapshot, its files read and pruned, the log after it.
    const snapshot = await sql.conn.getAdmin().getLakeSnapshot({ database: DB, table: 'events' });
    const explained = String((await sql.run('EXPLAIN SELECT id FROM events WHERE id = 120')).result!.rows[0][1]).split('\n');
    assert.equal(explained[0], `${DB}.events: union read (lake snapshot, then the log after it), columns (id)`);
    const files = /^  lake snapshot (\d+): (\d+) data file\(s\) read, (\d+) pruned by the query's filters$/.exec(explained[1]);
    assert.ok(files, explained[1]);
    assert.equal(BigInt(files[1]), snapshot.snapshotId);
    assert.ok(Number(files[3]) > 0, 'the filter on the bucket key prunes files');
    const lakeEnds = new Map(snapshot.bucketOffsets.map((o) => [o.bucket, o.endOffset]));
    const latest = await sql.conn.getAdmin().listOffsets({ database: DB, table: 'events' }, [0, 1, 2], 'latest');
    assert.deepEqual(explained.slice(2), [0, 1, 2].map((b) => `  bucket ${b}: log offsets [${lakeEnds.get(b)}, ${latest.get(b)})`));
    // COUNT(*) of a lake-enabled log table counts the union, not the log's stats.
    assert.deepEqual(await sql.rows('SELECT count(*) FROM events', 'union'), [[130n]]);
    assert.deepEqual(await sql.rows('SELECT count(*) AS n FROM events e, events f WHERE e.id = f.id'), [[130n]]);
  });

  test('startup modes: earliest, latest and timestamp read the log alone, from hints or SET', async () => {
    const last = (await sql.rows('SELECT max(_commit_timestamp) FROM events$changelog'))[0][0] as string;
    await sleep(5);
    await sql.run("INSERT INTO events VALUES (500, 1, 1.0, 'late'), (501, 2, 2.0, 'late')");
    const after = Date.parse(last) + 1;
    assert.deepEqual(ids(await sql.rows(`SELECT id FROM events /*+ OPTIONS('scan.startup.mode'='timestamp', 'scan.startup.timestamp'='${after}') */ ORDER BY id`, 'scan')), [500, 501]);
    assert.deepEqual(await sql.rows("SELECT count(*) FROM events /*+ OPTIONS('scan.startup.mode'='latest') */", 'scan'), [[0n]]);
    assert.deepEqual(await sql.rows(`SELECT _log_offset IS NOT NULL, note FROM events$changelog /*+ OPTIONS('scan.startup.mode'='timestamp','scan.startup.timestamp'='${after}') */ ORDER BY note`), [
      [true, 'late'],
      [true, 'late'],
    ]);

    assert.match((await sql.run("SET 'scan.startup.mode' = 'latest'")).message!, /set/);
    assert.deepEqual(await sql.rows('SELECT count(*) FROM events', 'scan'), [[0n]]);
    assert.deepEqual(await sql.rows('SET'), [['scan.startup.mode', 'latest']]);
    // A hint wins over the session; INSERT … SELECT reads as the session says.
    assert.deepEqual(await sql.rows("SELECT count(*) FROM events /*+ OPTIONS('scan.startup.mode'='full') */", 'union'), [[132n]]);
    await sql.run('CREATE TABLE copies (id BIGINT)');
    assert.match((await sql.run('INSERT INTO copies SELECT id FROM events')).message!, /^0 row/);
    await sql.run('RESET');
    assert.deepEqual(await sql.rows('SET'), []);
    assert.deepEqual(await sql.rows('SELECT count(*) FROM events', 'union'), [[132n]]);

    await rejectsWith(sql.run("SET 'scan.startup.mode' = 'group-offsets'"), 'INVALID_CONFIG_EXCEPTION', /one of full, earliest, latest, timestamp/);
    await rejectsWith(sql.run("SELECT * FROM events /*+ OPTIONS('scan.startup.mode'='timestamp') */"), 'INVALID_CONFIG_EXCEPTION', /scan.startup.timestamp/);
    await rejectsWith(sql.run("SELECT * FROM events /*+ OPTIONS('scan.snapshot-id'='1') */"), 'SQL_UNSUPPORTED', /does not apply/);
    await rejectsWith(sql.run("SELECT * FROM events FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01 00:00:00'"), 'SQL_UNSUPPORTED', /events\$lake/);
    await rejectsWith(sql.run("WITH c AS (SELECT 1) SELECT * FROM c /*+ OPTIONS('scan.startup.mode'='full') */"), 'SQL_PARSE_ERROR', /'c' is not a table this query reads/);
    await rejectsWith(sql.run("SELECT * FROM events /*+ OPTIONS('scan.startup.mode'='full') */ JOIN events /*+ OPTIONS('scan.startup.mode'='latest') */ USING (id)"), 'SQL_UNSUPPORTED', /different options/);
    // Positions in DuckDB's errors still point into the query as written.
    await rejectsWith(sql.run("SELECT * FROM events /*+ OPTIONS('scan.startup.mode'='full') */ WHERE WHERE"), 'SQL_PARSE_ERROR', /line 1, column 7\d/);
  });

  test('a partitioned primary-key table: log changes replace and delete lake rows, untiered partitions read their log', async () => {
    await sql.run(`CREATE TABLE accounts (p STRING, k INT, v STRING, n BIGINT, PRIMARY KEY (p, k) NOT ENFORCED) PARTITIONED BY (p) WITH ('bucket.num' = '2', ${LAKE})`);
    const model = new Map<string, [string, number, string, bigint]>();
    const upsert = async (rows: [string, number, string, bigint][]): Promise<void> => {
      await sql.run(`INSERT INTO accounts VALUES ${rows.map(([p, k, v, n]) => `('${p}', ${k}, '${v}', ${n})`).join(', ')}`);
      for (const r of rows) model.set(`${r[0]}/${r[1]}`, r);
    };
    const remove = async (where: string, keys: [string, number][]): Promise<void> => {
      await sql.run(`DELETE FROM accounts WHERE ${where}`);
      for (const [p, k] of keys) model.delete(`${p}/${k}`);
    };
    const expected = (filter: (r: [string, number, string, bigint]) => boolean = () => true) =>
      [...model.values()].filter(filter).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]));
    await upsert(range(0, 40).map((k) => [`p${k % 2}`, k, `v${k}`, BigInt(k)]));
    await tier('accounts');
    await upsert([['p0', 2, 'changed', 200n], ['p1', 3, 'changed', 300n], ['p2', 1, 'new partition', 1n]]);
    await remove("(p = 'p0' AND k IN (4, 6)) OR (p = 'p1' AND k = 5)", [['p0', 4], ['p0', 6], ['p1', 5]]);
    // Deleted, then written again: the last change wins.
    await remove("p = 'p0' AND k = 8", [['p0', 8]]);
    await upsert([['p0', 8, 'back', 8n]]);
    await sql.run("UPDATE accounts SET n = n + 1000 WHERE p = 'p1' AND k IN (7, 9)");
    model.set('p1/7', ['p1', 7, 'v7', 1007n]);
    model.set('p1/9', ['p1', 9, 'v9', 1009n]);

    assert.deepEqual(await sql.rows('SELECT p, k, v, n FROM accounts ORDER BY p, k', 'union'), expected());
    assert.deepEqual(await sql.rows("SELECT p, k, n FROM accounts WHERE p = 'p1' AND k <= 9 ORDER BY p, k", 'union'), expected((r) => r[0] === 'p1' && r[1] <= 9).map((r) => [r[0], r[1], r[3]]));
    assert.deepEqual(await sql.rows('SELECT v FROM accounts WHERE n >= 200 ORDER BY v', 'union'), expected((r) => r[3] >= 200n).map((r) => [r[2]]).sort());
    // A key lookup still reads the key's state.
    assert.deepEqual(await sql.rows("SELECT v FROM accounts WHERE p = 'p0' AND k = 2", 'lookup'), [['changed']]);
    // Lake rows only: the state as of the round.
    assert.deepEqual(await sql.rows("SELECT v FROM accounts$lake WHERE p = 'p0' AND k = 2", 'lake'), [['v2']]);

    await tier('accounts');
    await upsert([['p0', 0, 'after two rounds', 0n]]);
    await remove("p = 'p2' AND k = 1", [['p2', 1]]);
    assert.deepEqual(await sql.rows('SELECT * FROM accounts ORDER BY p, k', 'union'), expected());
    // The log alone, folded by key, tells the same state (nothing has expired from it).
    assert.deepEqual(await sql.rows("SELECT * FROM accounts /*+ OPTIONS('scan.startup.mode'='earliest') */ ORDER BY p, k", 'scan'), expected());
    assert.deepEqual(await sql.rows('SELECT count(*) FROM accounts', 'stats'), [[BigInt(model.size)]]);
  });

  test('repeated reads append to the tail the session kept: exact across writes, rounds, projections and an added column', async () => {
    await sql.run(`CREATE TABLE feed (id BIGINT, g INT) WITH ('bucket.num' = '2', 'bucket.key' = 'id', ${LAKE})`);
    await sql.run(`CREATE TABLE balances (k INT, n BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ('bucket.num' = '2', ${LAKE})`);
    const insert = (from: number, to: number, note = false) =>
      sql.run(`INSERT INTO feed ${note ? '(id, g, note) ' : ''}SELECT range, range % 3${note ? ", 'n' || range" : ''} FROM range(${from}, ${to})`);
    const balances = new Map<number, bigint>();
    const write = async (keys: number[], n: bigint) => {
      await sql.run(`INSERT INTO balances VALUES ${keys.map((k) => `(${k}, ${n})`).join(', ')}`);
      for (const k of keys) balances.set(k, n);
    };
    // The DuckDB table a view reads its tail from, and that table's oid: appending keeps it, a new read replaces it.
    const tailOf = async (view: string, suffix = ''): Promise<{ name: string; oid: bigint }> => {
      const [[definition]] = (await sql.duck.run(`SELECT sql FROM duckdb_views() WHERE view_name = '${view}'`)).rows as [[string]];
      const name = /"?__union_tail"?\."([^"]+)"/.exec(definition)![1] + suffix;
      const [[oid]] = (await sql.duck.run(`SELECT table_oid FROM duckdb_tables() WHERE schema_name = '__union_tail' AND table_name = '${name}'`)).rows as [[bigint]];
      return { name, oid };
    };
    const checkFeed = async (to: number) => {
      assert.deepEqual(ids(await sql.rows('SELECT id FROM feed ORDER BY id', 'union')), range(0, to));
      assert.deepEqual(await sql.rows('SELECT g, count(*) FROM feed GROUP BY g ORDER BY g', 'union'), [0, 1, 2].map((g) => [g, BigInt(range(0, to).filter((i) => i % 3 === g).length)]));
    };
    const checkBalances = async () => {
      const expected = [...balances].sort((a, b) => a[0] - b[0]).map(([k, n]) => [k, n]);
      assert.deepEqual(await sql.rows('SELECT k, n FROM balances ORDER BY k', 'union'), expected);
    };

    await insert(0, 50);
    await write(range(0, 20), 1n);
    await tier('feed');
    await tier('balances');
    await insert(50, 60);
    await write([1, 2, 30], 2n);
    await checkFeed(60);
    await checkBalances();
    const feedTail = await tailOf('feed');
    const changes = await tailOf('balances', '$changes');
    for (let i = 0; i < 3; i++) {
      await insert(60 + 10 * i, 70 + 10 * i);
      await sql.run(`DELETE FROM balances WHERE k = ${3 + i}`);
      balances.delete(3 + i);
      await write([30 + i, 1], BigInt(10 + i));
      await checkFeed(70 + 10 * i);
      await checkBalances();
      // The same snapshot, columns and buckets: the rows the log gained were appended.
      assert.deepEqual(await tailOf('feed'), feedTail);
      assert.deepEqual(await tailOf('balances', '$changes'), changes);
    }
    // A new snapshot: the tail is read again, from the new lake offsets.
    await tier('feed');
    await tier('balances');
    await insert(90, 95);
    await write([7], 99n);
    await checkFeed(95);
    await checkBalances();
    assert.notDeepEqual(await tailOf('feed'), feedTail);
    assert.notDeepEqual(await tailOf('balances', '$changes'), changes);
    // A new column: the table's new schema reads again; the lake's rows hold NULL for it.
    await sql.run('ALTER TABLE feed ADD COLUMN note STRING');
    await insert(95, 100, true);
    await checkFeed(100);
    assert.deepEqual(await sql.rows('SELECT id, note FROM feed WHERE id >= 93 ORDER BY id', 'union'), range(93, 100).map((i) => [BigInt(i), i >= 95 ? `n${i}` : null]));
  });

  test('the lake tables: time travel, snapshot ids and the live files', async () => {
    await sql.run(`CREATE TABLE history (id BIGINT, d DATE) PARTITIONED BY (d) WITH ('bucket.num' = '1', ${LAKE})`);
    await sql.run("INSERT INTO history VALUES (1, DATE '2024-01-01'), (2, DATE '2024-01-02')");
    const first = (await tier('history')).snapshotId!;
    await sleep(20);
    const between = new Date().toISOString().replace('T', ' ').replace('Z', '');
    await sleep(20);
    await sql.run("INSERT INTO history VALUES (3, DATE '2024-01-02')");
    const second = (await tier('history')).snapshotId!;

    assert.deepEqual(ids(await sql.rows('SELECT id FROM history$lake ORDER BY id', 'lake')), [1, 2, 3]);
    assert.deepEqual(ids(await sql.rows(`SELECT id FROM history$lake FOR SYSTEM_TIME AS OF TIMESTAMP '${between}' ORDER BY id`, 'lake')), [1, 2]);
    assert.deepEqual(ids(await sql.rows(`SELECT id FROM "history$lake" /*+ OPTIONS('scan.snapshot-id'='${first}') */ WHERE d = DATE '2024-01-02'`, 'lake')), [2]);
    await rejectsWith(sql.run("SELECT * FROM history$lake FOR SYSTEM_TIME AS OF TIMESTAMP '2000-01-01 00:00:00'"), 'LAKE_SNAPSHOT_NOT_EXIST', /no snapshot at or before 2000-01-01/);
    await rejectsWith(sql.run("SELECT * FROM history$lake /*+ OPTIONS('scan.snapshot-id'='12345') */"), 'LAKE_SNAPSHOT_NOT_EXIST', /12345/);

    const files = await sql.rows('SELECT content, partition, record_count, data_sequence_number, added_snapshot_id FROM history$lake$files ORDER BY data_sequence_number, partition', 'lake');
    assert.deepEqual(files, [
      ['data', '{"d":19723,"__bucket":0}', 1n, 1n, first],
      ['data', '{"d":19724,"__bucket":0}', 1n, 1n, first],
      ['data', '{"d":19724,"__bucket":0}', 1n, 2n, second],
    ]);
    assert.deepEqual(await sql.rows(`SELECT count(*) FROM history$lake$files /*+ OPTIONS('scan.snapshot-id'='${first}') */`), [[2n]]);
    assert.deepEqual(await sql.rows(`SELECT count(*) FROM history$lake$files FOR SYSTEM_TIME AS OF TIMESTAMP '${between}'`), [[2n]]);
    // The files are the ones DuckDB reads (an S3 warehouse's through their local copies).
    const filePaths = (await sql.rows('SELECT file_path FROM history$lake$files ORDER BY file_path')).map((r) => r[0] as string);
    const copies = await localCopies(filePaths);
    try {
      assert.deepEqual(await sql.rows(`SELECT count(*) FROM read_parquet([${filePaths.map((f) => `'${copies.path(f)!}'`).join(', ')}])`), [[3n]]);
    } finally {
      copies.release();
    }
  });
});

/** What a concurrent writer has sent and what the server has acknowledged, for the checks. */
class Workload {
  /** Log rows (the same ids in events and clicks): ids 0 … sent − 1 were handed to the writers, 0 … acked − 1 acknowledged. */
  logSent = 0;
  logAcked = 0;
  /** Primary-key operations in order: key, then the row it leaves (null: deleted). */
  readonly ops: { table: string; key: string; row: unknown[] | null }[] = [];
  opsAcked = 0;
  private stopped = false;
  private done?: Promise<void>;

  start(conn: Connection): void {
    this.done = this.loop(conn);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }

  private async loop(conn: Connection): Promise<void> {
    const path = (table: string): TablePath => ({ database: DB, table });
    const events = await (await conn.getTable(path('events'))).newAppend().createWriter();
    const clicks = await (await conn.getTable(path('clicks'))).newAppend().createWriter();
    const accounts = await (await conn.getTable(path('accounts'))).newUpsert().createWriter();
    const visits = await (await conn.getTable(path('visits'))).newUpsert().createWriter();
    let step = 0;
    try {
      while (!this.stopped) {
        for (let i = 0; i < 40; i++) {
          const id = this.logSent;
          await events.append(eventRow(id));
          await clicks.append({ id: BigInt(id), g: id % 7 });
          this.logSent++;
        }
        for (let i = 0; i < 25; i++, step++) {
          const k = (step * 7919) % 150;
          const visit = step % 2 === 1;
          const p = `p${k % 3}`;
          const key = visit ? `${p}/${k}` : String(k);
          if (step % 6 === 5) {
            await (visit ? visits.delete({ p, k }) : accounts.delete({ k }));
            this.ops.push({ table: visit ? 'visits' : 'accounts', key, row: null });
          } else {
            const row = visit ? [p, k, BigInt(step)] : [k, `v${step}`, BigInt(step)];
            await (visit ? visits.upsert({ p, k, n: BigInt(step) }) : accounts.upsert({ k, v: `v${step}`, n: BigInt(step) }));
            this.ops.push({ table: visit ? 'visits' : 'accounts', key, row });
          }
        }
        const [sentLog, sentOps] = [this.logSent, this.ops.length];
        await Promise.all([events.flush(), clicks.flush(), accounts.flush(), visits.flush()]);
        [this.logAcked, this.opsAcked] = [sentLog, sentOps];
        await sleep(Math.random() * 30);
      }
    } finally {
      await Promise.all([events.close(), clicks.close(), accounts.close(), visits.close()]);
    }
  }
}

const eventRow = (id: number) => ({ id: BigInt(id), p: `p${id % 3}`, g: id % 7, x: id / 2 });

/**
 * Checks a log table read taken between `acked` (ids acknowledged before it started) and `sent`
 * (ids handed to the writer before it ended): no row twice, every acknowledged row that passes
 * `filter`, no row not yet sent, each with its values.
 */
function checkLogRows(rows: unknown[][], acked: number, sent: number, filter: (id: number) => boolean, what: string): void {
  const seen = new Set<number>();
  for (const [id, p, g, x] of rows) {
    const i = Number(id);
    assert.ok(!seen.has(i), `${what}: id ${i} twice`);
    seen.add(i);
    assert.ok(i < sent && filter(i), `${what}: id ${i} was not written (sent ${sent}) or does not pass the filter`);
    const e = eventRow(i);
    if (p !== undefined) assert.deepEqual([p, g, x], [e.p, e.g, e.x], `${what}: row ${i}`);
  }
  for (let i = 0; i < acked; i++) if (filter(i)) assert.ok(seen.has(i), `${what}: acknowledged id ${i} is missing (${seen.size} rows)`);
}

/**
 * Checks a primary-key table read against the operations: each key's row (or its absence) is its
 * state after its last operation acknowledged before the read (absent before the first), or after
 * one of its operations sent while the read ran. `view` is what the query shows of a row: its
 * projection, or undefined when the query's filter leaves it out.
 */
function checkKeyRows(w: Workload, table: string, rows: unknown[][], keyOf: (row: unknown[]) => string, acked: number, sent: number, view: (row: unknown[]) => unknown[] | undefined, what: string): void {
  const found = new Map<string, string>();
  for (const r of rows) {
    assert.ok(!found.has(keyOf(r)), `${what}: key ${keyOf(r)} twice`);
    found.set(keyOf(r), json(r));
  }
  const allowed = new Map<string, string[]>();
  w.ops.slice(0, sent).forEach((op, i) => {
    if (op.table !== table) return;
    const shown = op.row && view(op.row);
    const state = shown ? json(shown) : 'absent';
    allowed.set(op.key, i < acked ? [state] : [...(allowed.get(op.key) ?? ['absent']), state]);
  });
  for (const [key, row] of found) assert.ok(allowed.get(key)?.includes(row), `${what}: key ${key} is ${row}, expected one of ${allowed.get(key)?.join(' | ')}`);
  for (const [key, states] of allowed) if (!found.has(key)) assert.ok(states.includes('absent'), `${what}: key ${key} is missing, expected one of ${states.join(' | ')}`);
}

describe('union read at random moments while writing and tiering', () => {
  test('equals the reference at every moment, across a kill -9 of the tiering worker', { timeout: 240_000 }, async (t) => {
    const cluster = await startCluster(t, { args: ['--no-tiering'], sql: DB });
    let worker = await cluster.startTiering();
    const sql = new Sql(cluster);
    const writerConn = await Connection.create({ 'bootstrap.servers': cluster.bootstrap });
    const w = new Workload();
    try {
      const lake = "'table.datalake.enabled' = 'true', 'table.datalake.freshness' = '300ms'";
      await sql.run(`CREATE TABLE events (id BIGINT, p STRING, g INT, x DOUBLE) PARTITIONED BY (p) WITH ('bucket.num' = '2', 'bucket.key' = 'id', ${lake})`);
      await sql.run(`CREATE TABLE clicks (id BIGINT, g INT) WITH ('bucket.num' = '3', ${lake})`);
      await sql.run(`CREATE TABLE accounts (k INT, v STRING, n BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ('bucket.num' = '3', ${lake})`);
      await sql.run(`CREATE TABLE visits (p STRING, k INT, n BIGINT, PRIMARY KEY (p, k) NOT ENFORCED) PARTITIONED BY (p) WITH ('bucket.num' = '2', ${lake})`);
      w.start(writerConn);

      const plans = new Set<string | undefined>();
      const snapshots = new Set<bigint>();
      const checks: [string, (rows: unknown[][], a: { log: number; ops: number }, b: { log: number; ops: number }) => void][] = [
        ['SELECT id, p, g, x FROM events', (rows, a, b) => checkLogRows(rows, a.log, b.log, () => true, 'events')],
        ["SELECT id FROM events WHERE p = 'p1' AND id >= 200", (rows, a, b) => checkLogRows(rows, a.log, b.log, (i) => i % 3 === 1 && i >= 200, 'events filtered')],
        ['SELECT id FROM clicks WHERE g IN (2, 5) AND id < 5000', (rows, a, b) => checkLogRows(rows, a.log, b.log, (i) => (i % 7 === 2 || i % 7 === 5) && i < 5000, 'clicks filtered')],
        ['SELECT k, v, n FROM accounts', (rows, a, b) => checkKeyRows(w, 'accounts', rows, (r) => String(r[0]), a.ops, b.ops, (r) => r, 'accounts')],
        ['SELECT k, n FROM accounts WHERE k < 50', (rows, a, b) => checkKeyRows(w, 'accounts', rows, (r) => String(r[0]), a.ops, b.ops, (r) => ((r[0] as number) < 50 ? [r[0], r[2]] : undefined), 'accounts filtered')],
        ['SELECT p, k, n FROM visits', (rows, a, b) => checkKeyRows(w, 'visits', rows, (r) => `${r[0]}/${r[1]}`, a.ops, b.ops, (r) => r, 'visits')],
        ["SELECT p, k, n FROM visits WHERE p IN ('p0', 'p2') AND n > 100", (rows, a, b) => checkKeyRows(w, 'visits', rows, (r) => `${r[0]}/${r[1]}`, a.ops, b.ops, (r) => (r[0] !== 'p1' && (r[2] as bigint) > 100n ? r : undefined), 'visits filtered')],
      ];
      const rounds = 16;
      for (let round = 0; round < rounds; round++) {
        await sleep(100 + Math.random() * 500);
        if (round === rounds / 2) {
          // A crash of the worker, maybe in the middle of a round; a new one takes over.
          await worker.kill();
          worker = await cluster.startTiering();
        }
        for (const [query, check] of checks) {
          const a = { log: w.logAcked, ops: w.opsAcked };
          const out = await sql.run(query);
          const b = { log: w.logSent, ops: w.ops.length };
          plans.add(out.plan);
          check(out.result!.rows, a, b);
        }
        for (const table of ['events', 'clicks', 'accounts', 'visits']) {
          const status = await sql.conn.getAdmin().getLakeTieringStatus({ database: DB, table });
          if (status.snapshotId !== undefined) snapshots.add(status.snapshotId);
        }
      }
      await w.stop();
      // Once the writer has stopped, exactly the reference.
      const final = { log: w.logAcked, ops: w.opsAcked };
      for (const [query, check] of checks) check((await sql.run(query)).result!.rows, final, final);
      assert.ok(plans.has('union'), `union reads happened: ${[...plans].join(', ')}`);
      assert.ok(snapshots.size >= 6, `tiering committed rounds meanwhile: ${snapshots.size} snapshots seen`);
    } finally {
      await w.stop();
      await writerConn.close();
    }
  });
});

describe('union read after retention', () => {
  test('rows dropped from the log by retention after tiering are read from the lake', { timeout: 180_000 }, async (t) => {
    // Small segments, retention checked often, and KV snapshots often (a primary-key table keeps the changelog its last KV snapshot needs).
    const cluster = await startCluster(t, { settings: { 'log.segment.file-size': '2kb', 'log.retention.check-interval': '200ms', 'kv.snapshot.interval': '1s' }, sql: DB });
    const sql = new Sql(cluster);
    const options = "'table.datalake.enabled' = 'true', 'table.datalake.freshness' = '300ms', 'table.log.ttl' = '1s'";
    await sql.run(`CREATE TABLE events (id BIGINT, note STRING) WITH ('bucket.num' = '2', 'bucket.key' = 'id', ${options})`);
    await sql.run(`CREATE TABLE accounts (k INT, n BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ('bucket.num' = '2', ${options})`);
    const model = new Map<number, bigint>();
    for (let batch = 0; batch < 30; batch++) {
      await sql.run(`INSERT INTO events SELECT range, repeat('x', 50) || range FROM range(${batch * 20}, ${batch * 20 + 20})`);
      // Each key is written in two rounds of inserts and never again: the early ones end up in the lake only.
      await sql.run(`INSERT INTO accounts SELECT ${batch * 10} + range, ${batch} * 100 + range FROM range(0, 20)`);
      for (let i = 0; i < 20; i++) model.set(batch * 10 + i, BigInt(batch * 100 + i));
    }
    await sql.run('DELETE FROM accounts WHERE k < 5');
    for (let k = 0; k < 5; k++) model.delete(k);
    // Wait until retention has dropped tiered segments of every bucket.
    const admin = sql.conn.getAdmin();
    const deadline = Date.now() + 120_000;
    for (;;) {
      const starts = await Promise.all(['events', 'accounts'].map((table) => admin.listOffsets({ database: DB, table }, [0, 1], 'earliest')));
      if (starts.every((m) => [...m.values()].every((o) => o > 0n))) break;
      assert.ok(Date.now() < deadline, `retention did not drop segments: ${json(starts.map((m) => [...m]))}\n${cluster.server.stderr}`);
      await sleep(200);
    }
    const logOnly = await sql.rows("SELECT count(*) FROM events /*+ OPTIONS('scan.startup.mode'='earliest') */");
    assert.ok((logOnly[0][0] as bigint) < 600n, `the log lost rows: ${logOnly[0][0]}`);
    const keysInLog = await sql.rows("SELECT count(*) FROM accounts /*+ OPTIONS('scan.startup.mode'='earliest') */ WHERE k >= 5");
    assert.ok((keysInLog[0][0] as bigint) < BigInt(model.size), `the log lost keys: ${keysInLog[0][0]} of ${model.size}`);

    assert.deepEqual(await sql.rows('SELECT count(*), count(DISTINCT id), min(id), max(id) FROM events', 'union'), [[600n, 600n, 0n, 599n]]);
    assert.deepEqual(await sql.rows("SELECT count(*) FROM events WHERE note LIKE 'x%'", 'union'), [[600n]]);
    assert.deepEqual(
      await sql.rows('SELECT k, n FROM accounts ORDER BY k', 'union'),
      [...model].sort((a, b) => a[0] - b[0]),
    );
  });
});
