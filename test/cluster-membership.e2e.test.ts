/**
 * A cluster on ZooKeeper as its membership changes, with real processes: two coordinators, three
 * tablet servers, replication factor 3 and a min ISR of 2.
 * - too few live servers for a replication factor: INVALID_REPLICATION_FACTOR;
 * - SHOW TABLET SERVERS and t$buckets show where buckets live;
 * - two of three replicas down: acks=all fails with NOT_ENOUGH_REPLICAS_EXCEPTION, acks=1 still
 *   writes; once they are back the ISR grows and the high watermark moves on;
 * - a leader frozen with SIGSTOP past its session timeout is replaced, and once it resumes it is
 *   fenced: it accepts no write, and follows the new leader;
 * - SIGTERM is a controlled shutdown: leadership moves away before the server exits, and writers
 *   carry on;
 * - tablet servers serve /health, /ready and /metrics: a leader shows a follower frozen with
 *   SIGSTOP falling behind, and catching up once resumed;
 * - a table and a partition dropped while a server is down: back, it deletes their replicas;
 * - the active coordinator killed with kill -9: the standby, whose HTTP address answered 503 on
 *   /ready while it stood by, takes over there, and DDL carries on without the caller retrying;
 * - a tablet server stopped with SIGTERM while it starts stops once started, and exits 0.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Connection, TributaryError } from '../src/client/index.js';
import { ErrorCodes } from '../src/common/errors.js';
import type { TablePath } from '../src/common/schema.js';
import { ApiKeys } from '../src/rpc/api-keys.js';
import { RpcConnection } from '../src/rpc/connection.js';
import { ZooKeeperSession } from '../src/server/metadata/zookeeper-session.js';
import { useCluster, until } from './support/cluster.js';
import { CLI_ARGS, tempDir } from './support/server-process.js';

const cluster = useCluster({
  zooKeeper: { coordinators: 2, tabletServers: 3 },
  settings: { 'default.replication.factor': '3', 'log.replica.min-in-sync-replicas-number': '2' },
  sql: 'ops',
});

const rows = (from: number, count: number): { id: bigint; v: string }[] => Array.from({ length: count }, (_, i) => ({ id: BigInt(from + i), v: `row-${from + i}` }));

async function createTable(table: string): Promise<TablePath> {
  const path = { database: 'ops', table };
  await cluster.conn.getAdmin().createTable(path, { columns: [{ name: 'id', type: 'BIGINT' }, { name: 'v', type: 'STRING' }], properties: { 'bucket.num': '1' } });
  return path;
}

async function write(conn: Connection, path: TablePath, batch: { id: bigint; v: string }[]): Promise<void> {
  const writer = await (await conn.getTable(path)).newAppend().createWriter();
  try {
    for (const r of batch) await writer.append(r);
    await writer.flush();
  } finally {
    await writer.close().catch(() => undefined);
  }
}

/** A query's rows as objects by column name. */
async function query(sql: string): Promise<Record<string, unknown>[]> {
  const { result } = await cluster.sql.execute(sql);
  assert.ok(result, `${sql} returns rows`);
  return result.rows.map((values) => Object.fromEntries(result.columns.map((c, i) => [c.name, values[i]])));
}

const bucket0 = async (path: TablePath) => (await cluster.conn.getAdmin().listBuckets(path))[0];

async function readIds(path: TablePath, expected: number): Promise<number[]> {
  const scanner = (await cluster.conn.getTable(path)).newScan().createLogScanner();
  await scanner.subscribe(0, 'earliest');
  const ids: number[] = [];
  for (let i = 0; i < 100 && ids.length < expected; i++) ids.push(...(await scanner.poll(200)).map((r) => Number(r.row.id)));
  ids.push(...(await scanner.poll(300)).map((r) => Number(r.row.id)));
  scanner.close();
  return ids;
}

test('a replication factor above the live tablet servers is INVALID_REPLICATION_FACTOR; SHOW TABLET SERVERS and t$buckets show the placement', async () => {
  await assert.rejects(
    cluster.sql.execute("CREATE TABLE too_many (id BIGINT) WITH ('table.replication.factor' = '4')"),
    (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_REPLICATION_FACTOR' && /4/.test(err.message) && /3/.test(err.message),
  );
  await cluster.sql.execute("CREATE TABLE placed (id BIGINT) WITH ('bucket.num' = '3')");
  await cluster.sql.execute('INSERT INTO placed VALUES (1), (2), (3), (4)');
  const servers = await query('SHOW TABLET SERVERS');
  assert.deepEqual(
    servers.map((r) => [r.server_id, r.alive]),
    [[0, true], [1, true], [2, true]],
  );
  const buckets = await query('SELECT bucket, leader, replicas, isr, high_watermark FROM placed$buckets ORDER BY bucket');
  assert.equal(buckets.length, 3);
  for (const b of buckets) {
    assert.equal((b.replicas as number[]).length, 3, 'three replicas per bucket');
    assert.deepEqual([...(b.isr as number[])].sort(), [0, 1, 2]);
  }
  assert.deepEqual(new Set(buckets.map((b) => b.leader)), new Set([0, 1, 2]), 'leaders spread over the servers');
  assert.equal(buckets.reduce((n, b) => n + Number(b.high_watermark), 0), 4);
  const metrics = await (await fetch(`http://${cluster.coordinators[0].http}/metrics`)).text();
  const sample = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1]);
  assert.equal(sample('tributary_tablet_servers'), 3);
  assert.equal(sample('tributary_offline_buckets'), 0);
  assert.equal(sample('tributary_under_replicated_buckets'), 0);
});

test('two of three replicas down: acks=all fails with NOT_ENOUGH_REPLICAS_EXCEPTION and acks=1 still writes; when they return the ISR grows back and the high watermark moves on', async () => {
  const path = await createTable('min_isr');
  await write(cluster.conn, path, rows(0, 10));
  const { leader } = await bucket0(path);
  const followers = [0, 1, 2].filter((id) => id !== leader);
  for (const id of followers) await cluster.tabletServer(id).kill();
  await until('the ISR shrinks to the leader', async () => ((await bucket0(path)).isr.length === 1 ? true : undefined));

  const strict = await Connection.create({ 'bootstrap.servers': cluster.bootstrap, 'client.writer.acks': 'all', 'client.writer.delivery-timeout': '3s' });
  const loose = await Connection.create({ 'bootstrap.servers': cluster.bootstrap, 'client.writer.acks': '1' });
  try {
    await assert.rejects(write(strict, path, rows(10, 5)), (err: unknown) => err instanceof TributaryError && err.errorName === 'NOT_ENOUGH_REPLICAS_EXCEPTION');
    await write(loose, path, rows(100, 5));
    for (const id of followers) await cluster.restart(cluster.tabletServer(id));
    const healed = await until('the ISR grows back to three', async () => {
      const b = await bucket0(path);
      return b.isr.length === 3 ? b : undefined;
    });
    assert.equal(healed.leader, leader, 'the leader stayed');
    await write(strict, path, rows(200, 5));
    const ids = await readIds(path, 20);
    assert.deepEqual(ids, [...rows(0, 10), ...rows(100, 5), ...rows(200, 5)].map((r) => Number(r.id)), 'the acks=1 rows are below the high watermark once the ISR is back; the refused ones are nowhere');
  } finally {
    await strict.close();
    await loose.close();
  }
});

test('a leader frozen with SIGSTOP past its ZooKeeper session is replaced; resumed, it is fenced and follows the new leader', async () => {
  const path = await createTable('frozen');
  await write(cluster.conn, path, rows(0, 10));
  const before = await bucket0(path);
  const frozen = cluster.tabletServer(before.leader);
  frozen.freeze();
  try {
    const after = await until('another replica leads', async () => {
      const b = await bucket0(path);
      return b.leader >= 0 && b.leader !== before.leader ? b : undefined;
    });
    assert.ok(after.leaderEpoch > before.leaderEpoch, 'the new leader has a higher leader epoch');
    await write(cluster.conn, path, rows(10, 10));
  } finally {
    frozen.resume();
  }
  // Whatever it still believed when it woke, the coordinator tells it it follows: it serves clients no more.
  const [host, port] = frozen.bootstrap.split(':');
  const direct = await RpcConnection.connect(host, Number(port));
  try {
    const { tableId } = (await cluster.conn.getTable(path)).info;
    const refused = await until('the resumed server refuses to lead', async () => {
      const resp = await direct.request(ApiKeys.ListOffsets, { followerServerId: -1, offsetType: 1, tableId: BigInt(tableId), bucketId: [0] });
      return resp.bucketsResp[0].errorCode === ErrorCodes.NOT_LEADER_OR_FOLLOWER ? resp : undefined;
    });
    assert.ok(refused);
    await until('the resumed server is in sync again', async () => ((await bucket0(path)).isr.length === 3 ? true : undefined));
  } finally {
    await direct.close();
  }
  assert.deepEqual(await readIds(path, 20), rows(0, 20).map((r) => Number(r.id)));
});

test('SIGTERM is a controlled shutdown: leadership moves to another in-sync replica before the server exits, and writes carry on', async () => {
  const path = await createTable('drained');
  await write(cluster.conn, path, rows(0, 10));
  const { leader, leaderEpoch } = await bucket0(path);
  const writing = (async () => {
    for (let round = 0; round < 10; round++) await write(cluster.conn, path, rows(10 + round * 10, 10));
  })();
  const server = cluster.tabletServer(leader);
  assert.equal(await server.stop(), 0, 'a clean exit');
  const moved = await bucket0(path);
  assert.notEqual(moved.leader, leader, 'another replica leads');
  assert.ok(moved.leader >= 0 && moved.leaderEpoch > leaderEpoch);
  await writing;
  await cluster.restart(server);
  assert.deepEqual(await readIds(path, 110), rows(0, 110).map((r) => Number(r.id)));
});

/** A scrape of `http`'s /metrics: the value of the sample of `name` whose labels include `labels`. */
async function scrape(http: string, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const text = await (await fetch(`http://${http}/metrics`)).text();
  for (const line of text.split('\n')) {
    const m = new RegExp(`^${name}(?:\\{(.*)\\})? (\\S+)$`).exec(line);
    if (m && Object.entries(labels).every(([k, v]) => (m[1] ?? '').split(',').includes(`${k}="${v}"`))) return Number(m[2]);
  }
  return undefined;
}

test('tablet servers serve /health, /ready and /metrics; a leader shows a follower frozen with SIGSTOP falling behind, and catching up once resumed', async () => {
  const path = await createTable('lagging');
  await write(cluster.conn, path, rows(0, 10));
  const { leader } = await bucket0(path);
  const follower = [0, 1, 2].find((id) => id !== leader)!;
  const http = cluster.tabletServer(leader).http;
  assert.ok(http, 'the tablet server names its HTTP address');
  assert.equal((await fetch(`http://${http}/health`)).status, 200);
  assert.equal((await fetch(`http://${http}/ready`)).status, 200);
  assert.equal((await fetch(`http://${http}/nothing`)).status, 404);
  assert.ok((await scrape(http, 'tributary_server_led_buckets'))! >= 1);
  const series = { table: 'lagging', bucket: '0', follower: String(follower) };
  await until('the follower is caught up', async () => ((await scrape(http, 'tributary_replica_lag_records', series)) === 0 ? true : undefined));

  const loose = await Connection.create({ 'bootstrap.servers': cluster.bootstrap, 'client.writer.acks': '1' });
  const frozen = cluster.tabletServer(follower);
  frozen.freeze();
  try {
    await write(loose, path, rows(10, 25));
    const lag = await until('the leader shows the frozen follower behind', async () => {
      const records = await scrape(http, 'tributary_replica_lag_records', series);
      return records !== undefined && records >= 25 ? records : undefined;
    });
    assert.equal(lag, 25, 'behind by exactly what it did not fetch');
    assert.ok((await scrape(http, 'tributary_follower_lag_records', { follower: String(follower) }))! >= 25);
    assert.ok((await scrape(http, 'tributary_replica_last_caught_up_seconds', series))! > 0);
  } finally {
    frozen.resume();
    await loose.close();
  }
  await until('the resumed follower catches up', async () => ((await scrape(http, 'tributary_replica_lag_records', series)) === 0 ? true : undefined));
  await until('it is in sync again', async () => ((await bucket0(path)).isr.length === 3 ? true : undefined));
});

test('a table and a partition dropped while a tablet server is down: once back, its data dir no longer holds their replicas', async () => {
  await cluster.sql.execute("CREATE TABLE gone (id BIGINT) WITH ('bucket.num' = '2')");
  await cluster.sql.execute("CREATE TABLE parted (day STRING, id BIGINT) PARTITIONED BY (day) WITH ('bucket.num' = '1')");
  await cluster.sql.execute("ALTER TABLE parted ADD PARTITION (day = 'd1')");
  await cluster.sql.execute("ALTER TABLE parted ADD PARTITION (day = 'd2')");
  await cluster.sql.execute("INSERT INTO gone VALUES (1), (2)");
  await cluster.sql.execute("INSERT INTO parted VALUES ('d1', 1), ('d2', 2)");
  const server = cluster.tabletServer(2);
  const logDir = path.join(server.dataDir, 'log', 'ops');
  const entries = (dir: string): string[] => (fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []);
  const gone = (): string[] => entries(logDir).filter((name) => name.startsWith('gone-'));
  const parted = entries(logDir).find((name) => name.startsWith('parted-'));
  assert.ok(parted, 'the partitioned table has a directory on the server');
  const partitions = (): string[] => entries(path.join(logDir, parted)).map((name) => name.replace(/-p\d+$/, ''));
  assert.equal(gone().length, 1, 'the server holds replicas of the table');
  assert.deepEqual(entries(path.join(logDir, gone()[0])), ['log-0', 'log-1']);
  assert.deepEqual(partitions(), ['d1', 'd2']);

  assert.equal(await server.stop(), 0);
  await cluster.sql.execute('DROP TABLE gone');
  await cluster.sql.execute("ALTER TABLE parted DROP PARTITION (day = 'd1')");
  assert.equal(gone().length, 1, 'nothing told the stopped server');
  await cluster.restart(server);
  await until('the server deletes the replicas of what was dropped', async () => (gone().length === 0 && partitions().length === 1 ? true : undefined));
  assert.deepEqual(partitions(), ['d2'], 'the partition that stays keeps its replica');
  const [counted] = await query("SELECT count(*) AS n FROM parted");
  assert.equal(Number(counted.n), 1);
});

test('the active coordinator killed with kill -9: the standby, serving /health and a 503 /ready meanwhile, takes over at the same HTTP address; DDL and writes carry on', async () => {
  const [active, standby] = cluster.coordinators;
  assert.ok(standby, 'two coordinators');
  assert.ok(standby.http, 'a standby names its HTTP address');
  assert.equal((await fetch(`http://${standby.http}/health`)).status, 200);
  const standing = await fetch(`http://${standby.http}/ready`);
  assert.equal(standing.status, 503);
  assert.match(((await standing.json()) as { reason: string }).reason, /stands by/);
  assert.equal((await fetch(`http://${active.http}/ready`)).status, 200);
  await active.kill();
  // The client waits for the standby to take over by itself.
  await cluster.sql.execute("CREATE TABLE after_failover (id BIGINT, v STRING) WITH ('bucket.num' = '2')");
  assert.equal((await fetch(`http://${standby.http}/ready`)).status, 200, 'the new active coordinator is ready at the address it had');
  const servers = (await (await fetch(`http://${standby.http}/api/v1/cluster/tablet-servers`)).json()) as { tablet_servers: unknown[] };
  assert.equal(servers.tablet_servers.length, 3);
  assert.equal(await scrape(standby.http, 'tributary_tablet_servers'), 3);
  await cluster.sql.execute("INSERT INTO after_failover VALUES (1, 'a'), (2, 'b')");
  const [counted] = await query('SELECT count(*) AS n FROM after_failover');
  assert.equal(Number(counted.n), 2);
  await cluster.restart(active);
});

test('a tablet server given SIGTERM while it starts (waiting for its id to be free) stops once started and exits 0', async () => {
  // Another session holds id 9, as a crashed process's would until it times out.
  const holder = await ZooKeeperSession.connect({ address: cluster.zooKeeper.address, sessionTimeoutMs: 20_000, connectionTimeoutMs: 15_000 });
  const dataDir = tempDir('data');
  let held = true;
  try {
    await holder.ensure(['/tributary', '/tributary/tabletservers', '/tributary/tabletservers/ids']);
    await holder.create('/tributary/tabletservers/ids/9', Buffer.from('{}'), 'ephemeral');
    const settings = { 'zookeeper.address': cluster.zooKeeper.address, 'zookeeper.client.session-timeout': '20s', 'tablet-server.id': '9' };
    const args = [...CLI_ARGS, 'tablet-server', '--data-dir', dataDir, '--port', '0', ...Object.entries(settings).flatMap(([k, v]) => ['--set', `${k}=${v}`])];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, TRIBUTARY_LOG_LEVEL: 'info' } });
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    await until('it waits for its id', async () => stderr.includes('the id is still registered') || undefined);
    child.kill('SIGTERM');
    await holder.close(); // the id is free: the start completes, then the stop
    held = false;
    const [code, signal] = await exited;
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, stderr.slice(-2000));
    assert.match(stderr, /shutdown requested/);
  } finally {
    if (held) await holder.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
