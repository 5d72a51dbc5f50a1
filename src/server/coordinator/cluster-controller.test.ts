import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { create } from '@bufbuild/protobuf';
import { test } from 'node:test';
import pino from 'pino';
import { useZooKeeper } from '../../../test/support/zookeeper.js';
import { ServerActivity } from '../../common/activity.js';
import { Options } from '../../common/config.js';
import { ErrorCodes, TributaryError } from '../../common/errors.js';
import { type TableDescriptor, tableInfoFromJson } from '../../common/schema.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import { RpcConnection } from '../../rpc/connection.js';
import { ControlledShutdownRequestSchema, type PbBucketLeaderAndIsr, type PbBucketMetadata, type UpdateMetadataRequest } from '../../rpc/gen/tributary_pb.js';
import { RpcServer } from '../../rpc/server.js';
import { partitionable, until } from '../metadata/fixtures/zookeeper-network.js';
import { TabletServerRegistration } from '../metadata/tablet-server-registry.js';
import { ZooKeeperSession } from '../metadata/zookeeper-session.js';
import { ClusterCoordinator } from './cluster-coordinator.js';

const zooKeeper = useZooKeeper();
const log = pino({ level: 'silent' });

const rpcServer = (): RpcServer =>
  new RpcServer({ host: '127.0.0.1', port: 0, maxFrameBytes: 1 << 20, maxInflightBytes: 1 << 24, frameTimeoutMs: 30_000, idleTimeoutMs: 600_000, closeTimeoutMs: 1000 });

const zooKeeperSettings = (root: string) => ({ address: zooKeeper.server.address, root, sessionTimeoutMs: 20_000, connectionTimeoutMs: 15_000 });

interface Told {
  coordinatorEpoch: number;
  tableId: number;
  partitionId?: number;
  partitionName?: string;
  tableJson: string;
  bucket: PbBucketLeaderAndIsr;
}

/**
 * A tablet server as the coordinator sees it: registered in ZooKeeper, answering the coordinator's
 * requests on a real RPC endpoint and recording them.
 */
class StandInTabletServer {
  readonly told: Told[] = [];
  readonly stopped: { coordinatorEpoch: number; tableId: number; partitionId?: number; bucket: number; delete: boolean }[] = [];
  readonly metadata: UpdateMetadataRequest[] = [];
  /** The NotifyLeaderAndIsr requests marked as the full set: coordinator epoch and the `<table id>/<bucket>` they name. */
  readonly fullSets: { coordinatorEpoch: number; buckets: string[] }[] = [];
  /** NotifyLakeTableOffset: `<coordinator epoch>:<table id>:<partition id or ->:<bucket>=<end offset>`, in arrival order. */
  readonly lakeOffsets: string[] = [];
  private registration?: TabletServerRegistration;

  private constructor(
    readonly id: number,
    private readonly root: string,
    private readonly rpc: RpcServer,
    private readonly port: number,
  ) {}

  static async start(root: string, id: number, rack?: string): Promise<StandInTabletServer> {
    const rpc = rpcServer();
    rpc.register(ApiKeys.NotifyLeaderAndIsr, async (req) => {
      if (req.fullSet) server.fullSets.push({ coordinatorEpoch: req.coordinatorEpoch, buckets: req.tables.flatMap((t) => t.buckets.map((b) => `${t.tableId}/${b.bucketId}`)).sort() });
      for (const t of req.tables) {
        for (const bucket of t.buckets) {
          server.told.push({
            coordinatorEpoch: req.coordinatorEpoch,
            tableId: Number(t.tableId),
            ...(t.partitionId !== undefined ? { partitionId: Number(t.partitionId), partitionName: t.partitionName } : {}),
            tableJson: t.tableJson,
            bucket,
          });
        }
      }
      return { buckets: [] };
    });
    rpc.register(ApiKeys.StopReplica, async (req) => {
      for (const b of req.buckets) {
        server.stopped.push({ coordinatorEpoch: req.coordinatorEpoch, tableId: Number(b.tableId), ...(b.partitionId !== undefined ? { partitionId: Number(b.partitionId) } : {}), bucket: b.bucketId, delete: b.delete });
      }
      return { buckets: [] };
    });
    rpc.register(ApiKeys.UpdateMetadata, async (req) => {
      server.metadata.push(req);
      return {};
    });
    rpc.register(ApiKeys.NotifyLakeTableOffset, async (req) => {
      for (const t of req.tables) {
        for (const o of t.bucketOffsets) server.lakeOffsets.push(`${req.coordinatorEpoch}:${t.tableId}:${o.partitionId ?? '-'}:${o.bucketId}=${o.logEndOffset}`);
      }
      return {};
    });
    const { port } = await rpc.listen();
    const server = new StandInTabletServer(id, root, rpc, port);
    await server.join(rack);
    zooKeeper.track(server);
    return server;
  }

  /** Registers (again): the coordinator sees it join. */
  async join(rack?: string): Promise<void> {
    this.registration = await TabletServerRegistration.register(zooKeeperSettings(this.root), { id: this.id, host: '127.0.0.1', port: this.port, ...(rack ? { rack } : {}) }, log);
  }

  /** Its session ends, as when the process dies: the coordinator sees it leave. */
  async leave(): Promise<void> {
    await this.registration?.close();
  }

  /**
   * Its process restarts before the coordinator sees the registration go: a new session deletes
   * the znode and creates its own, both sent at once, so the coordinator's next look finds the new
   * owner only (as when a server restarted under load waits for its old session to time out).
   */
  async restartUnseen(): Promise<void> {
    const session = zooKeeper.track(await ZooKeeperSession.connect(zooKeeperSettings(this.root)));
    const znode = `${this.root}/tabletservers/ids/${this.id}`;
    const registration = Buffer.from(JSON.stringify({ version: 1, host: '127.0.0.1', port: this.port, register_timestamp: Date.now() }));
    await Promise.all([session.remove(znode, -1), session.create(znode, registration, 'ephemeral')]);
    await this.registration?.close();
    this.registration = undefined;
  }

  get epoch(): bigint {
    return this.registration!.epoch;
  }

  /** The last state it was told of a bucket. */
  latest(tableId: number, bucket: number, partitionId?: number): Told | undefined {
    return this.told.findLast((t) => t.tableId === tableId && t.bucket.bucketId === bucket && t.partitionId === partitionId);
  }

  /** The tablet server ids of the last UpdateMetadata it got. */
  knownServers(): number[] | undefined {
    return this.metadata.at(-1)?.tabletServers.map((s) => s.nodeId);
  }

  async close(): Promise<void> {
    await this.leave();
    await this.rpc.close();
  }
}

/** A coordinator candidate on its own session; `started` resolves once it leads. */
function candidate(
  root: string,
  id: number,
  settings: Record<string, string> = {},
  connection: Partial<ReturnType<typeof zooKeeperSettings>> = {},
  signal?: AbortSignal,
): { session: Promise<ZooKeeperSession>; started: Promise<ClusterCoordinator> } {
  const session = ZooKeeperSession.connect({ ...zooKeeperSettings(root), ...connection }).then((s) => zooKeeper.track(s));
  const activity = new ServerActivity(log);
  const started = session.then((s) =>
    ClusterCoordinator.start({
      options: new Options('server', { 'zookeeper.address': zooKeeper.server.address, 'zookeeper.path.root': root, ...settings }),
      session: s,
      self: { id, host: '127.0.0.1', port: 9_900 + id },
      log,
      activity,
      ...(signal ? { signal } : {}),
    }),
  );
  void started.then((c) => zooKeeper.track({ close: async () => (await c.stop(), activity.close()) }), () => activity.close());
  return { session, started };
}

async function servers(root: string, count: number): Promise<StandInTabletServer[]> {
  return Promise.all(Array.from({ length: count }, (_, i) => StandInTabletServer.start(root, i + 1)));
}

const logTable = (buckets: number, properties: Record<string, string> = {}): TableDescriptor => ({ columns: [{ name: 'id', type: 'INT' }], bucketCount: buckets, properties });

/** GetMetadata of a table (or of a partition), from the coordinator's RPC services. */
async function bucketsOf(coordinator: ClusterCoordinator, table: string, partitionId?: number): Promise<PbBucketMetadata[]> {
  const rpc = rpcServer();
  coordinator.registerServices(rpc);
  const { port } = await rpc.listen();
  const conn = await RpcConnection.connect('127.0.0.1', port);
  try {
    if (partitionId !== undefined) return (await conn.request(ApiKeys.GetMetadata, { partitionsId: [BigInt(partitionId)] })).partitionMetadata[0].bucketMetadata;
    const answer = await conn.request(ApiKeys.GetMetadata, { tablePath: [{ databaseName: 'tributary', tableName: table }] });
    return answer.tableMetadata[0].bucketMetadata;
  } finally {
    await conn.close();
    await rpc.close();
  }
}

/** Leader, leader epoch and bucket epoch of what a server was told. */
const role = (told: Told | undefined) => [told?.bucket.leader, told?.bucket.leaderEpoch, told?.bucket.bucketEpoch];

const state = (b: PbBucketMetadata) => ({ leader: b.leaderId, leaderEpoch: b.leaderEpoch, replicas: b.replicaId, isr: b.isr });

test('creating a table assigns each bucket to distinct live servers and tells every replica its role; drop stops and deletes them', async () => {
  const root = zooKeeper.newRoot('cluster');
  const stands = await servers(root, 3);
  const coordinator = await candidate(root, 100).started;
  await until('every server learns the cluster', () => stands.every((s) => s.knownServers()?.length === 3));
  const { coordinatorServer } = stands[0].metadata.at(-1)!;
  assert.deepEqual([coordinatorServer?.nodeId, coordinatorServer?.host, coordinatorServer?.port], [100, '127.0.0.1', 10_000]);

  const tableId = await coordinator.coordinator.createTable({ database: 'tributary', table: 'orders' }, logTable(6, { 'table.replication.factor': '2' }), false);
  const buckets = await bucketsOf(coordinator, 'orders');
  assert.equal(buckets.length, 6);
  for (const b of buckets) {
    assert.equal(new Set(b.replicaId).size, 2, `bucket ${b.bucketId} on two servers`);
    assert.deepEqual(state(b), { leader: b.replicaId[0], leaderEpoch: 0, replicas: b.replicaId, isr: b.replicaId });
    // createTable returns once the replicas have been told.
    for (const s of stands) {
      const told = s.latest(tableId, b.bucketId);
      if (!b.replicaId.includes(s.id)) {
        assert.equal(told, undefined, `server ${s.id} holds no replica of bucket ${b.bucketId}`);
        continue;
      }
      assert.ok(told, `server ${s.id} was told of bucket ${b.bucketId}`);
      assert.equal(told.coordinatorEpoch, coordinator.epoch);
      assert.deepEqual([told.bucket.leader, told.bucket.leaderEpoch, told.bucket.replicas, told.bucket.isr, told.bucket.bucketEpoch], [b.leaderId, 0, b.replicaId, b.isr, 0]);
      assert.deepEqual(tableInfoFromJson(JSON.parse(told.tableJson)).path, { database: 'tributary', table: 'orders' });
    }
  }
  assert.deepEqual(new Set(buckets.map((b) => b.leaderId)), new Set([1, 2, 3]), 'leadership is spread');

  // ALTER TABLE: every replica gets the new table JSON, at the same epochs.
  await coordinator.coordinator.alterTable({ database: 'tributary', table: 'orders' }, { options: [{ key: 'table.log.ttl', value: '1d' }] }, false);
  const altered = (t: Told | undefined) => t !== undefined && tableInfoFromJson(JSON.parse(t.tableJson)).properties['table.log.ttl'] === '1d';
  await until('the replicas get the altered table', () => buckets.every((b) => b.replicaId.every((id) => altered(stands[id - 1].latest(tableId, b.bucketId)))));
  for (const b of buckets) for (const id of b.replicaId) assert.deepEqual(role(stands[id - 1].latest(tableId, b.bucketId)), [b.leaderId, 0, 0]);

  // A partition's buckets are told with its id and name.
  const events = { database: 'tributary', table: 'events' };
  await coordinator.coordinator.createTable(events, { columns: [{ name: 'day', type: 'STRING' }, { name: 'id', type: 'INT' }], partitionKeys: ['day'], bucketCount: 2 }, false);
  const partitionId = await coordinator.coordinator.createPartition(events, { day: '2026-12-01' }, false);
  const eventsId = coordinator.coordinator.getTableInfo(events).tableId;
  const told = stands.flatMap((s) => s.told.filter((t) => t.tableId === eventsId));
  assert.equal(told.length, 2, 'one replica per bucket at the default factor');
  assert.ok(told.every((t) => t.partitionId === partitionId && t.partitionName === '2026-12-01'));
  const partitionBuckets = await bucketsOf(coordinator, 'events', partitionId);
  assert.equal(partitionBuckets.length, 2);
  for (const b of partitionBuckets) {
    const { bucket } = told.find((t) => t.bucket.bucketId === b.bucketId)!;
    assert.deepEqual(state(b), { leader: bucket.leader, leaderEpoch: 0, replicas: bucket.replicas, isr: bucket.isr }, 'GetMetadata of the partition shows what its replicas were told');
  }

  await coordinator.coordinator.dropTable({ database: 'tributary', table: 'orders' }, false);
  const stopped = stands.flatMap((s) => s.stopped.filter((x) => x.tableId === tableId).map((x) => `${s.id}:${x.bucket}:${x.delete}:${x.coordinatorEpoch}`));
  const expected = buckets.flatMap((b) => b.replicaId.map((id) => `${id}:${b.bucketId}:true:${coordinator.epoch}`));
  assert.deepEqual(stopped.sort(), expected.sort());
  const fresh = await ZooKeeperSession.connect(zooKeeperSettings(root));
  assert.equal(await fresh.exists(`${root}/metadata/assignments/${tableId}`), false);
  assert.equal(await fresh.exists(`${root}/metadata/leader_isr/${tableId}`), false);
  assert.equal(await fresh.exists(`${root}/metadata/assignments/${eventsId}/p${partitionId}`), true);
  await fresh.close();
});

test('more replicas than live tablet servers fails with INVALID_REPLICATION_FACTOR, and the table does not exist', async () => {
  const root = zooKeeper.newRoot('cluster');
  await servers(root, 2);
  const coordinator = await candidate(root, 100, { 'default.replication.factor': '3' }).started;
  const refused = (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_REPLICATION_FACTOR' && e.message.includes('asks for 3 replicas, but there are 2 live tablet servers');
  const path = { database: 'tributary', table: 'wide' };
  await assert.rejects(coordinator.coordinator.createTable(path, logTable(1), false), refused);
  await assert.rejects(coordinator.coordinator.createTable(path, { ...logTable(1), partitionKeys: ['id'] }, false), refused, 'a partitioned table is checked at creation');
  assert.equal(coordinator.coordinator.tableExists(path), false);
  await coordinator.coordinator.createTable(path, logTable(1, { 'table.replication.factor': '2' }), false);
});

test('a server that leaves hands its leaderships to ISR members at epoch + 1 and leaves the ISRs; back, it follows again, and offline buckets lead again', async () => {
  const root = zooKeeper.newRoot('cluster');
  const stands = await servers(root, 3);
  const coordinator = await candidate(root, 100).started;
  const tableId = await coordinator.coordinator.createTable({ database: 'tributary', table: 'orders' }, logTable(3, { 'table.replication.factor': '3' }), false);
  const soloId = await coordinator.coordinator.createTable({ database: 'tributary', table: 'solo' }, logTable(3), false);
  const before = await bucketsOf(coordinator, 'orders');
  const solo = await bucketsOf(coordinator, 'solo');
  const gone = stands[0];
  const rest = stands.slice(1);

  await gone.leave();
  await until('the others learn it left', () => rest.every((s) => s.knownServers()?.length === 2));
  const after = await bucketsOf(coordinator, 'orders');
  for (const [i, b] of after.entries()) {
    const was = before[i];
    const isr = was.isr.filter((id) => id !== gone.id);
    if (was.leaderId === gone.id) {
      assert.deepEqual(state(b), { leader: was.replicaId.find((id) => id !== gone.id), leaderEpoch: 1, replicas: was.replicaId, isr });
    } else {
      assert.deepEqual(state(b), { leader: was.leaderId, leaderEpoch: 0, replicas: was.replicaId, isr });
    }
    // The replicas are told in the background: wait until the change reaches them.
    await until(`the replicas hear of bucket ${i}`, () => rest.every((s) => s.latest(tableId, i)?.bucket.isr.length === 2));
    for (const s of rest) assert.deepEqual(role(s.latest(tableId, i)), [b.leaderId, b.leaderEpoch, 1]);
  }
  const offline = solo.find((b) => b.leaderId === gone.id)!;
  const soloAfter = (await bucketsOf(coordinator, 'solo'))[offline.bucketId];
  assert.deepEqual(state(soloAfter), { leader: -1, leaderEpoch: 1, replicas: [gone.id], isr: [gone.id] }, 'no live ISR member: offline, no unclean election');

  const toldBefore = gone.told.length;
  await gone.join();
  await until('everyone learns it is back', () => stands.every((s) => s.knownServers()?.length === 3));
  await until('it is told its replicas', () => gone.told.length >= toldBefore + 4);
  for (const b of after) assert.deepEqual(role(gone.latest(tableId, b.bucketId)), [b.leaderId, b.leaderEpoch, 1], 'it follows the current leader');
  const back = (await bucketsOf(coordinator, 'solo'))[offline.bucketId];
  assert.deepEqual(state(back), { leader: gone.id, leaderEpoch: 2, replicas: [gone.id], isr: [gone.id] });
  assert.equal(gone.latest(soloId, offline.bucketId)!.bucket.leader, gone.id);
});

test('a server that restarts before the coordinator sees it go leaves the ISRs and leaderships all the same, and is told its replicas as a follower', async () => {
  const root = zooKeeper.newRoot('cluster');
  const stands = await servers(root, 3);
  const coordinator = await candidate(root, 100).started;
  const tableId = await coordinator.coordinator.createTable({ database: 'tributary', table: 'orders' }, logTable(3, { 'table.replication.factor': '3' }), false);
  const before = await bucketsOf(coordinator, 'orders');
  const restarted = stands[0];
  const toldBefore = restarted.told.length;

  await restarted.restartUnseen();
  await until('it is told its replicas again', () => restarted.told.length >= toldBefore + 3);
  const after = await bucketsOf(coordinator, 'orders');
  for (const [i, b] of after.entries()) {
    const was = before[i];
    assert.deepEqual(b.isr, was.isr.filter((id) => id !== restarted.id), `bucket ${i}: it is in no ISR`);
    assert.notEqual(b.leaderId, restarted.id, `bucket ${i}: it leads nothing`);
    assert.equal(b.leaderEpoch, was.leaderId === restarted.id ? 1 : 0);
    assert.equal(restarted.latest(tableId, i)!.bucket.leader, b.leaderId, 'it follows the current leader');
  }
});

test('a coordinator taking over sends every live server the full set of its replicas, also an empty one, and so does a server that joins', async () => {
  const root = zooKeeper.newRoot('cluster');
  const stands = await servers(root, 3);
  const first = candidate(root, 100);
  const active = await first.started;
  const tableId = await active.coordinator.createTable({ database: 'tributary', table: 'one' }, logTable(1), false);
  const [holder] = (await bucketsOf(active, 'one'))[0].replicaId;
  const standby = candidate(root, 101);
  await standby.session;
  await (await first.session).close();
  const second = await standby.started;
  const fullSetsOf = (s: StandInTabletServer) => s.fullSets.filter((f) => f.coordinatorEpoch === second.epoch).map((f) => f.buckets);
  await until('every server gets its full set from the new coordinator', () => stands.every((s) => fullSetsOf(s).length > 0));
  for (const s of stands) assert.deepEqual(fullSetsOf(s), [s.id === holder ? [`${tableId}/0`] : []], `server ${s.id}`);

  const away = stands.find((s) => s.id !== holder)!;
  await away.leave();
  await until('the others learn it left', () => stands.filter((s) => s !== away).every((s) => s.knownServers()?.length === 2));
  await away.join();
  await until('it gets a full set again', () => fullSetsOf(away).length === 2);
  assert.deepEqual(fullSetsOf(away), [[], []], 'it holds nothing: its full set is empty');
});

test('lake end offsets reach every replica of the buckets the lake holds, and a server that comes back learns them again', async () => {
  const root = zooKeeper.newRoot('cluster');
  const stands = await servers(root, 3);
  const coordinator = await candidate(root, 100).started;
  const path = { database: 'tributary', table: 'tiered' };
  const tableId = await coordinator.coordinator.createTable(path, logTable(2, { 'table.replication.factor': '2' }), false);
  const buckets = await bucketsOf(coordinator, 'tiered');
  const info = coordinator.coordinator.getTableInfo(path);
  // The lake holds bucket 0 up to offset 7 and nothing of bucket 1.
  coordinator.controller.lakeOffsetsChanged(info, [{ bucket: 0, endOffset: 7n }]);
  const notice = `${coordinator.epoch}:${tableId}:-:0=7`;
  const holders = stands.filter((s) => buckets[0].replicaId.includes(s.id));
  await until('the replicas of bucket 0 learn the lake end offset', () => holders.every((s) => s.lakeOffsets.includes(notice)));
  for (const s of stands) {
    assert.deepEqual(s.lakeOffsets, holders.includes(s) ? [notice] : [], `server ${s.id} learns only of the buckets it holds`);
  }

  const back = holders[0];
  const rejoin = async (): Promise<void> => {
    const told = back.told.length;
    await back.leave();
    await until('the others learn it left', () => stands.filter((s) => s !== back).every((s) => s.knownServers()?.length === 2));
    await back.join();
    await until('it is told its replicas again', () => back.told.length > told);
  };
  await rejoin();
  await until('it learns the lake end offset again, with its replicas', () => back.lakeOffsets.length === 2);
  assert.deepEqual(back.lakeOffsets, [notice, notice]);

  await coordinator.coordinator.dropTable(path, false);
  const other = { database: 'tributary', table: 'other' };
  const otherId = await coordinator.coordinator.createTable(other, logTable(1, { 'table.replication.factor': '3' }), false);
  await rejoin();
  // Requests to a server arrive in the order they were sent: this one comes after anything the rejoin sent.
  coordinator.controller.lakeOffsetsChanged(coordinator.coordinator.getTableInfo(other), [{ bucket: 0, endOffset: 1n }]);
  const barrier = `${coordinator.epoch}:${otherId}:-:0=1`;
  await until('the later notice arrives', () => back.lakeOffsets.includes(barrier));
  assert.deepEqual(back.lakeOffsets, [notice, notice, barrier], 'a dropped table has no lake end offsets to send');
});

test('a primary-key bucket has a standby, which leads when the leader leaves; KV snapshot commits are fenced by both epochs, and the new leader is told the registered one', async () => {
  const root = zooKeeper.newRoot('cluster');
  const stands = await servers(root, 3);
  const coordinator = await candidate(root, 100).started;
  const pk: TableDescriptor = { columns: [{ name: 'id', type: 'INT', nullable: false }, { name: 'v', type: 'STRING' }], primaryKey: ['id'], bucketCount: 1, properties: { 'table.replication.factor': '3' } };
  const tableId = await coordinator.coordinator.createTable({ database: 'tributary', table: 'users' }, pk, false);
  const [placed] = await bucketsOf(coordinator, 'users');
  const [leader, standby] = placed.replicaId;
  for (const s of stands) assert.deepEqual(s.latest(tableId, 0)?.bucket.standbyReplicas, [standby], 'every replica is told the standby');
  const noStandby = await coordinator.coordinator.createTable({ database: 'tributary', table: 'plain' }, { ...pk, properties: { ...pk.properties, 'table.kv.standby-replica.enabled': 'false' } }, false);
  assert.deepEqual(stands[0].latest(noStandby, 0)?.bucket.standbyReplicas, []);

  const rpc = rpcServer();
  coordinator.registerServices(rpc);
  const conn = await RpcConnection.connect('127.0.0.1', (await rpc.listen()).port);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kv-snapshot-handles-'));
  fs.mkdirSync(path.join(dir, 'snap-1'));
  const commit = (leaderEpoch: number, coordinatorEpoch = coordinator.epoch) =>
    conn.request(ApiKeys.CommitKvSnapshot, {
      tableId: BigInt(tableId),
      bucketId: 0,
      snapshot: { snapshotId: 1n, logOffset: 42n, rowCount: 7n, metadataPath: path.join(dir, 'snap-1', '_METADATA') },
      bucketLeaderEpoch: leaderEpoch,
      coordinatorEpoch,
    });
  await assert.rejects(commit(0, coordinator.epoch - 1), { errorName: 'INVALID_COORDINATOR_EXCEPTION' });
  await assert.rejects(commit(-1), { errorName: 'FENCED_LEADER_EPOCH_EXCEPTION' });
  await commit(0);
  const latest = await conn.request(ApiKeys.GetLatestKvSnapshots, { tablePath: { databaseName: 'tributary', tableName: 'users' } });
  assert.deepEqual(latest.latestSnapshots.map((b) => [b.bucketId, b.snapshotId, b.logOffset, b.rowCount]), [[0, 1n, 42n, 7n]]);
  await coordinator.coordinator.createTable({ database: 'tributary', table: 'events' }, logTable(1), false);
  await assert.rejects(conn.request(ApiKeys.GetLatestKvSnapshots, { tablePath: { databaseName: 'tributary', tableName: 'events' } }), { errorName: 'NON_PRIMARY_KEY_TABLE_EXCEPTION' });

  await stands[leader - 1].leave();
  const next = stands[standby - 1];
  await until('the standby is told it leads', () => next.latest(tableId, 0)?.bucket.leader === standby);
  const told = next.latest(tableId, 0)!.bucket;
  assert.equal(told.leaderEpoch, 1);
  assert.deepEqual(told.standbyReplicas, placed.replicaId.filter((id) => id !== leader && id !== standby), 'the remaining follower stands by');
  assert.deepEqual([told.latestKvSnapshot?.snapshotId, told.latestKvSnapshot?.logOffset], [1n, 42n]);
  // The deposed leader's epoch is fenced now.
  await assert.rejects(commit(0), { errorName: 'FENCED_LEADER_EPOCH_EXCEPTION' });
  await conn.close();
  await rpc.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('AdjustIsr is applied only at the current leader epoch and bucket epoch, to an ISR of replicas holding the leader', async () => {
  const root = zooKeeper.newRoot('cluster');
  await servers(root, 3);
  const coordinator = await candidate(root, 100).started;
  const tableId = await coordinator.coordinator.createTable({ database: 'tributary', table: 'orders' }, logTable(1, { 'table.replication.factor': '3' }), false);
  const [b] = await bucketsOf(coordinator, 'orders');
  const rpc = rpcServer();
  coordinator.registerServices(rpc);
  const conn = await RpcConnection.connect('127.0.0.1', (await rpc.listen()).port);
  const adjust = async (serverId: number, leaderEpoch: number, bucketEpoch: number, newIsr: number[]) =>
    (await conn.request(ApiKeys.AdjustIsr, { serverId, buckets: [{ tableId: BigInt(tableId), bucketId: 0, leaderEpoch, bucketEpoch, newIsr }] })).buckets[0];
  const follower = b.replicaId[1];
  const shrunk = b.isr.filter((id) => id !== follower);

  assert.equal((await adjust(b.leaderId, 1, 0, shrunk)).errorCode, ErrorCodes.FENCED_LEADER_EPOCH_EXCEPTION);
  assert.equal((await adjust(follower, 0, 0, shrunk)).errorCode, ErrorCodes.FENCED_LEADER_EPOCH_EXCEPTION, 'only the leader adjusts');
  assert.equal((await adjust(b.leaderId, 0, 5, shrunk)).errorCode, ErrorCodes.INVALID_UPDATE_VERSION_EXCEPTION);
  assert.equal((await adjust(b.leaderId, 0, 0, [follower])).errorCode, ErrorCodes.INVALID_ARGUMENT, 'the leader stays in the ISR');
  assert.equal((await adjust(b.leaderId, 0, 0, [b.leaderId, 42])).errorCode, ErrorCodes.INVALID_ARGUMENT, 'only replicas');

  const applied = await adjust(b.leaderId, 0, 0, shrunk);
  assert.equal(applied.errorCode, undefined);
  assert.deepEqual([applied.leader, applied.leaderEpoch, applied.isr, applied.bucketEpoch], [b.leaderId, 0, shrunk, 1]);
  assert.deepEqual((await bucketsOf(coordinator, 'orders'))[0].isr, shrunk);
  const stale = await adjust(b.leaderId, 0, 0, b.isr);
  assert.equal(stale.errorCode, ErrorCodes.INVALID_UPDATE_VERSION_EXCEPTION);
  assert.deepEqual([stale.isr, stale.bucketEpoch], [shrunk, 1], 'a refusal carries the current state');
  assert.deepEqual((await adjust(b.leaderId, 0, 1, b.isr)).isr, b.isr, 'expanded again at the new bucket epoch');
  await conn.close();
  await rpc.close();
});

test('a controlled shutdown moves every leadership it can to another ISR member and answers how many remain', async () => {
  const root = zooKeeper.newRoot('cluster');
  const stands = await servers(root, 2);
  const coordinator = await candidate(root, 100).started;
  const replicated = await coordinator.coordinator.createTable({ database: 'tributary', table: 'replicated' }, logTable(2, { 'table.replication.factor': '2' }), false);
  await coordinator.coordinator.createTable({ database: 'tributary', table: 'solo' }, logTable(2), false);
  const stopping = stands[0];
  const leadsSolo = (await bucketsOf(coordinator, 'solo')).filter((b) => b.leaderId === stopping.id).length;
  assert.equal(leadsSolo, 1);

  const answer = await coordinator.controller.controlledShutdown(create(ControlledShutdownRequestSchema, { serverId: stopping.id, serverEpoch: stopping.epoch }));
  assert.equal(answer.remainingLeaders, 1, 'a bucket with no other replica stays led');
  for (const b of await bucketsOf(coordinator, 'replicated')) {
    assert.deepEqual([b.leaderId, b.isr], [stands[1].id, [stands[1].id]]);
    // Answered once the new leaders were told.
    assert.equal(stands[1].latest(replicated, b.bucketId)!.bucket.leader, stands[1].id);
  }
  await assert.rejects(
    coordinator.controller.controlledShutdown(create(ControlledShutdownRequestSchema, { serverId: stopping.id, serverEpoch: stopping.epoch + 1n })),
    (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT',
  );
});

test('a standby takes over when the active coordinator\'s session closes: it rebuilds from ZooKeeper, re-elects leaders that died meanwhile, and speaks with a higher epoch', async () => {
  const root = zooKeeper.newRoot('cluster');
  const stands = await servers(root, 3);
  const first = candidate(root, 100);
  const active = await first.started;
  const tableId = await active.coordinator.createTable({ database: 'tributary', table: 'orders' }, logTable(3, { 'table.replication.factor': '3' }), false);
  const before = await bucketsOf(active, 'orders');
  const second = candidate(root, 101);
  await second.session;

  await (await first.session).close();
  const standby = await second.started;
  assert.ok(standby.epoch > active.epoch, `epoch ${standby.epoch} after ${active.epoch}`);
  assert.deepEqual((await bucketsOf(standby, 'orders')).map(state), before.map(state), 'the state comes from ZooKeeper');
  await until('every server is told everything again at the new epoch', () =>
    stands.every((s) => before.every((b) => s.latest(tableId, b.bucketId)?.coordinatorEpoch === standby.epoch) && s.metadata.at(-1)?.coordinatorEpoch === standby.epoch),
  );
  assert.equal(stands[0].metadata.at(-1)!.coordinatorServer!.nodeId, 101);
  await active.stop();

  // A leader dies while no coordinator is active: the next one re-elects it as it takes over.
  const victim = stands.find((s) => s.id === before[0].leaderId)!;
  await (await second.session).close();
  await victim.leave();
  const next = await candidate(root, 102).started;
  const [bucket0] = await bucketsOf(next, 'orders');
  assert.notEqual(bucket0.leaderId, victim.id);
  assert.equal(bucket0.leaderEpoch, before[0].leaderEpoch + 1);
  assert.ok(!bucket0.isr.includes(victim.id));
  await standby.stop();
});

test('a coordinator whose session expires stops leading and says so; the standby leads', async () => {
  const root = zooKeeper.newRoot('cluster');
  const stands = await servers(root, 1);
  const proxy = await partitionable(Number(zooKeeper.server.address.split(':')[1]));
  const active = await candidate(root, 100, {}, { address: proxy.address, sessionTimeoutMs: 1_000 }).started;
  const deposed = new Promise<Error>((resolve) => active.once('deposed', resolve));
  const standby = candidate(root, 101);
  await standby.session;

  // Cut off past its session timeout, it is expired by ZooKeeper, and hears so once it reconnects.
  proxy.cut();
  const next = await standby.started;
  assert.ok(next.epoch > active.epoch);
  await until('the tablet server hears from the new coordinator', () => stands[0].metadata.at(-1)?.coordinatorServer?.nodeId === 101);
  proxy.heal();
  assert.match((await deposed).message, /lost its ZooKeeper session/);
  await proxy.close();
});

test('a standby that is told to stop before it leads withdraws from the election', { timeout: 60_000 }, async () => {
  const root = zooKeeper.newRoot('cluster');
  await candidate(root, 100).started;
  const stop = new AbortController();
  const standby = candidate(root, 101, {}, {}, stop.signal);
  const session = await standby.session;
  const election = `${root}/coordinators/election`;
  while ((await session.children(election)).length < 2) await new Promise((resolve) => setTimeout(resolve, 20));

  stop.abort();
  await assert.rejects(standby.started, /resigned/);
  assert.equal((await session.children(election)).length, 1, 'only the active coordinator is left in the election');
});
