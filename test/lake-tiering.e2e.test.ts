/**
 * Lake tiering end to end, with real server and worker processes: the lake (read by DuckDB from the
 * files the Iceberg metadata lists) always equals the table up to the registered offsets, with no
 * duplicate and no gap, through worker and server crashes, a crash between the lake commit and the
 * report to the coordinator, and two workers racing for the same offsets.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, test } from 'node:test';
import { DuckDBInstance } from '@duckdb/node-api';
import pino from 'pino';
import { Connection } from '../src/client/index.js';
import type { TablePath } from '../src/client/index.js';
import { icebergBucket } from '../src/common/bucketing.js';
import { FileSystemCatalog } from '../src/lake/iceberg/catalog.js';
import { lakeFormat } from '../src/lake/formats/index.js';
import { planScan } from '../src/lake/iceberg/scan.js';
import { runTieringRound } from '../src/tiering/tiering-round.js';
import { ApiKeys } from '../src/rpc/api-keys.js';
import { readLakeTable } from './support/lake-content.js';
import { TestCluster } from './support/cluster.js';
import type { ServerProcess } from './support/server-process.js';

const silent = pino({ level: 'silent' });
const format = lakeFormat('iceberg', { writerThreads: 1 });
after(() => format.close());

const LOG: TablePath = { database: 'tributary', table: 'events' };
const PK: TablePath = { database: 'tributary', table: 'accounts' };

async function createTables(conn: Connection, freshness: string): Promise<void> {
  const admin = conn.getAdmin();
  await admin.createTable(LOG, {
    columns: [
      { name: 'id', type: 'BIGINT', nullable: false },
      { name: 'note', type: 'STRING' },
      { name: 'small', type: 'SMALLINT' },
    ],
    properties: { 'bucket.num': '2', 'bucket.key': 'id', 'table.datalake.enabled': 'true', 'table.datalake.freshness': freshness },
  });
  await admin.createTable(PK, {
    columns: [
      { name: 'k', type: 'INT' },
      { name: 'v', type: 'STRING' },
      { name: 'n', type: 'BIGINT' },
    ],
    primaryKey: ['k'],
    properties: { 'bucket.num': '2', 'table.datalake.enabled': 'true', 'table.datalake.freshness': freshness },
  });
}

/** Writes acknowledged rows and keeps the model of what the tables hold. */
class Workload {
  nextId = 0n;
  readonly state = new Map<number, { v: string; n: bigint }>();
  private step = 0;

  async write(conn: Connection, logRows: number, pkOps: number): Promise<void> {
    const events = await (await conn.getTable(LOG)).newAppend().createWriter();
    for (let i = 0; i < logRows; i++) {
      await events.append({ id: this.nextId, note: `n${this.nextId}`, small: Number(this.nextId % 1000n) });
      this.nextId++;
    }
    await events.flush();
    const accounts = await (await conn.getTable(PK)).newUpsert().createWriter();
    const applied: (() => void)[] = [];
    for (let i = 0; i < pkOps; i++) {
      const k = (this.step * 7919) % 300;
      const s = this.step++;
      if (s % 5 === 4) {
        await accounts.delete({ k });
        applied.push(() => this.state.delete(k));
      } else {
        await accounts.upsert({ k, v: `v${s}`, n: BigInt(s) });
        applied.push(() => this.state.set(k, { v: `v${s}`, n: BigInt(s) }));
      }
    }
    await accounts.flush();
    for (const a of applied) a(); // acknowledged: now the model holds them
  }
}

async function waitCaughtUp(conn: Connection, timeoutMs = 60_000): Promise<void> {
  const admin = conn.getAdmin();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const statuses = await Promise.all([admin.getLakeTieringStatus(LOG), admin.getLakeTieringStatus(PK)]);
    if (statuses.every((s) => s.buckets.every((b) => b.recordsBehind === 0n))) return;
    if (Date.now() > deadline) throw new Error(`lake did not catch up: ${JSON.stringify(statuses, (_, v) => (typeof v === 'bigint' ? String(v) : v))}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The lake equals the tables: every log row once, offsets per bucket without gap; the PK state exactly. */
async function assertLakeMatches(server: ServerProcess, w: Workload): Promise<void> {
  const conn = await Connection.create({ 'bootstrap.servers': server.bootstrap });
  try {
    const stored = await (await conn.getTable(PK)).newScan().createBatchScanner().readAll();
    const tableState = new Map(stored.map((r) => [r.k as number, { v: r.v as string, n: r.n as bigint }]));
    assert.deepEqual(new Map([...tableState].sort((a, b) => a[0] - b[0])), new Map([...w.state].sort((a, b) => a[0] - b[0])), 'the table holds every acknowledged write');
    const ends = await conn.getAdmin().listOffsets(LOG, [0, 1], 'latest');
    assert.equal(ends.get(0)! + ends.get(1)!, w.nextId, 'the log holds every acknowledged row');
  } finally {
    await conn.close();
  }
  const warehouse = path.join(server.dataDir, 'lake');
  const log = await readLakeTable(warehouse, LOG.database, LOG.table);
  const ids = log.rows.map((r) => r.id as bigint).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  assert.equal(ids.length, Number(w.nextId), 'each log row exactly once');
  ids.forEach((id, i) => assert.equal(id, BigInt(i)));
  for (const r of log.rows) {
    assert.equal(r.note, `n${r.id}`);
    assert.equal(r.small, Number((r.id as bigint) % 1000n)); // SMALLINT widened to int
  }
  for (const bucket of [0, 1]) {
    const offsets = log.rows.filter((r) => r.__bucket === bucket).map((r) => r.__offset as bigint).sort((a, b) => (a < b ? -1 : 1));
    offsets.forEach((o, i) => assert.equal(o, BigInt(i), `bucket ${bucket}: offsets without gap or duplicate`));
  }
  const pk = await readLakeTable(warehouse, PK.database, PK.table);
  const lakeState = new Map<number, { v: string; n: bigint }>();
  for (const r of pk.rows) {
    assert.ok(!lakeState.has(r.k as number), `key ${r.k} once in the lake`);
    lakeState.set(r.k as number, { v: r.v as string, n: r.n as bigint });
  }
  assert.deepEqual(new Map([...lakeState].sort((a, b) => a[0] - b[0])), new Map([...w.state].sort((a, b) => a[0] - b[0])));
}

/**
 * The log table's data files as the tiering round writes them: Parquet statistics for every
 * column; integer columns delta encoded and not compressed, the rest ZSTD.
 */
async function assertLogFileLayout(server: ServerProcess): Promise<void> {
  const loaded = await new FileSystemCatalog(path.join(server.dataDir, 'lake')).loadTable(LOG.database, LOG.table);
  const files = (await planScan(loaded)).dataFiles.map((t) => t.file.filePath);
  assert.ok(files.length > 0);
  const duck = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
  const con = await duck.connect();
  try {
    for (const file of files) {
      const columns = (await con.runAndReadAll(`SELECT path_in_schema, compression, stats_min_value IS NOT NULL FROM parquet_metadata('${file}') WHERE row_group_id = 0 ORDER BY column_id`)).getRows();
      assert.deepEqual(columns, [
        ['id', 'UNCOMPRESSED', true],
        ['note', 'ZSTD', true],
        ['small', 'UNCOMPRESSED', true],
        ['__bucket', 'UNCOMPRESSED', true],
        ['__offset', 'UNCOMPRESSED', true],
        ['__timestamp', 'UNCOMPRESSED', true],
      ]);
    }
  } finally {
    con.closeSync();
    duck.closeSync();
  }
}

type Assignment = Awaited<ReturnType<typeof assign>>;

/** Asks the coordinator for a table to tier, as a worker does; `failed` reports an earlier round as failed first. */
async function assign(conn: Connection, failed?: { tableId: bigint; tieringEpoch: bigint }) {
  const rpc = await conn.coordinator();
  for (let i = 0; i < 100; i++) {
    const resp = await rpc.request(ApiKeys.LakeTieringHeartbeat, {
      requestTable: true,
      failedTables: failed && i === 0 ? [{ ...failed, errorMessage: 'test' }] : [],
    });
    if (resp.tieringTable) return resp.tieringTable;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('no table to tier');
}

/** Asks until table `tableId` is handed out; other tables handed out meanwhile are given back. */
async function assignTable(conn: Connection, tableId: bigint, failed?: { tableId: bigint; tieringEpoch: bigint }): Promise<Assignment> {
  let a = await assign(conn, failed);
  while (a.tableId !== tableId) a = await assign(conn, { tableId: a.tableId, tieringEpoch: a.tieringEpoch });
  return a;
}

function round(conn: Connection, a: Assignment, onLakeCommitted?: (id: bigint) => void) {
  return runTieringRound({
    conn,
    tableId: Number(a.tableId),
    path: { database: a.tablePath!.databaseName, table: a.tablePath!.tableName },
    epoch: a.tieringEpoch,
    lake: format.open(a.warehouse),
    signal: new AbortController().signal,
    log: silent,
    ...(onLakeCommitted ? { onLakeCommitted } : {}),
  });
}

test('a crash between the lake commit and the report: the next round registers the snapshot and writes nothing twice', async () => {
  const cluster = await TestCluster.start({ args: ['--no-tiering'] });
  const { server, conn } = cluster;
  try {
    await createTables(conn, '1h');
    const w = new Workload();
    await w.write(conn, 300, 200);
    const last: Assignment[] = [];
    for (let table = 0; table < 2; table++) {
      const a = await assign(conn);
      // The worker "dies" right after the lake commit: the coordinator never hears of the snapshot.
      let committed: bigint | undefined;
      await assert.rejects(
        round(conn, a, (id) => {
          committed = id;
          throw new Error('crash');
        }),
        /crash/,
      );
      assert.ok(committed);
      await w.write(conn, 100, 50);
      const b = await assignTable(conn, a.tableId, { tableId: a.tableId, tieringEpoch: a.tieringEpoch });
      assert.ok(b.tieringEpoch > a.tieringEpoch);
      const result = await round(conn, b);
      assert.ok(result.snapshotId !== undefined && result.snapshotId !== committed);
      const registered = await conn.getAdmin().getLakeSnapshot({ database: b.tablePath!.databaseName, table: b.tablePath!.tableName });
      assert.equal(registered.snapshotId, result.snapshotId);
      last.push(b);
    }
    // A last round of each table takes the rows written after its round.
    for (const b of last) await round(conn, await assignTable(conn, b.tableId, { tableId: b.tableId, tieringEpoch: b.tieringEpoch }));
    await assertLakeMatches(server, w);
    await assertLogFileLayout(server);
  } finally {
    await cluster.stop();
  }
});

test('two rounds racing from the same lake snapshot: one commits, the other is fenced by the lake', async () => {
  const cluster = await TestCluster.start({ args: ['--no-tiering'], settings: { 'datalake.tiering.timeout': '1s' } });
  const { server, conn } = cluster;
  try {
    await createTables(conn, '1h');
    const w = new Workload();
    await w.write(conn, 2000, 10);
    const first = await assign(conn);
    // Let the lease run out: the table goes back to the queue and a second worker gets a new epoch.
    await new Promise((r) => setTimeout(r, 2500));
    const second = await assignTable(conn, first.tableId);
    const outcomes = await Promise.allSettled([round(conn, first), round(conn, second)]);
    // Whichever reached the lake first committed there (the stale epoch's report may still be
    // refused by the coordinator); the other found the lake moved and committed nothing.
    const fenced = outcomes.filter((o) => o.status === 'rejected' && (o.reason as { errorName?: string }).errorName === 'FENCED_TIERING_EPOCH_EXCEPTION');
    assert.ok(fenced.length >= 1, JSON.stringify(outcomes.map((o) => o.status)));
    assert.ok(outcomes.every((o) => o.status === 'fulfilled' || (o.reason as { errorName?: string }).errorName === 'FENCED_TIERING_EPOCH_EXCEPTION'));
    const table = { database: first.tablePath!.databaseName, table: first.tablePath!.tableName };
    const lake = await readLakeTable(path.join(server.dataDir, 'lake'), table.database, table.table);
    assert.equal(lake.metadata.snapshots.length, 1, 'one lake snapshot from the two rounds');
    // The other table, and the rest of this one, by a regular worker.
    const worker = await cluster.startTiering();
    await conn.getAdmin().alterTable(LOG, { set: { 'table.datalake.freshness': '200ms' } });
    await conn.getAdmin().alterTable(PK, { set: { 'table.datalake.freshness': '200ms' } });
    await waitCaughtUp(conn);
    await worker.stop();
    await assertLakeMatches(server, w);
  } finally {
    await cluster.stop();
  }
});

test('kill -9 of tiering workers and of the server over many rounds: the lake equals the table', async () => {
  const cluster = await TestCluster.start({ args: ['--no-tiering'], settings: { 'datalake.tiering.timeout': '1s' } });
  let { server, conn } = cluster;
  const { dataDir } = server;
  const w = new Workload();
  try {
    await createTables(conn, '100ms');
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let cycle = 0; cycle < 8; cycle++) {
      const worker = await cluster.startTiering();
      await w.write(conn, 200 + Math.floor(next() * 300), 100);
      await new Promise((r) => setTimeout(r, 100 + next() * 900));
      await worker.kill();
      if (cycle === 3 || cycle === 6) {
        await conn.close();
        await server.kill();
        server = await cluster.restart();
        conn = await cluster.reconnect();
      }
    }
    const worker = await cluster.startTiering();
    await waitCaughtUp(conn);
    await worker.stop();
    await assertLakeMatches(server, w);
    // Every snapshot tiering committed came from a distinct epoch.
    const lake = await readLakeTable(path.join(dataDir, 'lake'), LOG.database, LOG.table);
    const epochs = lake.metadata.snapshots.map((s) => s.summary['tributary.tiering-epoch']).filter(Boolean);
    assert.equal(new Set(epochs).size, epochs.length);
  } finally {
    await cluster.stop();
  }
});

test('partitioned table: lake partitions by key and bucket, log retention waits for the lake, rows reach the lake within the freshness', async () => {
  const cluster = await TestCluster.start({
    args: ['--no-tiering'],
    settings: { 'log.segment.file-size': '2kb', 'log.retention.check-interval': '200ms' },
  });
  const { server, conn } = cluster;
  const path_: TablePath = { database: 'tributary', table: 'clicks' };
  const admin = conn.getAdmin();
  try {
    await admin.createTable(path_, {
      columns: [
        { name: 'region', type: 'STRING', nullable: false },
        { name: 'id', type: 'BIGINT', nullable: false },
        { name: 'payload', type: 'STRING' },
      ],
      partitionKeys: ['region'],
      properties: { 'bucket.num': '3', 'bucket.key': 'id', 'table.log.ttl': '1s', 'table.datalake.enabled': 'true', 'table.datalake.freshness': '3s' },
    });
    const writer = await (await conn.getTable(path_)).newAppend().createWriter();
    let id = 0n;
    for (let batch = 0; batch < 12; batch++) {
      for (let i = 0; i < 40; i++, id++) await writer.append({ region: id % 2n === 0n ? 'eu' : 'us', id, payload: 'x'.repeat(40) });
      await writer.flush();
    }
    const earliest = async (region: string) => [...(await admin.listOffsets(path_, [0, 1, 2], 'earliest', region)).values()];
    // The ttl has passed many times over, but the lake holds nothing yet: every segment stays.
    await new Promise((r) => setTimeout(r, 2000));
    assert.deepEqual([...(await earliest('eu')), ...(await earliest('us'))], [0n, 0n, 0n, 0n, 0n, 0n]);
    const waiting = await admin.getLakeTieringStatus(path_);
    assert.equal(waiting.state, 'PENDING');
    assert.ok(waiting.lagMs >= 2000, 'lag counts from the table creation while nothing is tiered');

    const worker = await cluster.startTiering();
    try {
      const caughtUp = async () => (await admin.getLakeTieringStatus(path_)).buckets.every((b) => b.recordsBehind === 0n);
      while (!(await caughtUp())) await new Promise((r) => setTimeout(r, 100));
      // Freshness: rows written now are in the lake within the freshness and a round (generous bound).
      const written = Date.now();
      for (let i = 0; i < 10; i++, id++) await writer.append({ region: 'eu', id, payload: 'late' });
      await writer.flush();
      while (!(await caughtUp())) {
        assert.ok(Date.now() - written < 30_000, 'rows reach the lake within freshness + round time');
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal((await admin.getLakeTieringStatus(path_)).lagMs, 0);
      // Now that the lake holds them, expired segments go.
      const deadline = Date.now() + 20_000;
      while ((await earliest('eu')).every((o) => o === 0n)) {
        assert.ok(Date.now() < deadline, 'retention deletes segments the lake holds');
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      await worker.stop();
    }
    const lake = await readLakeTable(path.join(server.dataDir, 'lake'), path_.database, path_.table);
    assert.equal(lake.rows.length, Number(id), 'the lake keeps every row, also those the log dropped');
    assert.deepEqual(new Set(lake.rows.map((r) => r.id)).size, Number(id));
    const spec = lake.metadata.partitionSpecs[0].fields.map((f) => [f.name, f.transform]);
    assert.deepEqual(spec, [
      ['region', 'identity'],
      ['id_bucket', 'bucket[3]'],
    ]);
    for (const r of lake.rows) {
      assert.equal(r.region, (r.id as bigint) % 2n === 0n || r.payload === 'late' ? 'eu' : 'us');
      // Tributary bucket b is lake bucket b: Iceberg's bucket[3] of the key.
      assert.equal(r.__bucket, icebergBucket(r.id as bigint, 3));
    }
  } finally {
    await cluster.stop();
  }
});
