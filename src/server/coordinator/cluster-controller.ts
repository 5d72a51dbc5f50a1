/**
 * The active coordinator's control of a cluster's replicas: where each bucket's replicas are, who
 * leads it and who is in its ISR, and telling tablet servers. It is the Coordinator's BucketLifecycle
 * and BucketPlacement in a cluster (the one-process node uses its TabletServer instead) and the
 * ClusterView GetMetadata answers from.
 *
 * Everything it changes goes through one event queue, one event at a time (Fluss's
 * CoordinatorEventProcessor): a table's or partition's buckets created, altered or dropped, a
 * tablet server joining or leaving, AdjustIsr and ControlledShutdown from a leader, the periodic
 * retry of offline buckets. An event commits its changes to the MetadataStore before it sends any
 * request, so a coordinator that takes over finds in ZooKeeper everything its predecessor told.
 *
 * Store layout (MetadataStore paths, so only the active coordinator writes them, fenced by its epoch):
 *
 *   /assignments/<tableId>                          {version: 1, buckets: number[][]}: the replica ids of
 *                                                   each bucket of a non-partitioned table, first replica
 *                                                   (the preferred leader) first
 *   /assignments/<tableId>/p<partitionId>           the same, per partition of a partitioned table
 *   /leader_isr/<tableId>/<partitionId|->/<bucket>  {version: 1, leader, leader_epoch, isr,
 *                                                   coordinator_epoch, bucket_epoch, standby_replicas};
 *                                                   leader -1 while the bucket is offline
 *
 * A new table's or partition's assignment and initial leader_isr (leader = first replica, ISR = all
 * replicas, epochs 0) are committed with its registration (placeBuckets). Requests to tablet servers:
 * UpdateMetadata (the coordinator and every live tablet server) to every live server on each change
 * of membership, always before the NotifyLeaderAndIsr it may need to find a leader;
 * NotifyLeaderAndIsr, one request per server holding all of its buckets that changed, with the
 * table's JSON so it can create a replica it does not have; StopReplica (delete) on drops;
 * NotifyLakeTableOffset after each lake snapshot and after each NotifyLeaderAndIsr
 * (lake-offset-notices.ts). A new coordinator sends all of it again, with its own epoch, before
 * anything else. A joining server, and every live server when a coordinator takes over, gets its
 * NotifyLeaderAndIsr marked as the full set of its replicas (also when it has none): it deletes
 * the local replicas it does not name, of tables and partitions dropped while it was away.
 *
 * Leadership (leader-election.ts): a dead leader hands over to the next live ISR member; a dead
 * follower leaves the ISR (so does a server that restarted before this coordinator saw it go: its
 * disk may be empty now); a bucket with no live ISR member is offline until one comes back (looked
 * at whenever a server joins and every coordinator.offline-leader.retry-delay). A server in
 * controlled shutdown neither leads nor stays in an ISR where another replica can take over.
 * Primary-key buckets with table.kv.standby-replica.enabled keep a standby among their followers,
 * chosen again with every change of leader or ISR, and told with NotifyLeaderAndIsr; a new leader
 * is told the bucket's newest registered KV snapshot there too. That message is the tablet
 * server's one source for it, rather than a read of ZooKeeper: the handles stay the coordinator's
 * to read and write, and since commits are checked in this event queue, in order with leader
 * changes, the message that makes a leader names every snapshot committed before it.
 *
 * KV snapshot commits (kv-snapshot-registry.ts) are fenced here (BucketFence): run in the event
 * queue once the leader epoch is checked against the bucket's.
 */
import { randomUUID } from 'node:crypto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Options } from '../../common/config.js';
import { ErrorCodes, TributaryError } from '../../common/errors.js';
import type { LakeBucketOffset } from '../../common/lake.js';
import type { Logger } from '../../common/logger.js';
import { type PartitionInfo, type TableInfo, tableInfoToJson } from '../../common/schema.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import type { RebalanceGoal, ServerTag } from '../../rpc/cluster-admin.js';
import type {
  AdjustIsrRequest,
  AdjustIsrResponseSchema,
  ControlledShutdownRequest,
  PbAdjustIsrRespForBucketSchema,
  PbBucketMetadataSchema,
  PbLeaderAndIsrForTableSchema,
  PbServerNodeSchema,
  PbStopReplicaForBucketSchema,
} from '../../rpc/gen/tributary_pb.js';
import { tableOption } from '../../common/config.js';
import type { KvSnapshotHandle } from '../../common/kv-snapshot.js';
import type { RemoteLogHandle } from '../../common/remote-log.js';
import type { MetadataOp, MetadataStore } from '../metadata/metadata-store.js';
import { type LiveTabletServers, registrationEpoch, type TabletServerNode } from '../metadata/tablet-server-registry.js';
import type { ClusterView } from './coordinator-service.js';
import type { BucketLifecycle, BucketPlacement, PartitionEntry } from './coordinator.js';
import { type BucketFence, fencedLeader, type SnapshotBucket } from './kv-snapshot-registry.js';
import { LakeOffsetNotices } from './lake-offset-notices.js';
import { chooseStandby, type LeaderAndIsr, nextLeaderAndIsr, NO_LEADER, sameReplicas } from './leader-election.js';
import { completedState, ledBy, movingReplicas, revertedState } from './reassignment.js';
import { planRebalance, type PlanServer } from './rebalance-planner.js';
import {
  finishedStatus,
  moveOf,
  movesReplicas,
  REBALANCE_PATH,
  SERVER_TAGS_PATH,
  type StoredRebalance,
  type StoredRebalanceBucket,
  type StoredServerTags,
} from './rebalance-task.js';
import { assignReplicas, checkReplicationFactor, replicationFactorOf } from './replica-assignment.js';
import { TabletServerChannels } from './tablet-server-channels.js';

type ServerNode = MessageInitShape<typeof PbServerNodeSchema>;
type StopReplicaForBucket = MessageInitShape<typeof PbStopReplicaForBucketSchema>;

/** The cluster's replicas at a glance, for the coordinator's metrics. */
export interface ClusterHealth {
  tabletServers: number;
  offlineBuckets: number;
  underReplicatedBuckets: number;
  isrShrinks: number;
  isrExpands: number;
  /** Buckets of the running rebalance whose replicas are moving now. */
  bucketsMoving: number;
}
type TableLeaderAndIsr = MessageInitShape<typeof PbLeaderAndIsrForTableSchema>;

/** The buckets of one non-partitioned table or of one partition. */
interface BucketGroup {
  tableId: number;
  partitionId?: number;
}

interface BucketRef {
  group: BucketGroup;
  bucket: number;
}

interface StoredAssignment {
  version: 1;
  buckets: number[][];
}

interface StoredLeaderAndIsr {
  version: 1;
  leader: number;
  leader_epoch: number;
  isr: number[];
  coordinator_epoch: number;
  bucket_epoch: number;
  /** Absent in states written before standbys: none. */
  standby_replicas?: number[];
}

/** Leader_isr writes per store commit: a ZooKeeper request stays far below its 1 MB limit. */
const STATES_PER_COMMIT = 500;

const groupKey = (g: BucketGroup): string => `${g.tableId}/${g.partitionId ?? '-'}`;
const assignmentPath = (g: BucketGroup): string => (g.partitionId === undefined ? `/assignments/${g.tableId}` : `/assignments/${g.tableId}/p${g.partitionId}`);
const leaderIsrDir = (g: BucketGroup): string => `/leader_isr/${g.tableId}/${g.partitionId ?? '-'}`;
const leaderIsrPath = (g: BucketGroup, bucket: number): string => `${leaderIsrDir(g)}/${bucket}`;
const bucketRefOf = (b: { table_id: number; partition_id?: number; bucket: number }): BucketRef => ({
  group: { tableId: b.table_id, ...(b.partition_id !== undefined ? { partitionId: b.partition_id } : {}) },
  bucket: b.bucket,
});
const groupOf = (table: TableInfo, partition?: PartitionInfo): BucketGroup => ({ tableId: table.tableId, ...(partition ? { partitionId: partition.partitionId } : {}) });

function toStored(s: LeaderAndIsr): StoredLeaderAndIsr {
  return { version: 1, leader: s.leader, leader_epoch: s.leaderEpoch, isr: s.isr, coordinator_epoch: s.coordinatorEpoch, bucket_epoch: s.bucketEpoch, standby_replicas: s.standbyReplicas };
}

function append<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const values = map.get(key);
  if (values) values.push(value);
  else map.set(key, [value]);
}

/** StopReplica (delete) of `ref` for each of `replicas`, at the bucket's leader epoch. */
function addStops(stops: Map<number, StopReplicaForBucket[]>, ref: BucketRef, replicas: readonly number[], leaderEpoch: number): void {
  const { group, bucket } = ref;
  for (const id of replicas) {
    append(stops, id, { tableId: BigInt(group.tableId), ...(group.partitionId !== undefined ? { partitionId: BigInt(group.partitionId) } : {}), bucketId: bucket, leaderEpoch, delete: true });
  }
}
const hasStandby = (table: TableInfo): boolean => table.schema.primaryKey !== undefined && tableOption(table.properties, 'table.kv.standby-replica.enabled')?.toLowerCase() === 'true';

const serverNode = (s: TabletServerNode): ServerNode => ({
  nodeId: s.id,
  host: s.host,
  port: s.port,
  ...(s.rack !== undefined ? { rack: s.rack } : {}),
  ...(s.kafka !== undefined ? { kafkaListener: s.kafka } : {}),
});

export interface ClusterControllerSettings {
  store: MetadataStore;
  servers: LiveTabletServers;
  coordinatorEpoch: number;
  /** This coordinator as tablet servers and clients reach it. */
  self: ServerNode;
  /** The coordinator's tables and partitions, for the table JSON the tablet servers get. */
  tables: { getTableInfoById(tableId: number): TableInfo | undefined; partitionById(partitionId: number): PartitionEntry | undefined };
  /** The registered KV snapshots, whose newest a bucket's new leader is told. */
  kvSnapshots: { latest(bucket: SnapshotBucket): KvSnapshotHandle | undefined };
  /** The committed remote logs, which a bucket's new leader continues from and its followers delete below. */
  remoteLogs: { latest(bucket: SnapshotBucket): RemoteLogHandle | undefined };
  options: Options;
  log: Logger;
}

export class ClusterController implements BucketLifecycle, BucketPlacement, ClusterView, BucketFence {
  private events: Promise<unknown> = Promise.resolve();
  /** Servers in controlled shutdown: until they leave (or register again) they lead nothing they can hand over. */
  private readonly stopping = new Set<number>();
  private isrShrinks = 0;
  private isrExpands = 0;
  /** Tables and partitions whose buckets are being created: the Coordinator does not show them yet. */
  private readonly creating = new Map<string, { table: TableInfo; partition?: PartitionInfo }>();
  private readonly channels: TabletServerChannels;
  private readonly lakeOffsets = new LakeOffsetNotices();
  private retryTimer?: NodeJS.Timeout;
  private readonly onJoined = (server: TabletServerNode): void => void this.background('tablet server joined', () => this.serverJoined(server));
  private readonly onLeft = (id: number): void => void this.background('tablet server left', () => this.serverLeft(id));

  constructor(private readonly settings: ClusterControllerSettings) {
    this.channels = new TabletServerChannels(settings.coordinatorEpoch, (id) => settings.servers.get(id), settings.log);
  }

  private get store(): MetadataStore {
    return this.settings.store;
  }

  /**
   * Takes control: drops what belongs to tables and partitions that are gone, re-elects the leaders
   * that died while no coordinator was active, and tells every live server everything, with this
   * coordinator's epoch; then follows membership and retries offline buckets.
   */
  async start(): Promise<void> {
    const { servers, options } = this.settings;
    servers.on('joined', this.onJoined);
    servers.on('left', this.onLeft);
    await this.enqueue(async () => {
      const orphans = this.allGroups().filter((g) => !this.describe(g));
      const stops = orphans.length > 0 ? await this.removeGroups(orphans) : [];
      await this.reelect(this.allBuckets());
      const everyServer = this.settings.servers.list().map((s) => s.id);
      void Promise.all([...stops, ...this.updateMetadata(), ...this.notify(this.withFullSets(this.toReplicas(this.allBuckets()), everyServer), new Set(everyServer))]);
      void Promise.all(await this.advanceRebalance());
    });
    const every = options.durationMs('coordinator.offline-leader.retry-delay');
    this.retryTimer = setInterval(() => void this.background('offline leader retry', () => this.retryOffline()), every);
    this.retryTimer.unref();
  }

  /** Stops following membership and drops the requests not delivered yet. */
  async stop(): Promise<void> {
    clearInterval(this.retryTimer);
    this.settings.servers.off('joined', this.onJoined);
    this.settings.servers.off('left', this.onLeft);
    await this.events.catch(() => undefined);
    await this.channels.close();
  }

  // ------------------------------------------------------------------ BucketPlacement

  placeBuckets(table: TableInfo, partition?: PartitionInfo): MetadataOp[] {
    const tags = this.serverTagMap();
    const live = this.settings.servers.list().filter((s) => !this.stopping.has(s.id) && tags.get(s.id) !== 'PERMANENT_OFFLINE');
    const factor = replicationFactorOf(table, this.settings.options);
    if (table.partitionKeys.length > 0 && !partition) {
      checkReplicationFactor(factor, live.length);
      return [];
    }
    const group = groupOf(table, partition);
    const replicas = assignReplicas(live, table.bucketCount, factor, group.partitionId ?? group.tableId);
    const withStandby = hasStandby(table);
    return [
      { op: 'put', path: assignmentPath(group), value: { version: 1, buckets: replicas } satisfies StoredAssignment },
      ...replicas.map((r, bucket): MetadataOp => ({
        op: 'put',
        path: leaderIsrPath(group, bucket),
        value: toStored({
          leader: r[0],
          leaderEpoch: 0,
          isr: r,
          coordinatorEpoch: this.settings.coordinatorEpoch,
          bucketEpoch: 0,
          standbyReplicas: withStandby ? chooseStandby(r, r, r[0], [], () => true) : [],
        }),
      })),
    ];
  }

  // ------------------------------------------------------------------ BucketLifecycle

  /** Tells every replica of the new buckets its role; resolves once the live ones have answered. */
  async createBuckets(table: TableInfo, partition?: PartitionInfo): Promise<void> {
    const group = groupOf(table, partition);
    const deliveries = await this.enqueue(async () => {
      this.creating.set(groupKey(group), { table, ...(partition ? { partition } : {}) });
      try {
        const refs = this.bucketsOf(group);
        await this.reelect(refs); // a replica may have died since the placement
        return this.notify(this.toReplicas(refs));
      } finally {
        this.creating.delete(groupKey(group));
      }
    });
    await Promise.all(deliveries);
  }

  /** Stops and deletes the replicas, then forgets their assignment and leader_isr. */
  async dropBuckets(table: TableInfo, partition?: PartitionInfo): Promise<void> {
    const deliveries = await this.enqueue(() => {
      if (!partition) this.lakeOffsets.drop(table.tableId);
      return this.removeGroups(partition ? [groupOf(table, partition)] : this.groupsOfTable(table.tableId));
    });
    await Promise.all(deliveries);
  }

  /** Sends the new table JSON to every replica, at the same epochs. */
  tableAltered(table: TableInfo): void {
    void this.background('table altered', async () => {
      void Promise.all(this.notify(this.toReplicas(this.groupsOfTable(table.tableId).flatMap((g) => this.bucketsOf(g)))));
    });
  }

  /** Tells every live replica of the table's buckets what the lake now holds of them (their retention gate). */
  lakeOffsetsChanged(table: TableInfo, offsets: readonly LakeBucketOffset[]): void {
    void this.background('lake offsets changed', async () => {
      this.lakeOffsets.set(table.tableId, offsets);
      void Promise.all(this.notifyLakeOffsets(this.toReplicas(this.groupsOfTable(table.tableId).flatMap((g) => this.bucketsOf(g)))));
    });
  }

  // ------------------------------------------------------------------ requests from tablet servers

  /**
   * A leader's ISR change: applied per bucket whose leader epoch and bucket epoch match the stored
   * state (else FENCED_LEADER_EPOCH_EXCEPTION / INVALID_UPDATE_VERSION_EXCEPTION) and whose new ISR
   * holds the leader and only its replicas, adding none that is dead or shutting down (else
   * INVALID_ARGUMENT); the accepted ones are committed together, and every bucket is answered with
   * its state after.
   */
  adjustIsr(request: AdjustIsrRequest): Promise<MessageInitShape<typeof AdjustIsrResponseSchema>> {
    return this.enqueue(async () => {
      const answers: MessageInitShape<typeof PbAdjustIsrRespForBucketSchema>[] = [];
      const accepted: { ref: BucketRef; state: LeaderAndIsr }[] = [];
      const standbyMoved: BucketRef[] = [];
      for (const b of request.buckets) {
        const group: BucketGroup = { tableId: Number(b.tableId), ...(b.partitionId !== undefined ? { partitionId: Number(b.partitionId) } : {}) };
        const ids = { tableId: b.tableId, ...(b.partitionId !== undefined ? { partitionId: b.partitionId } : {}), bucketId: b.bucketId };
        const replicas = this.assignment(group)?.[b.bucketId];
        const state = replicas && this.leaderAndIsr({ group, bucket: b.bucketId });
        const refuse = (name: keyof typeof ErrorCodes, message: string): void => {
          answers.push({ ...ids, errorCode: ErrorCodes[name], errorMessage: message, ...(state ? this.stateFields(state) : {}) });
        };
        const where = `bucket ${b.bucketId} of ${groupKey(group)}`;
        if (!replicas || !state) refuse('UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', `${where} does not exist`);
        else if (state.leader !== request.serverId || state.leaderEpoch !== b.leaderEpoch) {
          refuse('FENCED_LEADER_EPOCH_EXCEPTION', `server ${request.serverId} at leader epoch ${b.leaderEpoch} does not lead ${where}: server ${state.leader} does, at leader epoch ${state.leaderEpoch}`);
        } else if (state.bucketEpoch !== b.bucketEpoch) {
          refuse('INVALID_UPDATE_VERSION_EXCEPTION', `${where} is at bucket epoch ${state.bucketEpoch}, not ${b.bucketEpoch}`);
        } else if (!b.newIsr.includes(state.leader) || b.newIsr.some((id) => !replicas.includes(id)) || new Set(b.newIsr).size !== b.newIsr.length) {
          refuse('INVALID_ARGUMENT', `ISR [${b.newIsr}] of ${where} must hold its leader ${state.leader} and only its replicas [${replicas}], each once`);
        } else if (b.newIsr.some((id) => !state.isr.includes(id) && !this.eligible(id))) {
          refuse('INVALID_ARGUMENT', `ISR [${b.newIsr}] of ${where} adds a server that is not live or is shutting down`);
        } else {
          const isr = [...b.newIsr];
          const standbyReplicas = this.standbyOf(group) ? chooseStandby(replicas, isr, state.leader, state.standbyReplicas, (id) => this.eligible(id)) : [];
          const next = { ...state, isr, coordinatorEpoch: this.settings.coordinatorEpoch, bucketEpoch: state.bucketEpoch + 1, standbyReplicas };
          if (next.isr.length < state.isr.length) this.isrShrinks++;
          else if (next.isr.length > state.isr.length) this.isrExpands++;
          answers.push({ ...ids, ...this.stateFields(next) });
          accepted.push({ ref: { group, bucket: b.bucketId }, state: next });
          if (!sameReplicas(standbyReplicas, state.standbyReplicas)) standbyMoved.push({ group, bucket: b.bucketId });
        }
      }
      await this.commitStates(accepted);
      // A new replica in sync may complete its bucket's move.
      if (accepted.length > 0) void Promise.all(await this.advanceRebalance());
      // The replicas learn a new standby; the leader learns its ISR from the answer.
      if (standbyMoved.length > 0) void Promise.all(this.notify(this.toReplicas(standbyMoved)));
      return { buckets: answers };
    });
  }

  /**
   * A tablet server about to stop: every bucket it leads moves to another ISR member, it leaves the
   * ISRs that have another member, and the new leaders are told; answers how many buckets it still
   * leads (no other replica has caught up). Refused for a server that is not registered under that
   * epoch (a restarted server asking on behalf of its old self).
   */
  async controlledShutdown(request: ControlledShutdownRequest): Promise<{ remainingLeaders: number }> {
    const { remaining, deliveries } = await this.enqueue(async () => {
      const server = this.settings.servers.get(request.serverId);
      if (!server || registrationEpoch(server.session) !== request.serverEpoch) {
        throw new TributaryError('INVALID_ARGUMENT', `tablet server ${request.serverId} is not registered with epoch ${request.serverEpoch}`);
      }
      this.stopping.add(request.serverId);
      const changed = await this.reelect(this.allBuckets());
      const leads = this.allBuckets().filter((ref) => this.leaderAndIsr(ref)!.leader === request.serverId).length;
      return { remaining: leads, deliveries: this.notify(this.toReplicas(changed)) };
    });
    await Promise.all(deliveries);
    this.settings.log.info({ server: request.serverId, remainingLeaders: remaining }, 'controlled shutdown: leaderships moved');
    return { remainingLeaders: remaining };
  }

  // ------------------------------------------------------------------ BucketFence (KV snapshot commits)

  get coordinatorEpoch(): number {
    return this.settings.coordinatorEpoch;
  }

  /** Runs a KV snapshot commit of `bucket` in the event queue, once `leaderEpoch` is checked to be its leader's. */
  whileLeading<T>(bucket: SnapshotBucket, leaderEpoch: number, work: () => Promise<T>): Promise<T> {
    return this.enqueue(async () => {
      const group: BucketGroup = { tableId: bucket.tableId, ...(bucket.partitionId !== undefined ? { partitionId: bucket.partitionId } : {}) };
      const state = this.leaderAndIsr({ group, bucket: bucket.bucket });
      if (!state) throw new TributaryError('UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', `bucket ${bucket.bucket} of ${groupKey(group)} does not exist`);
      if (state.leader === NO_LEADER || leaderEpoch !== state.leaderEpoch) throw fencedLeader(bucket, leaderEpoch, state.leaderEpoch);
      return work();
    });
  }

  /** A bucket's leader committed its remote log: its other live replicas learn it (NotifyRemoteLogOffsets). */
  remoteLogCommitted(bucket: SnapshotBucket, manifest: RemoteLogHandle): void {
    const group: BucketGroup = { tableId: bucket.tableId, ...(bucket.partitionId !== undefined ? { partitionId: bucket.partitionId } : {}) };
    const state = this.leaderAndIsr({ group, bucket: bucket.bucket });
    for (const id of this.assignment(group)?.[bucket.bucket] ?? []) {
      if (id === state?.leader || !this.settings.servers.isLive(id)) continue;
      void this.channels
        .send(id, ApiKeys.NotifyRemoteLogOffsets, {
          tableId: BigInt(bucket.tableId),
          ...(bucket.partitionId !== undefined ? { partitionId: BigInt(bucket.partitionId) } : {}),
          bucketId: bucket.bucket,
          manifest: { manifestPath: manifest.manifestPath, remoteLogStartOffset: manifest.remoteLogStartOffset, remoteLogEndOffset: manifest.remoteLogEndOffset },
        })
        .catch((err: unknown) => this.settings.log.warn({ err, server: id }, 'NotifyRemoteLogOffsets not delivered'));
    }
  }

  // ------------------------------------------------------------------ ClusterView

  /** Live tablet servers, buckets without a leader and with fewer in the ISR than replicas, and the ISR changes leaders asked for since this coordinator leads. */
  health(): ClusterHealth {
    let offlineBuckets = 0;
    let underReplicatedBuckets = 0;
    const moving = this.movingBuckets();
    for (const ref of this.allBuckets()) {
      const state = this.leaderAndIsr(ref);
      // A moving bucket counts the replicas it is to have: the ones being added are not in sync yet.
      const replicas = moving.get(`${groupKey(ref.group)}/${ref.bucket}`)?.new_replicas ?? this.assignment(ref.group)?.[ref.bucket] ?? [];
      if (!state || state.leader === NO_LEADER) offlineBuckets++;
      if (!state || replicas.some((id) => !state.isr.includes(id))) underReplicatedBuckets++;
    }
    return { tabletServers: this.settings.servers.list().length, offlineBuckets, underReplicatedBuckets, isrShrinks: this.isrShrinks, isrExpands: this.isrExpands, bucketsMoving: moving.size };
  }

  tabletServers(): ServerNode[] {
    return this.settings.servers.list().map(serverNode);
  }

  bucketMetadata(table: TableInfo, partitionId?: number): MessageInitShape<typeof PbBucketMetadataSchema>[] {
    const group: BucketGroup = { tableId: table.tableId, ...(partitionId !== undefined ? { partitionId } : {}) };
    const replicas = this.assignment(group) ?? [];
    return replicas.map((r, bucket) => {
      const state = this.leaderAndIsr({ group, bucket });
      return { bucketId: bucket, leaderId: state?.leader ?? NO_LEADER, leaderEpoch: state?.leaderEpoch ?? 0, replicaId: r, isr: state?.isr ?? [] };
    });
  }

  // ------------------------------------------------------------------ membership

  private async serverJoined(server: TabletServerNode): Promise<void> {
    this.stopping.delete(server.id);
    const changed = await this.reelect(this.allBuckets());
    // It learns all of its replicas (those that changed among them), as they are now: as follower or as leader.
    const targets = this.withFullSets(this.toReplicas(changed), [server.id]);
    this.settings.log.info({ server: server.id, host: server.host, port: server.port, leadersChanged: changed.length }, 'tablet server joined');
    void Promise.all([...this.updateMetadata(), ...this.notify(targets, new Set([server.id]))]);
    void Promise.all(await this.advanceRebalance());
  }

  private async serverLeft(id: number): Promise<void> {
    this.stopping.delete(id);
    // Gone here even when it is registered again by now (a restart whose two events came together,
    // as Kafka's bounced broker): its process and perhaps its disk are new, so it leaves every ISR
    // and leadership, and rejoins an ISR only once its leader finds it caught up.
    const changed = await this.reelect(this.allBuckets(), id);
    const offline = changed.filter((ref) => this.leaderAndIsr(ref)!.leader === NO_LEADER).length;
    this.settings.log.info({ server: id, bucketsChanged: changed.length, offline }, 'tablet server left');
    void Promise.all([...this.updateMetadata(), ...this.notify(this.toReplicas(changed))]);
    // A move to the server that left fails and goes back.
    void Promise.all(await this.advanceRebalance());
  }

  /**
   * Elects a leader for the offline buckets that can have one; it also catches every change an
   * earlier event could not commit (ZooKeeper unreachable for a moment), since it looks at all buckets.
   */
  private async retryOffline(): Promise<void> {
    const changed = await this.reelect(this.allBuckets());
    if (changed.length > 0) this.settings.log.info({ buckets: changed.length }, 'buckets re-elected on the periodic look');
    void Promise.all(this.notify(this.toReplicas(changed)));
    void Promise.all(await this.advanceRebalance());
  }

  /** Whether the group's buckets keep a standby: a primary-key table with table.kv.standby-replica.enabled. */
  private standbyOf(group: BucketGroup): boolean {
    const table = this.describe(group)?.table;
    return table !== undefined && hasStandby(table);
  }

  private eligible(id: number): boolean {
    return this.settings.servers.isLive(id) && !this.stopping.has(id);
  }

  // ------------------------------------------------------------------ state

  /**
   * Moves each bucket to its next leader and ISR where that changes, committed; returns the ones
   * that changed. `left`: a server that left, counted as gone whatever the live list says now.
   */
  private async reelect(refs: BucketRef[], left?: number): Promise<BucketRef[]> {
    const { servers, coordinatorEpoch } = this.settings;
    const live = (id: number): boolean => id !== left && servers.isLive(id);
    const eligible = (id: number): boolean => id !== left && this.eligible(id);
    const changes: { ref: BucketRef; state: LeaderAndIsr }[] = [];
    for (const ref of refs) {
      const next = nextLeaderAndIsr(this.leaderAndIsr(ref)!, this.assignment(ref.group)![ref.bucket], eligible, live, coordinatorEpoch, this.standbyOf(ref.group));
      if (next) changes.push({ ref, state: next });
    }
    await this.commitStates(changes);
    return changes.map((c) => c.ref);
  }

  private async commitStates(changes: { ref: BucketRef; state: LeaderAndIsr }[]): Promise<void> {
    for (let i = 0; i < changes.length; i += STATES_PER_COMMIT) {
      await this.store.commit(changes.slice(i, i + STATES_PER_COMMIT).map(({ ref, state }) => ({ op: 'put', path: leaderIsrPath(ref.group, ref.bucket), value: toStored(state) })));
    }
  }

  /** Removes the groups from the store, then sends StopReplica (delete) to their live replicas. */
  private async removeGroups(groups: BucketGroup[]): Promise<Promise<unknown>[]> {
    const stops = new Map<number, StopReplicaForBucket[]>();
    const ops: MetadataOp[] = [];
    for (const group of groups) {
      for (const ref of this.bucketsOf(group)) addStops(stops, ref, this.assignment(group)![ref.bucket], this.leaderAndIsr(ref)?.leaderEpoch ?? 0);
      ops.push({ op: 'delete', path: assignmentPath(group), recursive: true });
      ops.push({ op: 'delete', path: leaderIsrDir(group), recursive: true });
    }
    await this.store.commit(ops);
    return this.sendStops(stops);
  }

  /** StopReplica (delete) to each server, of its buckets. */
  private sendStops(stops: Map<number, StopReplicaForBucket[]>): Promise<unknown>[] {
    return [...stops].map(([id, buckets]) => this.channels.send(id, ApiKeys.StopReplica, { buckets }));
  }

  private assignment(group: BucketGroup): number[][] | undefined {
    return this.store.get<StoredAssignment>(assignmentPath(group))?.buckets;
  }

  private leaderAndIsr(ref: BucketRef): LeaderAndIsr | undefined {
    const s = this.store.get<StoredLeaderAndIsr>(leaderIsrPath(ref.group, ref.bucket));
    return s && { leader: s.leader, leaderEpoch: s.leader_epoch, isr: s.isr, coordinatorEpoch: s.coordinator_epoch, bucketEpoch: s.bucket_epoch, standbyReplicas: s.standby_replicas ?? [] };
  }

  private stateFields(s: LeaderAndIsr): { leader: number; leaderEpoch: number; isr: number[]; bucketEpoch: number } {
    return { leader: s.leader, leaderEpoch: s.leaderEpoch, isr: s.isr, bucketEpoch: s.bucketEpoch };
  }

  private allGroups(): BucketGroup[] {
    return this.store.children('/assignments').flatMap((t) => this.groupsOfTable(Number(t)));
  }

  private groupsOfTable(tableId: number): BucketGroup[] {
    const own = this.store.get(`/assignments/${tableId}`) !== undefined ? [{ tableId }] : [];
    const partitions = this.store
      .children(`/assignments/${tableId}`)
      .filter((name) => name.startsWith('p'))
      .map((name) => ({ tableId, partitionId: Number(name.slice(1)) }));
    return [...own, ...partitions];
  }

  private bucketsOf(group: BucketGroup): BucketRef[] {
    return (this.assignment(group) ?? []).map((_, bucket) => ({ group, bucket }));
  }

  private allBuckets(): BucketRef[] {
    return this.allGroups().flatMap((g) => this.bucketsOf(g));
  }

  /** The table (and partition name) of a group; undefined for one whose table or partition is gone. */
  private describe(group: BucketGroup): { table: TableInfo; partitionName?: string } | undefined {
    const creating = this.creating.get(groupKey(group));
    if (creating) return { table: creating.table, ...(creating.partition ? { partitionName: creating.partition.partitionName } : {}) };
    let table: TableInfo | undefined;
    try {
      table = this.settings.tables.getTableInfoById(group.tableId);
    } catch (err) {
      // A table registered whose buckets are not created yet (its createBuckets event tells them), or
      // one whose drop is committed and whose dropBuckets event is on its way.
      if (err instanceof TributaryError && (err.errorName === 'TABLE_NOT_EXIST' || err.errorName === 'DATABASE_NOT_EXIST')) return undefined;
      throw err;
    }
    if (!table) return undefined;
    if (group.partitionId === undefined) return { table };
    const partition = this.settings.tables.partitionById(group.partitionId);
    return partition && partition.tableId === group.tableId ? { table, partitionName: partition.partitionName } : undefined;
  }

  // ------------------------------------------------------------------ requests

  /** Every live replica of each bucket, as targets of NotifyLeaderAndIsr. */
  private toReplicas(refs: BucketRef[]): Map<number, BucketRef[]> {
    const targets = new Map<number, BucketRef[]>();
    for (const ref of refs) for (const id of this.assignment(ref.group)![ref.bucket]) append(targets, id, ref);
    return targets;
  }

  /** `targets` with each of `ids` given every bucket assigned to it, none included. */
  private withFullSets(targets: Map<number, BucketRef[]>, ids: readonly number[]): Map<number, BucketRef[]> {
    for (const id of ids) targets.set(id, this.allBuckets().filter((ref) => this.assignment(ref.group)![ref.bucket].includes(id)));
    return targets;
  }

  /**
   * One NotifyLeaderAndIsr per live server, with the current state of its buckets grouped by table
   * and partition; to the servers of `fullSets` marked as the full set, also when it is empty (the
   * server deletes the replicas it does not name).
   */
  private notify(targets: Map<number, BucketRef[]>, fullSets: ReadonlySet<number> = new Set()): Promise<unknown>[] {
    const deliveries: Promise<unknown>[] = [];
    for (const [id, refs] of targets) {
      if (!this.settings.servers.isLive(id)) continue;
      const byGroup = new Map<string, BucketRef[]>();
      for (const ref of refs) append(byGroup, groupKey(ref.group), ref);
      const tables = [...byGroup.values()].flatMap((group) => this.leaderAndIsrOfGroup(group) ?? []);
      const fullSet = fullSets.has(id);
      if (tables.length === 0 && !fullSet) continue;
      deliveries.push(
        this.channels.send(id, ApiKeys.NotifyLeaderAndIsr, { tables, fullSet }).then((response) => {
          const failed = response?.buckets.filter((b) => b.errorCode !== undefined && b.errorCode !== 0) ?? [];
          if (failed.length === 0) return;
          const some = failed.slice(0, 10).map((b) => ({ table: b.tableId, partition: b.partitionId, bucket: b.bucketId, error: b.errorMessage }));
          this.settings.log.warn({ server: id, failed: failed.length, some }, 'a tablet server could not take some of its replicas');
        }),
      );
    }
    // Replicas it may not have had before learn what the lake holds of them, right after they exist.
    return [...deliveries, ...this.notifyLakeOffsets(targets)];
  }

  /** One NotifyLakeTableOffset per live server whose buckets the lake holds some of. */
  private notifyLakeOffsets(targets: Map<number, BucketRef[]>): Promise<unknown>[] {
    const deliveries: Promise<unknown>[] = [];
    for (const [id, refs] of targets) {
      if (!this.settings.servers.isLive(id)) continue;
      const tables = this.lakeOffsets.tablesOf(refs.map((r) => ({ ...r.group, bucket: r.bucket })));
      if (tables.length > 0) deliveries.push(this.channels.send(id, ApiKeys.NotifyLakeTableOffset, { tables }));
    }
    return deliveries;
  }

  /** The NotifyLeaderAndIsr entry of buckets of one group; undefined when its table or partition is gone. */
  private leaderAndIsrOfGroup(refs: BucketRef[]): TableLeaderAndIsr | undefined {
    const { group } = refs[0];
    const described = this.describe(group);
    if (!described) return undefined;
    return {
      tableId: BigInt(group.tableId),
      tableJson: JSON.stringify(tableInfoToJson(described.table)),
      ...(group.partitionId !== undefined ? { partitionId: BigInt(group.partitionId), partitionName: described.partitionName } : {}),
      buckets: refs.map((ref) => {
        const state = this.leaderAndIsr(ref)!;
        const latest = this.settings.kvSnapshots.latest({ ...group, bucket: ref.bucket });
        const remote = this.settings.remoteLogs.latest({ ...group, bucket: ref.bucket });
        return {
          bucketId: ref.bucket,
          replicas: this.assignment(group)![ref.bucket],
          ...this.stateFields(state),
          standbyReplicas: state.standbyReplicas,
          ...(latest ? { latestKvSnapshot: { snapshotId: BigInt(latest.snapshotId), logOffset: latest.logOffset, rowCount: BigInt(latest.rowCount), metadataPath: latest.metadataPath } } : {}),
          ...(remote ? { remoteLogManifest: { manifestPath: remote.manifestPath, remoteLogStartOffset: remote.remoteLogStartOffset, remoteLogEndOffset: remote.remoteLogEndOffset } } : {}),
        };
      }),
    };
  }

  /** UpdateMetadata to every live server: this coordinator and every live tablet server. */
  private updateMetadata(): Promise<unknown>[] {
    const tabletServers = this.tabletServers();
    return this.settings.servers.list().map((s) => this.channels.send(s.id, ApiKeys.UpdateMetadata, { coordinatorServer: this.settings.self, tabletServers }));
  }

  // ------------------------------------------------------------------ server tags and rebalance

  /** The tagged servers, by id. */
  serverTags(): { serverId: number; serverTag: ServerTag }[] {
    return [...this.serverTagMap()].map(([serverId, serverTag]) => ({ serverId, serverTag }));
  }

  /**
   * Tags servers (Fluss's AddServerTag): a server that is neither registered nor holds a replica is
   * SERVER_NOT_EXIST_EXCEPTION, one with another tag SEVER_TAG_ALREADY_EXIST_EXCEPTION; the same tag
   * again changes nothing. A tag moves nothing by itself: the next rebalance honours it.
   */
  addServerTag(ids: readonly number[], tag: ServerTag): Promise<void> {
    return this.enqueue(async () => {
      const tags = this.serverTagMap();
      const known = new Set([...this.settings.servers.list().map((s) => s.id), ...this.allBuckets().flatMap((ref) => this.assignment(ref.group)![ref.bucket])]);
      for (const id of ids) {
        if (!known.has(id)) throw new TributaryError('SERVER_NOT_EXIST_EXCEPTION', `tablet server ${id} is not registered and holds no replica`);
        const own = tags.get(id);
        if (own !== undefined && own !== tag) throw new TributaryError('SEVER_TAG_ALREADY_EXIST_EXCEPTION', `tablet server ${id} is tagged ${own}: remove that tag first`);
        tags.set(id, tag);
      }
      await this.commitServerTags(tags);
      this.settings.log.info({ servers: ids, tag }, 'server tag added');
    });
  }

  /** Takes a tag off servers; SEVER_TAG_NOT_EXIST_EXCEPTION for a server that does not carry it. */
  removeServerTag(ids: readonly number[], tag: ServerTag): Promise<void> {
    return this.enqueue(async () => {
      const tags = this.serverTagMap();
      for (const id of ids) {
        if (tags.get(id) !== tag) throw new TributaryError('SEVER_TAG_NOT_EXIST_EXCEPTION', `tablet server ${id} is not tagged ${tag}`);
        tags.delete(id);
      }
      await this.commitServerTags(tags);
      this.settings.log.info({ servers: ids, tag }, 'server tag removed');
    });
  }

  /**
   * Plans a rebalance for `goals` (rebalance-planner.ts) and starts it; answers its id once the plan
   * and its first moves are committed. REBALANCE_FAILURE_EXCEPTION while another one runs or when
   * the plan cannot be made (a drain with nowhere to go). A plan with nothing to do is COMPLETED at once.
   */
  async rebalance(goals: readonly RebalanceGoal[]): Promise<string> {
    const { id, deliveries } = await this.enqueue(async () => {
      const running = this.store.get<StoredRebalance>(REBALANCE_PATH);
      if (running?.status === 'REBALANCING') throw new TributaryError('REBALANCE_FAILURE_EXCEPTION', `rebalance ${running.id} is still running: wait for it or cancel it`);
      const tags = this.serverTagMap();
      const servers = new Map<number, PlanServer>();
      for (const s of this.settings.servers.list()) servers.set(s.id, { id: s.id, ...(s.rack !== undefined ? { rack: s.rack } : {}), live: !this.stopping.has(s.id) });
      const refs = this.allBuckets().filter((ref) => this.describe(ref.group));
      const buckets = refs.map((ref) => {
        const state = this.leaderAndIsr(ref)!;
        for (const id of this.assignment(ref.group)![ref.bucket]) if (!servers.has(id)) servers.set(id, { id, live: false });
        return { ref, replicas: this.assignment(ref.group)![ref.bucket], leader: state.leader, isr: state.isr };
      });
      for (const [id, tag] of tags) {
        const s = servers.get(id);
        if (s) s.tag = tag;
      }
      const plan = planRebalance(buckets, [...servers.values()], goals);
      const task: StoredRebalance = {
        version: 1,
        id: randomUUID(),
        status: plan.length > 0 ? 'REBALANCING' : 'COMPLETED',
        goals: [...goals],
        created_time: Date.now(),
        ...(plan.length > 0 ? {} : { finished_time: Date.now() }),
        buckets: plan.map(({ bucket, replicas, leader }) => ({
          table_id: bucket.ref.group.tableId,
          ...(bucket.ref.group.partitionId !== undefined ? { partition_id: bucket.ref.group.partitionId } : {}),
          bucket: bucket.ref.bucket,
          original_replicas: [...bucket.replicas],
          new_replicas: replicas,
          original_leader: bucket.leader,
          new_leader: leader,
          status: 'NOT_STARTED',
        })),
      };
      await this.store.commit([{ op: 'put', path: REBALANCE_PATH, value: task }]);
      this.settings.log.info({ rebalance: task.id, goals, buckets: plan.length, moves: task.buckets.filter(movesReplicas).length }, 'rebalance planned');
      return { id: task.id, deliveries: await this.advanceRebalance() };
    });
    void Promise.all(deliveries);
    return id;
  }

  /** The task `id` (the latest one when undefined); NO_REBALANCE_IN_PROGRESS_EXCEPTION when there is none such. */
  rebalanceProgress(id?: string): StoredRebalance {
    const task = this.store.get<StoredRebalance>(REBALANCE_PATH);
    if (!task || (id !== undefined && task.id !== id)) throw new TributaryError('NO_REBALANCE_IN_PROGRESS_EXCEPTION', id === undefined ? 'no rebalance has been started' : `no rebalance ${id}: the latest is ${task?.id ?? 'none'}`);
    return task;
  }

  /**
   * Cancels the running task (`id`, if given, must be it): moves in flight go back to their
   * original replicas, buckets not started are CANCELED; done ones stay done.
   */
  async cancelRebalance(id?: string): Promise<void> {
    const deliveries = await this.enqueue(async () => {
      const task = this.rebalanceProgress(id);
      if (task.status !== 'REBALANCING') throw new TributaryError('NO_REBALANCE_IN_PROGRESS_EXCEPTION', `rebalance ${task.id} is ${task.status}, not running`);
      const step = this.rebalanceStep(task);
      for (const b of step.buckets) {
        if (b.status === 'NOT_STARTED' || (b.status === 'REBALANCING' && !movesReplicas(b))) b.status = 'CANCELED';
        else if (b.status === 'REBALANCING' && step.revert(b)) b.status = 'CANCELED';
      }
      // A move whose origin can no longer lead (none of it live and in sync) completes instead.
      const finished = finishedStatus(step.buckets);
      if (finished) step.finish(finished);
      this.settings.log.info({ rebalance: task.id }, 'rebalance cancelled');
      return step.commit();
    });
    void Promise.all(deliveries);
  }

  /** The running task's buckets, by bucket, of those whose replicas are moving now. */
  private movingBuckets(): Map<string, StoredRebalanceBucket> {
    const task = this.store.get<StoredRebalance>(REBALANCE_PATH);
    const moving = new Map<string, StoredRebalanceBucket>();
    if (task?.status !== 'REBALANCING') return moving;
    for (const b of task.buckets) if (b.status === 'REBALANCING' && movesReplicas(b)) moving.set(`${groupKey(bucketRefOf(b).group)}/${b.bucket}`, b);
    return moving;
  }

  /**
   * Carries the running task on: starts buckets while fewer than coordinator.rebalance.max-concurrent-moves
   * move (leadership moves at once), completes moves whose new replicas are in sync, and fails a
   * move to a server that is gone (taking it back); committed before anything is sent, then
   * answers the requests. Runs on every event that may let a move on.
   */
  private async advanceRebalance(): Promise<Promise<unknown>[]> {
    const deliveries: Promise<unknown>[] = [];
    const maxMoves = this.settings.options.int('coordinator.rebalance.max-concurrent-moves');
    const isLive = (id: number): boolean => this.settings.servers.isLive(id);
    for (let progressed = true; progressed; ) {
      const task = this.store.get<StoredRebalance>(REBALANCE_PATH);
      if (task?.status !== 'REBALANCING') break;
      const step = this.rebalanceStep(task);
      let moving = step.buckets.filter((b) => b.status === 'REBALANCING' && movesReplicas(b)).length;
      let leaderships = 0;
      const start = (): void => {
        for (const b of step.buckets) {
          if (b.status !== 'NOT_STARTED') continue;
          const moves = movesReplicas(b);
          if (moves ? moving >= maxMoves : leaderships >= STATES_PER_COMMIT) continue;
          if (step.start(b)) {
            if (moves) moving++;
            else leaderships++;
          }
        }
      };
      start();
      for (const b of step.buckets) {
        if (b.status !== 'REBALANCING' || !step.exists(b)) continue;
        const ref = bucketRefOf(b);
        const state = this.leaderAndIsr(ref)!;
        if (!movesReplicas(b)) {
          const next = ledBy(state, b.new_leader, isLive, this.settings.coordinatorEpoch, this.standbyOf(ref.group));
          if (!next) step.fail(b, `server ${b.new_leader} cannot lead it: not live or not in the ISR [${state.isr}]`);
          else {
            if (next !== state) step.set(ref, undefined, next);
            b.status = 'COMPLETED';
          }
          continue;
        }
        const gone = b.new_replicas.filter((id) => !isLive(id));
        if (gone.length > 0) {
          if (step.revert(b)) step.fail(b, `server(s) [${gone}] of its new replicas are not live: it stays on [${b.original_replicas}]`);
          continue;
        }
        const done = completedState(state, moveOf(b), isLive, this.settings.coordinatorEpoch, this.standbyOf(ref.group));
        if (!done) continue;
        step.set(ref, b.new_replicas, done);
        step.stop(ref, b.original_replicas.filter((id) => !b.new_replicas.includes(id)), done.leaderEpoch);
        b.status = 'COMPLETED';
        moving--;
      }
      start();
      const finished = finishedStatus(step.buckets);
      if (finished) step.finish(finished);
      progressed = step.changed && leaderships > 0;
      deliveries.push(...(await step.commit()));
      if (finished) this.settings.log.info({ rebalance: task.id, status: finished }, 'rebalance finished');
    }
    return deliveries;
  }

  /**
   * One change of a rebalance task and of the buckets it moves: collects new assignments, leader
   * and ISR states and replicas to stop, then commits them with the task in one store commit and
   * tells the servers.
   */
  private rebalanceStep(task: StoredRebalance) {
    const { coordinatorEpoch, servers } = this.settings;
    const isLive = (id: number): boolean => servers.isLive(id);
    const next: StoredRebalance = { ...task, buckets: task.buckets.map((b) => ({ ...b })) };
    const before = JSON.stringify(task);
    const assignments = new Map<string, { group: BucketGroup; buckets: number[][] }>();
    const states: { ref: BucketRef; state: LeaderAndIsr }[] = [];
    const stops = new Map<number, StopReplicaForBucket[]>();
    const told: BucketRef[] = [];
    const current = (group: BucketGroup): number[][] | undefined => assignments.get(groupKey(group))?.buckets ?? this.assignment(group);
    const step = {
      buckets: next.buckets,
      get changed(): boolean {
        return JSON.stringify(next) !== before;
      },
      /** Whether the bucket's table or partition is still there; FAILED when it is not. */
      exists: (b: StoredRebalanceBucket): boolean => {
        const { group } = bucketRefOf(b);
        if (current(group) && this.describe(group)) return true;
        step.fail(b, 'its table or partition was dropped');
        return false;
      },
      /** A bucket's new replicas (undefined: as they are) and leader and ISR, told to its replicas. */
      set: (ref: BucketRef, replicas: readonly number[] | undefined, state: LeaderAndIsr | undefined): void => {
        if (replicas) {
          const key = groupKey(ref.group);
          const entry = assignments.get(key) ?? { group: ref.group, buckets: this.assignment(ref.group)!.map((r) => [...r]) };
          entry.buckets[ref.bucket] = [...replicas];
          assignments.set(key, entry);
        }
        if (state) states.push({ ref, state });
        told.push(ref);
      },
      stop: (ref: BucketRef, replicas: readonly number[], leaderEpoch: number): void => addStops(stops, ref, replicas, leaderEpoch),
      fail: (b: StoredRebalanceBucket, error: string): void => {
        b.status = 'FAILED';
        b.error = error;
        this.settings.log.warn({ rebalance: task.id, table: b.table_id, partition: b.partition_id, bucket: b.bucket, error }, 'rebalance of a bucket failed');
      },
      /** Starts a bucket whose replicas are still as planned: a move adds its new replicas. */
      start: (b: StoredRebalanceBucket): boolean => {
        if (!step.exists(b)) return false;
        const ref = bucketRefOf(b);
        const now = current(ref.group)![ref.bucket];
        if (!sameReplicas(now, b.original_replicas)) {
          step.fail(b, `its replicas changed to [${now}] since the plan`);
          return false;
        }
        b.status = 'REBALANCING';
        if (movesReplicas(b)) step.set(ref, movingReplicas(moveOf(b)), undefined);
        return true;
      },
      /** Takes a move back to its original replicas; false when none of them can lead now (the move carries on). */
      revert: (b: StoredRebalanceBucket): boolean => {
        const ref = bucketRefOf(b);
        const back = revertedState(this.leaderAndIsr(ref)!, moveOf(b), isLive, coordinatorEpoch, this.standbyOf(ref.group));
        if (!back) return false;
        step.set(ref, b.original_replicas, back);
        step.stop(ref, b.new_replicas.filter((id) => !b.original_replicas.includes(id)), back.leaderEpoch);
        return true;
      },
      finish: (status: StoredRebalance['status']): void => {
        next.status = status;
        next.finished_time = Date.now();
      },
      commit: async (): Promise<Promise<unknown>[]> => {
        if (!step.changed) return [];
        const ops: MetadataOp[] = [
          ...[...assignments.values()].map(({ group, buckets }): MetadataOp => ({ op: 'put', path: assignmentPath(group), value: { version: 1, buckets } satisfies StoredAssignment })),
          ...states.map(({ ref, state }): MetadataOp => ({ op: 'put', path: leaderIsrPath(ref.group, ref.bucket), value: toStored(state) })),
          { op: 'put', path: REBALANCE_PATH, value: next },
        ];
        await this.store.commit(ops);
        return [...this.notify(this.toReplicas(told)), ...this.sendStops(stops)];
      },
    };
    return step;
  }

  private serverTagMap(): Map<number, ServerTag> {
    const stored = this.store.get<StoredServerTags>(SERVER_TAGS_PATH);
    return new Map(Object.entries(stored?.tags ?? {}).map(([id, tag]) => [Number(id), tag]));
  }

  private async commitServerTags(tags: Map<number, ServerTag>): Promise<void> {
    const value: StoredServerTags = { version: 1, tags: Object.fromEntries([...tags].sort(([a], [b]) => a - b).map(([id, tag]) => [String(id), tag])) };
    await this.store.commit([tags.size > 0 ? { op: 'put', path: SERVER_TAGS_PATH, value } : { op: 'delete', path: SERVER_TAGS_PATH }]);
  }

  // ------------------------------------------------------------------ event queue

  private enqueue<T>(task: () => Promise<T>): Promise<T> {
    const run = this.events.then(task, task);
    this.events = run.catch(() => undefined);
    return run;
  }

  /** An event nobody waits for: a failure is logged (a fenced commit means another coordinator took over). */
  private background(what: string, task: () => Promise<void>): Promise<void> {
    return this.enqueue(task).catch((err: unknown) => this.settings.log.error({ err }, `cluster event failed: ${what}`));
  }
}
