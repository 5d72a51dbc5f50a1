/**
 * The lake through SQL, against a real server whose embedded worker tiers lake-enabled tables: once
 * tiering has caught up, `t$lake` holds what the table holds (a log table: every row with its
 * offset and commit timestamp; a primary-key table: its current state, across rounds of inserts,
 * updates and deletes), `t$lake$snapshots` lists the rounds' snapshots and SHOW LAKE STATUS shows
 * no lag.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { describe, test } from 'node:test';
import { TributaryError } from '../src/client/index.js';
import type { LakeTieringStatus } from '../src/client/admin.js';
import { useCluster } from './support/cluster.js';
import { CLI_ARGS } from './support/server-process.js';

const DB = 'lake_sql';
const LAKE = "'table.datalake.enabled' = 'true', 'table.datalake.freshness' = '1s'";
/** Tiering rounds are seconds apart; a slow machine may need many of them. */
const CATCH_UP_MS = 120_000;

const cluster = useCluster({ sql: DB });

const json = (v: unknown): string => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x));

/** The rows of a query, asserting how it read its tables. */
async function query(sql: string, plan?: string): Promise<unknown[][]> {
  const out = await cluster.sql.execute(sql);
  assert.ok(out.result, `${sql}: returns rows`);
  if (plan !== undefined) assert.equal(out.plan, plan, `${sql}: plan`);
  return out.result.rows;
}

/** Waits until the lake holds every record below each bucket's high watermark. */
async function caughtUp(table: string): Promise<LakeTieringStatus> {
  const deadline = Date.now() + CATCH_UP_MS;
  for (;;) {
    const status = await cluster.conn.getAdmin().getLakeTieringStatus({ database: DB, table });
    if (status.snapshotId !== undefined && status.buckets.every((b) => b.recordsBehind === 0n)) return status;
    if (Date.now() > deadline) assert.fail(`tiering of ${table} did not catch up: ${json(status)}\n${cluster.server.stderr}`);
    await sleep(200);
  }
}

/** SHOW LAKE STATUS says the lake is at the high watermark of every bucket, at the status's snapshot, without lag or failures. */
async function assertNoLag(table: string, status: LakeTieringStatus): Promise<void> {
  const out = await cluster.sql.execute(`SHOW LAKE STATUS ${table}`);
  assert.deepEqual(
    out.result!.columns.map((c) => c.name),
    ['state', 'tiering_epoch', 'failures', 'snapshot_id', 'last_tiered_time', 'lag_ms', 'partition', 'bucket', 'lake_end_offset', 'high_watermark', 'records_behind'],
  );
  assert.equal(out.result!.rows.length, status.buckets.length);
  for (const [state, epoch, failures, snapshotId, lastTiered, lagMs, partition, bucket, lakeEnd, highWatermark, behind] of out.result!.rows) {
    assert.ok(['SCHEDULED', 'PENDING', 'TIERING'].includes(state as string), String(state));
    // An epoch while a round runs, none between rounds.
    assert.equal(epoch === null, state !== 'TIERING', `epoch ${epoch} in state ${state}`);
    assert.equal(failures, 0);
    assert.equal(snapshotId, status.snapshotId);
    assert.ok(typeof lastTiered === 'string' && Date.parse(lastTiered) <= Date.now(), String(lastTiered));
    assert.equal(lagMs, 0n);
    assert.equal(partition, null);
    assert.equal(typeof bucket, 'number');
    assert.equal(lakeEnd, highWatermark);
    assert.equal(behind, 0n);
  }
}

/** The current snapshot in `t$lake$snapshots` is the one the coordinator registered, and it holds every bucket's high watermark. */
async function assertCurrentSnapshot(table: string, status: LakeTieringStatus): Promise<unknown[][]> {
  const snapshots = await query(`SELECT snapshot_id, parent_id, operation, added_delete_files, tiering_epoch, bucket_offsets, is_current FROM "${table}$lake$snapshots" ORDER BY sequence_number`, 'lake');
  const current = snapshots.filter((s) => s[6] === true);
  assert.equal(current.length, 1);
  assert.equal(current[0][0], status.snapshotId);
  for (let i = 1; i < snapshots.length; i++) assert.equal(snapshots[i][1], snapshots[i - 1][0], 'each snapshot is the child of the one before');
  for (const s of snapshots) assert.equal(typeof s[4], 'bigint', 'every snapshot comes from a tiering round');
  const ends = (JSON.parse(current[0][5] as string) as { bucket: number; end_offset: string }[]).map((o) => [o.bucket, BigInt(o.end_offset)]);
  const highWatermarks = status.buckets.filter((b) => b.highWatermark > 0n).map((b) => [b.bucket, b.highWatermark]);
  assert.deepEqual(ends.sort(), highWatermarks.sort());
  return snapshots;
}

describe('lake tables through SQL', () => {
  test('a log table: $lake holds every row with its bucket, offset and commit timestamp', { timeout: CATCH_UP_MS * 2 }, async () => {
    await cluster.sql.execute(`CREATE TABLE events (id BIGINT, name STRING, price DECIMAL(10, 2), day DATE, small SMALLINT, ts TIMESTAMP_LTZ(6)) WITH ('bucket.num' = '2', ${LAKE})`);
    await cluster.sql.execute("INSERT INTO events VALUES (1, 'a', 1.50, DATE '2024-01-01', 7, TIMESTAMPTZ '2024-01-01 10:00:00.000001+00'), (2, NULL, NULL, NULL, NULL, NULL)");
    await cluster.sql.execute("INSERT INTO events SELECT range + 10, 'r' || range, range / 4, DATE '2024-02-01' + range::INT, -range, NULL FROM range(40)");
    const status = await caughtUp('events');

    const columns = 'id, name, price, day, small, ts';
    const lake = await query(`SELECT ${columns}, __offset, __timestamp FROM events$lake ORDER BY id`, 'lake');
    assert.equal(lake.length, 42);
    assert.deepEqual(lake, await query(`SELECT ${columns}, _log_offset, _commit_timestamp FROM events$changelog ORDER BY id`, 'scan'));
    // Each bucket's rows are its offsets 0 … high watermark − 1.
    const buckets = await query('SELECT __bucket, count(*), count(DISTINCT __offset), min(__offset), max(__offset) FROM "events$lake" GROUP BY ALL ORDER BY ALL', 'lake');
    assert.deepEqual(
      buckets,
      status.buckets.filter((b) => b.highWatermark > 0n).map((b) => [b.bucket, b.highWatermark, b.highWatermark, 0n, b.highWatermark - 1n]),
    );
    // COUNT(*) of a lake table reads the lake, not the table stats.
    assert.deepEqual(await query('SELECT count(*) FROM events$lake', 'lake'), [[42n]]);

    const snapshots = await assertCurrentSnapshot('events', status);
    assert.ok(snapshots.every((s) => s[2] === 'append' && s[3] === 0n), json(snapshots));
    assert.deepEqual(await query('SELECT total_records FROM events$lake$snapshots WHERE is_current'), [[42n]]);
    await assertNoLag('events', status);
  });

  test('a primary-key table: $lake is the current state after inserts, updates and deletes in several rounds', { timeout: CATCH_UP_MS * 3 }, async () => {
    await cluster.sql.execute(`CREATE TABLE users (id BIGINT, name STRING, score INT, PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket.num' = '2', ${LAKE})`);
    await cluster.sql.execute("INSERT INTO users VALUES (1, 'ann', 10), (2, 'bob', 20), (3, 'cy', 30), (4, 'dee', 40), (5, 'eve', 50), (6, 'fay', 60)");
    await caughtUp('users');
    const state = 'SELECT * FROM users ORDER BY id';
    assert.deepEqual(await query('SELECT id, name, score FROM users$lake ORDER BY id', 'lake'), await query(state));

    // The next rounds change keys the lake already holds: equality deletes on older files.
    await cluster.sql.execute('UPDATE users SET score = score + 100 WHERE id IN (2, 3)');
    await cluster.sql.execute('DELETE FROM users WHERE id IN (4, 6)');
    await cluster.sql.execute("INSERT INTO users VALUES (7, 'gus', 70), (2, 'bob2', 5)");
    await cluster.sql.execute('DELETE FROM users WHERE id = 7');
    await cluster.sql.execute("INSERT INTO users (id, name) VALUES (5, 'eve2')");
    const status = await caughtUp('users');

    const lake = await query('SELECT id, name, score FROM users$lake ORDER BY id', 'lake');
    assert.deepEqual(lake, [
      [1n, 'ann', 10],
      [2n, 'bob2', 5],
      [3n, 'cy', 130],
      [5n, 'eve2', 50],
    ]);
    assert.deepEqual(lake, await query(state));
    // Each key's lake row is its latest change.
    assert.deepEqual(
      await query('SELECT id, __offset FROM users$lake ORDER BY id'),
      await query("SELECT id, max(_log_offset) FROM users$changelog WHERE id IN (SELECT id FROM users) AND _change_type IN ('insert', 'update_after') GROUP BY id ORDER BY id"),
    );

    const snapshots = await assertCurrentSnapshot('users', status);
    assert.ok(snapshots.length >= 2, json(snapshots));
    assert.ok(
      snapshots.some((s) => (s[3] as bigint) > 0n),
      `a round wrote equality deletes: ${json(snapshots)}`,
    );
    await assertNoLag('users', status);

    // The shell prints the same.
    const { stdout } = await promisify(execFile)(process.execPath, [...CLI_ARGS, 'sql', '--bootstrap', cluster.bootstrap, '-d', DB, '--format', 'json', '-e', 'SHOW LAKE STATUS users; SELECT id FROM users$lake ORDER BY id']);
    const lines = stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(
      lines.filter((l) => 'bucket' in l).map((l) => l.records_behind),
      [0, 0],
    );
    assert.deepEqual(
      lines.filter((l) => 'id' in l).map((l) => l.id),
      [1, 2, 3, 5],
    );
  });

  test('a table that is not lake-enabled has no lake tables, and lake tables are read-only', async () => {
    await cluster.sql.execute('CREATE TABLE plain (a INT)');
    for (const sql of ['SELECT * FROM plain$lake', 'SELECT * FROM "plain$lake$snapshots"', 'SHOW LAKE STATUS plain']) {
      await assert.rejects(cluster.sql.execute(sql), (e: unknown) => {
        assert.ok(e instanceof TributaryError, String(e));
        assert.equal(e.errorName, 'INVALID_TABLE_EXCEPTION', `${sql}: ${e.message}`);
        assert.match(e.message, /not lake-enabled/);
        return true;
      });
    }
    await cluster.sql.execute(`CREATE TABLE lake_only (a INT) WITH (${LAKE})`);
    for (const sql of ['INSERT INTO lake_only$lake VALUES (1)', 'DELETE FROM lake_only$lake$snapshots']) {
      await assert.rejects(cluster.sql.execute(sql), (e: unknown) => e instanceof TributaryError && e.errorName === 'SQL_UNSUPPORTED' && /read-only/.test(e.message));
    }
  });
});
