/**
 * ReplicaManager: the cluster side of a tablet server (Kafka's and Fluss's ReplicaManager). The
 * coordinator makes each hosted replica leader or follower (NotifyLeaderAndIsr), stops it
 * (StopReplica), tells where the other servers are (UpdateMetadata) and what the lake holds of each
 * bucket (NotifyLakeTableOffset: the retention gate of lake-enabled tables); this server's leaders
 * track their followers, keep the high watermark and propose ISR changes (AdjustIsr); its
 * followers copy their leaders' logs (ReplicaFetcher, one per leader server).
 *
 * Rules:
 * - Every coordinator request carries the coordinator epoch; one older than the newest seen fails
 *   whole with INVALID_COORDINATOR_EXCEPTION, so a deposed coordinator changes nothing.
 * - Per bucket, a leader epoch lower than the replica's is FENCED_LEADER_EPOCH_EXCEPTION; the same
 *   epoch only updates the replica set, the ISR and the table info (ALTER TABLE); a higher one makes
 *   the replica leader or follower. Leadership changes run one request at a time, in arrival order.
 * - A leader's high watermark is the lowest log end over the ISR (LeaderState); it moves when a
 *   follower fetches, when the leader's durable end moves and when the ISR changes.
 * - A new leader keeps its whole log (its epoch starts at its log end); a new follower truncates
 *   the tail the leader does not have before it fetches (ReplicaFetcher).
 * - A new leader answers at once the fetches its followers have waiting here for other buckets, and
 *   keeps their next ones short until they name the new bucket (see announceLeadership): the first
 *   acks=all write it takes then waits for no follower's long poll.
 * - A NotifyLeaderAndIsr marked as the full set (a server joining, a coordinator taking over) names
 *   every replica this server should hold: the others, hosted or left on disk, are of tables or
 *   partitions dropped while no StopReplica could reach it, and are deleted.
 * - Primary-key buckets hold their KvTablet while leader, or while the follower the coordinator
 *   names as the bucket's standby (standby_replicas). A leader that becomes follower closes it and
 *   drops its local state, which may hold changes of a tail the truncation removes; a standby's
 *   holds only changes below the high watermark, which no truncation removes, so it stays warm
 *   across leader changes, and a standby made leader opens it and replays only the tail. Any
 *   other new leader, or a new standby, restores the registered snapshot the coordinator names
 *   (latest_kv_snapshot in NotifyLeaderAndIsr) and replays the changelog after it.
 * - A leader's remote log manifests are committed (CommitRemoteLogManifest) the same way; the
 *   committed one comes with NotifyLeaderAndIsr (a new leader continues from it) and after each
 *   commit with NotifyRemoteLogOffsets (followers' retention deletes below its end too).
 * - The KV snapshots a leader takes are committed to the coordinator (CommitKvSnapshot) with the
 *   bucket's leader epoch and the newest coordinator epoch seen, which fence a deposed leader.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Options } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import type { LakeBucketOffset } from '../../common/lake.js';
import type { Logger } from '../../common/logger.js';
import { partitionSpecFromName } from '../../common/partitions.js';
import { type PartitionInfo, type TableInfo, tableInfoFromJson } from '../../common/schema.js';
import type { RpcConnection } from '../../rpc/connection.js';
import { fromPbLakeOffset } from '../../rpc/lake-offsets.js';
import type * as pb from '../../rpc/gen/tributary_pb.js';
import type { ServerActivity } from '../../common/activity.js';
import { bucketError } from './bucket-responses.js';
import { ClusterTables, type SchemaFetcher } from './table-metadata.js';
import { LeaderState } from './leader-state.js';
import type { WriterStateManager } from './log/writer-state.js';
import { fetcherSettings, type FetcherSettings, ReplicaFetcher } from './replica-fetcher.js';
import { bucketKey, type Replica, type TableBucket } from './replica.js';
import type { KvSnapshotHandle } from '../../common/kv-snapshot.js';
import type { RemoteLogHandle } from '../../common/remote-log.js';

/** A server of the cluster, as UpdateMetadata names it. */
export interface ServerNode {
  nodeId: number;
  host: string;
  port: number;
  rack?: string;
  /** Its advertised Kafka listener, when it speaks the Kafka protocol. */
  kafka?: { host: string; port: number };
}

/** What a tablet server of a cluster is given: its id and its channels to the other servers. */
export interface ClusterMembership {
  serverId: number;
  /** Opens a client connection to another tablet server (a leader of buckets this one follows). */
  connect(node: ServerNode): Promise<RpcConnection>;
  /** Sends an ISR change to the active coordinator. */
  adjustIsr(request: MessageInitShape<typeof pb.AdjustIsrRequestSchema>): Promise<pb.AdjustIsrResponse>;
  /** Reads a schema of a table from the coordinator (GetTableSchema). */
  fetchSchema: SchemaFetcher;
  /** Registers a complete KV snapshot with the active coordinator; rejects with the named error it refused it with. */
  commitKvSnapshot(request: MessageInitShape<typeof pb.CommitKvSnapshotRequestSchema>): Promise<unknown>;
  /** Registers an uploaded remote log manifest with the active coordinator; rejects with the named error it refused it with. */
  commitRemoteLogManifest(request: MessageInitShape<typeof pb.CommitRemoteLogManifestRequestSchema>): Promise<unknown>;
}

/** What the manager uses of the tablet server that hosts the replicas. */
export interface ReplicaHost {
  hosted(bucket: TableBucket): Replica | undefined;
  hostedReplicas(): Iterable<Replica>;
  /** Opens (or creates) the replica's log, replicated, as a follower of no leader at epoch -1. */
  openReplica(table: TableInfo, partition: PartitionInfo | undefined, bucket: number): Promise<Replica>;
  closeReplica(replica: Replica, deleteData: boolean): Promise<void>;
  /** Deletes the local data of replicas not hosted (left from an earlier run) whose bucket `keep` refuses. */
  deleteStrayReplicas(keep: (bucket: TableBucket) => boolean): Promise<void>;
  /** Applies a changed table (options, schema) to the replica. */
  alterReplica(replica: Replica, table: TableInfo): void;
  /** What the lake now holds of the table's hosted buckets: log retention keeps everything above it. */
  lakeOffsetsChanged(table: { tableId: number }, offsets: readonly LakeBucketOffset[]): void;
  /** The bucket's committed remote log: local retention may delete below its end. */
  remoteLogCommitted(bucket: TableBucket, manifest: RemoteLogHandle): void;
  /** The writer state below `offset` the remote log saved (RemoteLogManager.writerStateAt); undefined without one. */
  remoteWriterStateAt(replica: Replica, offset: bigint): Promise<WriterStateManager | undefined>;
  /** Opens the replica's KvTablet as leader or as the bucket's standby. */
  openKv(replica: Replica, role: 'leader' | 'standby'): Promise<void>;
  /** Closes the KvTablet and drops its local state, unless `keepState`. */
  closeKv(replica: Replica, keepState: boolean): Promise<void>;
}

type BucketResult = MessageInitShape<typeof pb.PbBucketResultSchema>;

/** Longest wait of a follower fetch that does not name a bucket just led here which it follows. */
const NEW_LEADERSHIP_POLL_MS = 10;

export class ReplicaManager {
  readonly tables: ClusterTables;
  private coordinatorEpoch = -1;
  private readonly nodes = new Map<number, ServerNode>();
  private coordinatorNode: ServerNode | undefined;
  private readonly fetchers = new Map<number, ReplicaFetcher>();
  /** Leadership changes, one coordinator request at a time. */
  private changes: Promise<unknown> = Promise.resolve();
  /** Told when this server begins or stops leading a bucket (the Kafka listener's group coordinator). */
  private readonly leadershipListeners = new Set<(bucket: TableBucket, leading: boolean) => void>();
  private readonly settings: FetcherSettings;
  private readonly maxLagMs: number;
  private readonly minInSync: number;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Buckets this server began to lead within the last fetch wait, with their followers. */
  private readonly newLeaderships = new Map<string, { followers: number[]; until: number }>();
  /** Follower fetches waiting here for data, by follower id. */
  private readonly waitingFetches = new Set<{ followerId: number; wake: () => void }>();
  /** ISR changes the coordinator accepted, for the node's metrics. */
  isrShrinks = 0;
  isrExpands = 0;

  constructor(
    private readonly host: ReplicaHost,
    private readonly membership: ClusterMembership,
    options: Options,
    private readonly log: Logger,
  ) {
    this.tables = new ClusterTables(membership.fetchSchema);
    this.settings = fetcherSettings(membership.serverId, options);
    this.maxLagMs = options.durationMs('log.replica.max-lag-time');
    this.minInSync = options.int('log.replica.min-in-sync-replicas-number');
  }

  get serverId(): number {
    return this.membership.serverId;
  }

  /** Starts the periodic ISR check: twice per max lag, so a lagging follower leaves within 1.5 times it. */
  start(activity: ServerActivity): void {
    this.timer = activity.every('isr-check', Math.max(1, Math.floor(this.maxLagMs / 2)), () => this.shrinkIsrs(Date.now()));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.changes;
    for (const f of this.fetchers.values()) await f.stop();
    this.fetchers.clear();
    for (const r of this.host.hostedReplicas()) r.leader?.end();
  }

  /** The servers UpdateMetadata named: the active coordinator and the tablet servers. */
  get cluster(): { coordinator?: ServerNode; tabletServers: ServerNode[] } {
    return { ...(this.coordinatorNode ? { coordinator: this.coordinatorNode } : {}), tabletServers: [...this.nodes.values()] };
  }

  // ------------------------------------------------------------------ coordinator requests

  async notifyLeaderAndIsr(req: pb.NotifyLeaderAndIsrRequest): Promise<MessageInitShape<typeof pb.NotifyLeaderAndIsrResponseSchema>> {
    this.fence(req.coordinatorEpoch);
    return this.serialized(async () => {
      const buckets: BucketResult[] = [];
      for (const t of req.tables) {
        const heads = t.buckets.map((b) => ({ tableId: t.tableId, ...(t.partitionId !== undefined ? { partitionId: t.partitionId } : {}), bucketId: b.bucketId }));
        let table: TableInfo;
        let partition: PartitionInfo | undefined;
        try {
          table = tableInfoFromJson(JSON.parse(t.tableJson));
          if (t.partitionId !== undefined) {
            const partitionName = t.partitionName ?? '';
            partition = { partitionId: Number(t.partitionId), partitionName, spec: partitionSpecFromName(table.partitionKeys, partitionName) };
          }
          await this.tables.learn(table, partition);
        } catch (err) {
          buckets.push(...heads.map((h) => ({ ...h, ...bucketError(err) })));
          continue;
        }
        for (const [i, b] of t.buckets.entries()) {
          try {
            await this.applyLeaderAndIsr(table, partition, b);
            buckets.push(heads[i]);
          } catch (err) {
            buckets.push({ ...heads[i], ...bucketError(err) });
          }
        }
      }
      if (req.fullSet) {
        const named = req.tables.flatMap((t) => t.buckets.map((b) => bucketKey(bucketOf(t.tableId, t.partitionId, b.bucketId))));
        await this.dropReplicasOutside(new Set(named));
      }
      return { buckets };
    });
  }

  /**
   * The coordinator named every replica this server should hold (it joined, or a coordinator took
   * over): the others belong to tables or partitions dropped, while this server was away, with no
   * StopReplica reaching it. They stop, and their data is deleted, hosted or only left on disk.
   */
  private async dropReplicasOutside(named: ReadonlySet<string>): Promise<void> {
    for (const replica of [...this.host.hostedReplicas()]) {
      if (named.has(bucketKey(replica.bucket))) continue;
      await this.resign(replica);
      await this.host.closeReplica(replica, true);
      this.log.info({ bucket: bucketKey(replica.bucket) }, 'replica deleted: the coordinator no longer assigns it here');
    }
    await this.host.deleteStrayReplicas((bucket) => named.has(bucketKey(bucket)));
  }

  async stopReplica(req: pb.StopReplicaRequest): Promise<MessageInitShape<typeof pb.StopReplicaResponseSchema>> {
    this.fence(req.coordinatorEpoch);
    return this.serialized(async () => {
      const buckets: BucketResult[] = [];
      for (const b of req.buckets) {
        const head = { tableId: b.tableId, ...(b.partitionId !== undefined ? { partitionId: b.partitionId } : {}), bucketId: b.bucketId };
        try {
          const replica = this.host.hosted(bucketOf(b.tableId, b.partitionId, b.bucketId));
          if (replica) {
            if (b.leaderEpoch < replica.leaderEpoch) throw fenced(replica, b.leaderEpoch);
            await this.resign(replica);
            await this.host.closeReplica(replica, b.delete);
          }
          buckets.push(head);
        } catch (err) {
          buckets.push({ ...head, ...bucketError(err) });
        }
      }
      return { buckets };
    });
  }

  async updateMetadata(req: pb.UpdateMetadataRequest): Promise<MessageInitShape<typeof pb.UpdateMetadataResponseSchema>> {
    this.fence(req.coordinatorEpoch);
    const node = (n: pb.PbServerNode): ServerNode => ({
      nodeId: n.nodeId,
      host: n.host,
      port: n.port,
      ...(n.rack !== undefined ? { rack: n.rack } : {}),
      ...(n.kafkaListener ? { kafka: { host: n.kafkaListener.host, port: n.kafkaListener.port } } : {}),
    });
    if (req.coordinatorServer) this.coordinatorNode = node(req.coordinatorServer);
    this.nodes.clear();
    for (const n of req.tabletServers) this.nodes.set(n.nodeId, node(n));
    return {};
  }

  /** Sets what the lake holds of the hosted replicas of each table named (a replica not hosted yet learns it when it becomes one). */
  async notifyLakeTableOffset(req: pb.NotifyLakeTableOffsetRequest): Promise<MessageInitShape<typeof pb.NotifyLakeTableOffsetResponseSchema>> {
    this.fence(req.coordinatorEpoch);
    // After the leadership changes sent before it, so that the replicas it names exist.
    return this.serialized(async () => {
      for (const t of req.tables) this.host.lakeOffsetsChanged({ tableId: Number(t.tableId) }, t.bucketOffsets.map(fromPbLakeOffset));
      return {};
    });
  }

  /** A bucket's leader committed its remote log (1028): a replica hosted here learns it (one not hosted yet, from NotifyLeaderAndIsr). */
  async notifyRemoteLogOffsets(req: pb.NotifyRemoteLogOffsetsRequest): Promise<MessageInitShape<typeof pb.NotifyRemoteLogOffsetsResponseSchema>> {
    this.fence(req.coordinatorEpoch);
    if (req.manifest) this.host.remoteLogCommitted(bucketOf(req.tableId, req.partitionId, req.bucketId), remoteHandleOf(req.manifest));
    return {};
  }

  /** Where an epoch ends in a log this server leads, for a follower reconciling with it. */
  async offsetForLeaderEpoch(req: pb.OffsetForLeaderEpochRequest): Promise<MessageInitShape<typeof pb.OffsetForLeaderEpochResponseSchema>> {
    return {
      buckets: req.buckets.map((b) => {
        const head = { tableId: b.tableId, ...(b.partitionId !== undefined ? { partitionId: b.partitionId } : {}), bucketId: b.bucketId };
        try {
          const replica = this.hostedOrUnknown(bucketOf(b.tableId, b.partitionId, b.bucketId));
          checkFollowedEpoch(replica, b.currentLeaderEpoch);
          const { epoch, endOffset } = replica.log.endOffsetForEpoch(b.leaderEpoch);
          return { ...head, leaderEpoch: epoch, endOffset };
        } catch (err) {
          return { ...head, leaderEpoch: -1, endOffset: -1n, ...bucketError(err) };
        }
      }),
    };
  }

  // ------------------------------------------------------------------ the leader's side

  /** Commits the remote log manifest of a bucket this server leads, fenced by its leader epoch and the coordinator epoch. */
  async commitRemoteLogManifest(replica: Replica, manifest: RemoteLogHandle): Promise<void> {
    const { tableId, partitionId, bucket } = replica.bucket;
    await this.membership.commitRemoteLogManifest({
      tableId: BigInt(tableId),
      ...(partitionId !== undefined ? { partitionId: BigInt(partitionId) } : {}),
      bucketId: bucket,
      manifest: { manifestPath: manifest.manifestPath, remoteLogStartOffset: manifest.remoteLogStartOffset, remoteLogEndOffset: manifest.remoteLogEndOffset },
      bucketLeaderEpoch: replica.leaderEpoch,
      coordinatorEpoch: this.coordinatorEpoch,
    });
  }

  /** Commits a KV snapshot of a bucket this server leads, fenced by its leader epoch and the coordinator epoch. */
  async commitKvSnapshot(replica: Replica, snapshot: KvSnapshotHandle): Promise<void> {
    const { tableId, partitionId, bucket } = replica.bucket;
    await this.membership.commitKvSnapshot({
      tableId: BigInt(tableId),
      ...(partitionId !== undefined ? { partitionId: BigInt(partitionId) } : {}),
      bucketId: bucket,
      snapshot: { snapshotId: BigInt(snapshot.snapshotId), logOffset: snapshot.logOffset, rowCount: BigInt(snapshot.rowCount), metadataPath: snapshot.metadataPath },
      bucketLeaderEpoch: replica.leaderEpoch,
      coordinatorEpoch: this.coordinatorEpoch,
    });
  }

  /**
   * Takes a follower's fetch of a bucket this server leads: checks the epoch it follows, records
   * its log end (the fetch offset) and moves the high watermark and the ISR as that allows.
   */
  followerFetch(replica: Replica, followerId: number, fetchOffset: bigint, currentLeaderEpoch: number | undefined): void {
    checkFollowedEpoch(replica, currentLeaderEpoch);
    const leader = replica.leader!;
    if (!leader.isFollower(followerId)) {
      throw new TributaryError('UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', `tablet server ${followerId} holds no replica of bucket ${bucketKey(replica.bucket)}`);
    }
    const log = replica.log;
    // An offset past the log end is not a log end this leader can count: the read refuses it.
    if (fetchOffset > log.logEndOffset) return;
    leader.followerFetched(followerId, fetchOffset, log.durableEndOffset, Date.now());
    this.advanceHighWatermark(replica);
    if (leader.canJoin(followerId, replica.isr, log.highWatermark)) void this.proposeIsr(replica, [...replica.isr, followerId]);
  }

  /** Fails an acks=all write before it is appended when the ISR is smaller than the minimum. */
  checkEnoughReplicas(replica: Replica): void {
    if (replica.isr.length < this.minInSync) {
      throw new TributaryError(
        'NOT_ENOUGH_REPLICAS_EXCEPTION',
        `bucket ${bucketKey(replica.bucket)} has ${replica.isr.length} in-sync replica(s), fewer than log.replica.min-in-sync-replicas-number ${this.minInSync}`,
      );
    }
  }

  /** Resolves once the high watermark reaches `offset`; REQUEST_TIME_OUT after `timeoutMs`, NOT_LEADER_OR_FOLLOWER if deposed first. */
  awaitHighWatermark(replica: Replica, offset: bigint, timeoutMs: number): Promise<void> {
    const log = replica.log;
    if (log.highWatermark >= offset) return Promise.resolve();
    const deposed = replica.leader?.deposed;
    if (!deposed || deposed.aborted) return Promise.reject(notLeader(replica));
    return new Promise((resolve, reject) => {
      const done = (err?: TributaryError): void => {
        clearTimeout(timer);
        unsubscribe();
        deposed.removeEventListener('abort', onDeposed);
        if (err) reject(err);
        else resolve();
      };
      const onDeposed = (): void => done(notLeader(replica));
      const unsubscribe = log.onHighWatermark((hw) => {
        if (hw >= offset) done();
      });
      const timer = setTimeout(
        () => done(new TributaryError('REQUEST_TIME_OUT', `the in-sync replicas of bucket ${bucketKey(replica.bucket)} did not all hold offset ${offset - 1n} within ${timeoutMs} ms`)),
        timeoutMs,
      );
      deposed.addEventListener('abort', onDeposed);
    });
  }

  private advanceHighWatermark(replica: Replica): void {
    const leader = replica.leader;
    if (leader) replica.log.advanceHighWatermark(leader.highWatermark(replica.isr, replica.log.durableEndOffset));
  }

  /** Proposes to drop the followers of every led bucket that have lagged for longer than the max lag. */
  shrinkIsrs(nowMs: number): void {
    for (const r of this.host.hostedReplicas()) {
      const lagging = r.leader?.laggingFollowers(r.isr, nowMs, this.maxLagMs) ?? [];
      if (lagging.length > 0) void this.proposeIsr(r, r.isr.filter((id) => !lagging.includes(id)));
    }
  }

  /** Sends an ISR change to the coordinator, one per bucket at a time; a refused one keeps the ISR until NotifyLeaderAndIsr. */
  private async proposeIsr(replica: Replica, newIsr: number[]): Promise<void> {
    const leader = replica.leader;
    if (!leader || leader.isrChangeInFlight || this.stopped) return;
    leader.isrChangeInFlight = true;
    const { tableId, partitionId, bucket } = replica.bucket;
    const key = bucketKey(replica.bucket);
    try {
      const response = await this.membership.adjustIsr({
        serverId: this.serverId,
        buckets: [{ tableId: BigInt(tableId), ...(partitionId !== undefined ? { partitionId: BigInt(partitionId) } : {}), bucketId: bucket, leaderEpoch: replica.leaderEpoch, newIsr, bucketEpoch: replica.bucketEpoch }],
      });
      const answer = response.buckets[0];
      if (replica.leader !== leader) return;
      if (!answer || answer.errorCode !== undefined) {
        this.log.warn({ bucket: key, isr: replica.isr, proposed: newIsr, error: answer?.errorMessage }, 'ISR change refused: the ISR stays until the coordinator says otherwise');
        return;
      }
      // A newer state may have come first (NotifyLeaderAndIsr of a reassignment that this change completed): it stands.
      if (answer.leaderEpoch !== replica.leaderEpoch || answer.bucketEpoch < replica.bucketEpoch) return;
      const grew = answer.isr.length > replica.isr.length;
      this.log.info({ bucket: key, from: replica.isr, to: answer.isr }, grew ? 'ISR expanded' : 'ISR shrunk');
      if (grew) this.isrExpands++;
      else if (answer.isr.length < replica.isr.length) this.isrShrinks++;
      replica.isr = [...answer.isr];
      replica.bucketEpoch = answer.bucketEpoch;
      this.advanceHighWatermark(replica);
    } catch (err) {
      this.log.warn({ err, bucket: key, proposed: newIsr }, 'ISR change not sent: the ISR stays');
    } finally {
      leader.isrChangeInFlight = false;
    }
  }

  // ------------------------------------------------------------------ leadership changes

  private async applyLeaderAndIsr(table: TableInfo, partition: PartitionInfo | undefined, b: pb.PbBucketLeaderAndIsr): Promise<void> {
    const bucket: TableBucket = { tableId: table.tableId, ...(partition ? { partitionId: partition.partitionId } : {}), bucket: b.bucketId };
    const replica = this.host.hosted(bucket) ?? (await this.host.openReplica(table, partition, b.bucketId));
    if (b.leaderEpoch < replica.leaderEpoch) throw fenced(replica, b.leaderEpoch);
    if (table.schemaId > replica.table.schemaId || table.modifiedTime > replica.table.modifiedTime) this.host.alterReplica(replica, table);
    replica.snapshots?.learn(b.latestKvSnapshot && handleOf(b.latestKvSnapshot));
    // The committed remote log, which a new leader continues from and below whose end a follower's retention deletes.
    if (b.remoteLogManifest) this.host.remoteLogCommitted(bucket, remoteHandleOf(b.remoteLogManifest));
    const standby = b.leader !== this.serverId && b.standbyReplicas.includes(this.serverId);
    if (b.leaderEpoch === replica.leaderEpoch) {
      // An older state than the one an AdjustIsr answer brought: nothing to take from it.
      if (b.bucketEpoch < replica.bucketEpoch) return;
      replica.replicas = [...b.replicas];
      replica.isr = [...b.isr];
      replica.bucketEpoch = b.bucketEpoch;
      replica.leader?.setReplicas(b.replicas, Date.now());
      this.advanceHighWatermark(replica);
      if (replica.role === 'follower') await this.standBy(replica, standby);
      return;
    }
    if (b.leader === this.serverId) await this.becomeLeader(replica, b);
    else await this.becomeFollower(replica, b, standby);
  }

  private async becomeLeader(replica: Replica, b: pb.PbBucketLeaderAndIsr): Promise<void> {
    await this.stopFetching(replica);
    replica.leader?.end();
    const leader = new LeaderState(this.serverId, replica.log.logEndOffset, b.replicas, Date.now());
    this.setLeaderAndIsr(replica, b);
    if (replica.table.schema.primaryKey) {
      // A standby's warm state is opened again as the leader's: only the tail above it is replayed.
      if (replica.kv?.standby) await this.host.closeKv(replica, true);
      if (!replica.kv) await this.host.openKv(replica, 'leader');
    }
    replica.leader = leader;
    replica.role = 'leader';
    const unsubscribe = replica.log.onDurableEnd(() => this.advanceHighWatermark(replica));
    leader.deposed.addEventListener('abort', unsubscribe, { once: true });
    this.advanceHighWatermark(replica);
    this.announceLeadership(replica);
    this.log.info({ bucket: bucketKey(replica.bucket), leaderEpoch: b.leaderEpoch, isr: b.isr, logEndOffset: String(replica.log.logEndOffset) }, 'replica became leader');
    for (const listener of this.leadershipListeners) listener(replica.bucket, true);
  }

  /** Calls `listener` whenever this server begins or stops leading a bucket; returns the unsubscribe. */
  onLeadershipChange(listener: (bucket: TableBucket, leading: boolean) => void): () => void {
    this.leadershipListeners.add(listener);
    return () => this.leadershipListeners.delete(listener);
  }

  /**
   * A follower that fetches other buckets from this server long-polls here, and adds a bucket it is
   * told to follow only to its next fetch. So its waiting fetch is answered now, and for one fetch
   * wait its fetches that do not name the bucket yet (its NotifyLeaderAndIsr may come after ours)
   * wait briefly only.
   */
  private announceLeadership(replica: Replica): void {
    const now = Date.now();
    for (const [key, l] of this.newLeaderships) if (l.until <= now) this.newLeaderships.delete(key);
    const followers = replica.replicas.filter((id) => id !== this.serverId);
    this.newLeaderships.set(bucketKey(replica.bucket), { followers, until: now + this.settings.maxWaitMs });
    for (const w of this.waitingFetches) if (followers.includes(w.followerId)) w.wake();
  }

  /** How long a fetch of `followerId` naming `fetched` may wait here for data (see announceLeadership). */
  followerFetchWaitMs(followerId: number, fetched: Iterable<Replica>, waitMs: number): number {
    if (this.newLeaderships.size === 0) return waitMs;
    const now = Date.now();
    const named = new Set([...fetched].map((r) => bucketKey(r.bucket)));
    for (const [key, l] of this.newLeaderships) {
      if (l.until > now && l.followers.includes(followerId) && !named.has(key)) return Math.min(waitMs, NEW_LEADERSHIP_POLL_MS);
    }
    return waitMs;
  }

  /** Calls `wake` when this server begins to lead a bucket `followerId` follows; returns the unsubscribe. */
  onLeadershipFor(followerId: number, wake: () => void): () => void {
    const waiting = { followerId, wake };
    this.waitingFetches.add(waiting);
    return () => this.waitingFetches.delete(waiting);
  }

  private async becomeFollower(replica: Replica, b: pb.PbBucketLeaderAndIsr, standby: boolean): Promise<void> {
    await this.resign(replica, standby);
    this.setLeaderAndIsr(replica, b);
    if (b.leader >= 0) this.fetcherOf(b.leader).add(replica);
    await this.standBy(replica, standby);
    this.log.info({ bucket: bucketKey(replica.bucket), leader: b.leader, leaderEpoch: b.leaderEpoch, standby }, 'replica became follower');
  }

  /** Ends whatever the replica does now: serving as leader (its KV state closes) or fetching; a standby that stays one keeps its state. */
  private async resign(replica: Replica, staysStandby = false): Promise<void> {
    if (replica.role === 'leader') for (const listener of this.leadershipListeners) listener(replica.bucket, false);
    replica.role = 'follower';
    replica.leader?.end();
    replica.leader = undefined;
    if (replica.kv && !(staysStandby && replica.kv.standby)) await this.host.closeKv(replica, false);
    await this.stopFetching(replica);
  }

  /** Opens a follower's warm KV state when it is the bucket's standby, and drops it when it no longer is. */
  private async standBy(replica: Replica, standby: boolean): Promise<void> {
    if (!replica.table.schema.primaryKey) return;
    if (standby && !replica.kv) await this.host.openKv(replica, 'standby');
    else if (!standby && replica.kv) await this.host.closeKv(replica, false);
  }

  private setLeaderAndIsr(replica: Replica, b: pb.PbBucketLeaderAndIsr): void {
    replica.leaderId = b.leader;
    replica.leaderEpoch = b.leaderEpoch;
    replica.replicas = [...b.replicas];
    replica.isr = [...b.isr];
    replica.bucketEpoch = b.bucketEpoch;
  }

  private async stopFetching(replica: Replica): Promise<void> {
    for (const [id, f] of this.fetchers) {
      await f.remove(replica);
      if (f.size === 0) {
        this.fetchers.delete(id);
        await f.stop();
      }
    }
  }

  private fetcherOf(leaderId: number): ReplicaFetcher {
    let f = this.fetchers.get(leaderId);
    if (!f) {
      const connect = (): Promise<RpcConnection> => {
        const node = this.nodes.get(leaderId);
        if (!node) return Promise.reject(new TributaryError('NETWORK_EXCEPTION', `no address of tablet server ${leaderId} yet (UpdateMetadata)`));
        return this.membership.connect(node);
      };
      f = new ReplicaFetcher(leaderId, this.settings, connect, (r, offset) => this.host.remoteWriterStateAt(r, offset), this.log.child({ fetcher: leaderId }));
      this.fetchers.set(leaderId, f);
    }
    return f;
  }

  // ------------------------------------------------------------------ internals

  private fence(epoch: number): void {
    if (epoch < this.coordinatorEpoch) {
      throw new TributaryError('INVALID_COORDINATOR_EXCEPTION', `coordinator epoch ${epoch} is older than ${this.coordinatorEpoch}, the newest this server has seen`);
    }
    this.coordinatorEpoch = epoch;
  }

  private serialized<T>(work: () => Promise<T>): Promise<T> {
    const run = this.changes.then(work);
    this.changes = run.catch(() => undefined);
    return run;
  }

  private hostedOrUnknown(bucket: TableBucket): Replica {
    const replica = this.host.hosted(bucket);
    if (!replica) throw new TributaryError('UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', `bucket ${bucketKey(bucket)} has no replica on this server`);
    return replica;
  }
}

/** A follower's request names the leader epoch it follows: it must be this leader's. */
function checkFollowedEpoch(replica: Replica, epoch: number | undefined): void {
  if (replica.role !== 'leader') throw notLeader(replica);
  if (epoch === undefined || epoch === replica.leaderEpoch) return;
  if (epoch < replica.leaderEpoch) throw fenced(replica, epoch);
  throw new TributaryError('NOT_LEADER_OR_FOLLOWER', `bucket ${bucketKey(replica.bucket)}: leader epoch ${epoch} is newer than this leader's ${replica.leaderEpoch}`);
}

export function notLeader(replica: Replica): TributaryError {
  return new TributaryError('NOT_LEADER_OR_FOLLOWER', `this server does not lead bucket ${bucketKey(replica.bucket)}: its leader is server ${replica.leaderId} (epoch ${replica.leaderEpoch})`);
}

function fenced(replica: Replica, epoch: number): TributaryError {
  return new TributaryError('FENCED_LEADER_EPOCH_EXCEPTION', `bucket ${bucketKey(replica.bucket)}: leader epoch ${epoch} is older than the replica's ${replica.leaderEpoch}`);
}

function handleOf(h: pb.PbKvSnapshotHandle): KvSnapshotHandle {
  return { snapshotId: Number(h.snapshotId), logOffset: h.logOffset, rowCount: Number(h.rowCount), metadataPath: h.metadataPath };
}

function remoteHandleOf(h: pb.PbRemoteLogManifestHandle): RemoteLogHandle {
  return { manifestPath: h.manifestPath, remoteLogStartOffset: h.remoteLogStartOffset, remoteLogEndOffset: h.remoteLogEndOffset };
}

function bucketOf(tableId: bigint, partitionId: bigint | undefined, bucket: number): TableBucket {
  return { tableId: Number(tableId), ...(partitionId !== undefined ? { partitionId: Number(partitionId) } : {}), bucket };
}
