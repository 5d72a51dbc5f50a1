/**
 * The group coordinator of a Kafka listener: the consumer groups this server coordinates, their
 * membership (group.ts) and their committed offsets (offset-store.ts, cached here).
 *
 * Placement: a group is coordinated by the leader of the bucket of the offsets table that holds
 * its offsets (`coordinatorOf`), the one function FindCoordinator and every group request ask. On
 * one node that is the node; on a cluster it is the tablet server leading that bucket, and a
 * request that reaches another server gets NOT_COORDINATOR, so clients look the coordinator up
 * again. The coordinator reads the committed offsets of an offsets bucket when it first serves a
 * group of it as that bucket's leader (a group request waits for the read), and drops the groups
 * of a bucket it stops leading: on a cluster the tablet server says so when a leadership moves
 * (`leadershipChanged`), and a request that finds the bucket led elsewhere drops them too. So after
 * the leader of an offsets bucket is killed, its groups carry on at the new leader from their
 * committed offsets. The offsets table is opened on first use, and again after a failure (a tablet
 * server's listener may start while no coordinator is active).
 *
 * Limits (named errors, mapped onto Kafka's codes in error-codes.ts):
 *   kafka.group.max-groups              a new group beyond it: GROUP_MAX_NUM_EXCEPTION
 *   kafka.group.max-members             a new member beyond it: GROUP_MAX_SIZE_REACHED
 *   kafka.group.max-metadata-size       a member's protocol metadata or an assignment: GROUP_METADATA_TOO_LARGE
 *   kafka.group.offset-metadata.max-bytes   a commit's metadata string: OFFSET_METADATA_TOO_LARGE
 * Static membership (group.instance.id) is not supported: such a JoinGroup gets UNSUPPORTED_VERSION,
 * as a Kafka broker that does not support it answers.
 */
import { TributaryError } from '../../common/errors.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import type { KafkaBrokerNode, TributaryBackend } from '../backend.js';
import { KafkaErrors, kafkaErrorOf, type KafkaErrorName } from '../protocol/error-codes.js';
import { type FindCoordinatorRequest, type FindCoordinatorResponse, KEY_TYPE_GROUP } from '../protocol/apis/find-coordinator.js';
import type { JoinGroupRequest, JoinGroupResponse } from '../protocol/apis/join-group.js';
import type { SyncGroupRequest, SyncGroupResponse } from '../protocol/apis/sync-group.js';
import type { HeartbeatRequest, HeartbeatResponse } from '../protocol/apis/heartbeat.js';
import type { LeaveGroupRequest, LeaveGroupResponse } from '../protocol/apis/leave-group.js';
import type { OffsetCommitRequest, OffsetCommitResponse } from '../protocol/apis/offset-commit.js';
import type { OffsetFetchPartition, OffsetFetchRequest, OffsetFetchResponse } from '../protocol/apis/offset-fetch.js';
import type { ListGroupsRequest, ListGroupsResponse } from '../protocol/apis/list-groups.js';
import type { DescribeGroupsRequest, DescribeGroupsResponse } from '../protocol/apis/describe-groups.js';
import { ConsumerGroup, type GroupLimits, type GroupState, type GroupTimers } from './group.js';
import { type CommittedOffset, OffsetStore, OFFSETS_TABLE } from './offset-store.js';

export interface GroupCoordinatorOptions extends GroupLimits {
  database: string;
  offsetsBuckets: number;
  maxGroups: number;
  maxOffsetMetadataBytes: number;
  /** This server's id. */
  nodeId: number;
  /** The Kafka listeners of the servers, by server id. */
  brokers: () => KafkaBrokerNode[];
  /** The number of partitions of a topic; throws TABLE_NOT_EXIST for an unknown one. */
  partitionsOf: (topic: string) => Promise<number>;
  timers?: GroupTimers;
}

/** Who a request comes from, for DescribeGroups. */
export interface ClientContext {
  clientId: string | null;
  clientHost: string;
}

/** What SHOW CONSUMER GROUPS and the metrics show of a group. */
export interface GroupSummary {
  group: string;
  state: GroupState;
  members: number;
  protocolType: string;
  protocol: string;
  /** Committed offsets by topic, then partition. */
  offsets: Map<string, Map<number, bigint>>;
}

/** A group with its lag per topic it committed offsets of. */
export interface GroupLag {
  group: string;
  state: GroupState;
  members: number;
  protocolType: string;
  protocol: string;
  /** Per topic: partitions with a committed offset, and the sum of their log end minus committed (those whose log end is known). */
  topics: { topic: string; partitions: number; lag: bigint }[];
}

interface Entry {
  group: ConsumerGroup;
  offsets: Map<string, Map<number, CommittedOffset>>;
  /** Commits of a group are written one after the other, so the cache follows the store's order. */
  writes: Promise<unknown>;
}

const REAL_TIMERS: GroupTimers = {
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    t.unref();
    return () => clearTimeout(t);
  },
};

const code = (name: KafkaErrorName): number => KafkaErrors[name];

/** The Kafka code of anything a group request throws. */
function codeOf(err: unknown): number {
  return err instanceof TributaryError ? code(kafkaErrorOf(err.errorName)) : KafkaErrors.UNKNOWN_SERVER_ERROR;
}

export class GroupCoordinator {
  private readonly groups = new Map<string, Entry>();
  private readonly store: OffsetStore;
  private readonly timers: GroupTimers;
  private opening?: Promise<void>;
  /** Offsets buckets whose committed offsets are read (or being read) into `groups`, as their leader. */
  private readonly loaded = new Map<number, Promise<void>>();

  constructor(
    private readonly backend: TributaryBackend,
    private readonly options: GroupCoordinatorOptions,
  ) {
    this.store = new OffsetStore(backend, options.database, options.offsetsBuckets);
    this.timers = options.timers ?? REAL_TIMERS;
  }

  /**
   * Opens the offsets table (creating it when missing) and reads the offsets of the buckets this
   * server leads, once; again after a failure.
   */
  start(): Promise<void> {
    this.opening ??= (async () => {
      await this.store.open();
      const leading = (await this.offsetsBuckets()).filter((b) => b.leaderId === this.options.nodeId);
      await Promise.all(leading.map((b) => this.loadBucket(b.bucketId)));
    })().catch((err: unknown) => {
      this.opening = undefined;
      throw err;
    });
    return this.opening;
  }

  /** Ends the groups, once the offsets being read are read: the tablets close after this, and a read must not outlive its KV. */
  async close(): Promise<void> {
    const loading = [...this.loaded.values()];
    for (const e of this.groups.values()) e.group.close();
    this.groups.clear();
    this.loaded.clear();
    await Promise.allSettled(loading);
  }

  /**
   * This server began or stopped leading a bucket of table `tableId`: for an offsets bucket, its
   * groups are dropped, and read again from the table when it leads the bucket now.
   */
  leadershipChanged(tableId: number, bucket: number, leading: boolean): void {
    if (this.store.tableId !== tableId) return;
    this.forgetBucket(bucket);
    if (leading) void this.loadBucket(bucket).catch(() => undefined);
  }

  /** Drops the groups of an offsets bucket and what was read of it. */
  private forgetBucket(bucket: number): void {
    this.loaded.delete(bucket);
    for (const [id, e] of this.groups) {
      if (this.store.bucketOf(id) !== bucket) continue;
      e.group.close();
      this.groups.delete(id);
    }
  }

  /** Reads the committed offsets of an offsets bucket this server leads into its groups, once. */
  private loadBucket(bucket: number): Promise<void> {
    let loading = this.loaded.get(bucket);
    if (!loading) {
      loading = this.store.load([bucket]).then((byGroup) => {
        if (this.loaded.get(bucket) !== loading) return; // dropped meanwhile
        for (const [groupId, entries] of byGroup) {
          const entry = this.groups.get(groupId) ?? this.newEntry(groupId);
          for (const e of entries) offsetsOf(entry, e.topic).set(e.partition, e.committed);
        }
      });
      this.loaded.set(bucket, loading);
      loading.catch(() => {
        if (this.loaded.get(bucket) === loading) this.loaded.delete(bucket);
      });
    }
    return loading;
  }

  // ------------------------------------------------------------------ placement

  private async offsetsBuckets(): Promise<{ bucketId: number; leaderId: number }[]> {
    const resp = await this.backend.call(ApiKeys.GetMetadata, { tablePath: [{ databaseName: this.options.database, tableName: OFFSETS_TABLE }] });
    return resp.tableMetadata[0]?.bucketMetadata ?? [];
  }

  /** The broker that coordinates a group: the leader of its offsets bucket. */
  async coordinatorOf(groupId: string): Promise<KafkaBrokerNode> {
    await this.start();
    const bucket = this.store.bucketOf(groupId);
    const leader = (await this.offsetsBuckets()).find((b) => b.bucketId === bucket)?.leaderId ?? -1;
    const node = this.options.brokers().find((b) => b.nodeId === leader);
    if (!node) throw new TributaryError('NOT_LEADER_OR_FOLLOWER', `bucket ${bucket} of ${OFFSETS_TABLE}, which holds group '${groupId}', has no leader with a Kafka listener`);
    return node;
  }

  /** NONE when this server coordinates the group, else the error its requests get. */
  private async placement(groupId: string): Promise<KafkaErrorName> {
    if (groupId === '') return 'INVALID_GROUP_ID';
    try {
      if ((await this.coordinatorOf(groupId)).nodeId === this.options.nodeId) {
        await this.loadBucket(this.store.bucketOf(groupId));
        return 'NONE';
      }
    } catch {
      return 'COORDINATOR_NOT_AVAILABLE';
    }
    // Moved away: forget what this server held of the bucket; its new coordinator reads the offsets.
    this.forgetBucket(this.store.bucketOf(groupId));
    return 'NOT_COORDINATOR';
  }

  async findCoordinator(req: FindCoordinatorRequest): Promise<FindCoordinatorResponse> {
    const none = { throttleTimeMs: 0, nodeId: -1, host: '', port: -1 };
    if (req.keyType !== KEY_TYPE_GROUP) return { ...none, errorCode: KafkaErrors.INVALID_REQUEST, errorMessage: 'transactions are not supported: only group coordinators' };
    if (req.key === '') return { ...none, errorCode: KafkaErrors.INVALID_GROUP_ID, errorMessage: 'the group id is empty' };
    try {
      const node = await this.coordinatorOf(req.key);
      return { throttleTimeMs: 0, errorCode: 0, errorMessage: null, nodeId: node.nodeId, host: node.host, port: node.port };
    } catch (err) {
      return { ...none, errorCode: KafkaErrors.COORDINATOR_NOT_AVAILABLE, errorMessage: err instanceof Error ? err.message : String(err) };
    }
  }

  // ------------------------------------------------------------------ groups

  private newEntry(groupId: string): Entry {
    const entry: Entry = { group: new ConsumerGroup(groupId, this.options, this.timers), offsets: new Map(), writes: Promise.resolve() };
    this.groups.set(groupId, entry);
    return entry;
  }

  /** The group's entry, made when missing (within kafka.group.max-groups). */
  private entry(groupId: string): Entry {
    const found = this.groups.get(groupId);
    if (found) return found;
    if (this.groups.size >= this.options.maxGroups) {
      // Groups with neither members nor offsets hold nothing: they make room first.
      for (const [id, e] of this.groups) if (isVacant(e)) this.groups.delete(id);
      if (this.groups.size >= this.options.maxGroups) {
        throw new TributaryError('GROUP_MAX_NUM_EXCEPTION', `this server coordinates ${this.groups.size} consumer groups, as many as kafka.group.max-groups allows`);
      }
    }
    return this.newEntry(groupId);
  }

  async joinGroup(req: JoinGroupRequest, client: ClientContext): Promise<JoinGroupResponse> {
    const failed = (errorCode: number): JoinGroupResponse => ({ throttleTimeMs: 0, errorCode, generationId: -1, protocolName: '', leader: '', memberId: req.memberId, members: [] });
    const placed = await this.placement(req.groupId);
    if (placed !== 'NONE') return failed(code(placed));
    if (req.groupInstanceId !== null) return failed(KafkaErrors.UNSUPPORTED_VERSION);
    try {
      const r = await this.entry(req.groupId).group.join({ ...req, clientId: client.clientId ?? '', clientHost: client.clientHost });
      return { throttleTimeMs: 0, ...r, errorCode: code(r.errorCode), members: r.members.map((m) => ({ ...m, groupInstanceId: null })) };
    } catch (err) {
      return failed(codeOf(err));
    }
  }

  async syncGroup(req: SyncGroupRequest): Promise<SyncGroupResponse> {
    const failed = (errorCode: number): SyncGroupResponse => ({ throttleTimeMs: 0, errorCode, assignment: Buffer.alloc(0) });
    const placed = await this.placement(req.groupId);
    if (placed !== 'NONE') return failed(code(placed));
    const entry = this.groups.get(req.groupId);
    if (!entry) return failed(KafkaErrors.UNKNOWN_MEMBER_ID);
    try {
      const r = await entry.group.sync(req.memberId, req.generationId, req.assignments);
      return { throttleTimeMs: 0, errorCode: code(r.errorCode), assignment: r.assignment };
    } catch (err) {
      return failed(codeOf(err));
    }
  }

  async heartbeat(req: HeartbeatRequest): Promise<HeartbeatResponse> {
    const placed = await this.placement(req.groupId);
    if (placed !== 'NONE') return { throttleTimeMs: 0, errorCode: code(placed) };
    const entry = this.groups.get(req.groupId);
    return { throttleTimeMs: 0, errorCode: code(entry ? entry.group.heartbeat(req.memberId, req.generationId) : 'UNKNOWN_MEMBER_ID') };
  }

  async leaveGroup(req: LeaveGroupRequest, version: number): Promise<LeaveGroupResponse> {
    const placed = await this.placement(req.groupId);
    if (placed !== 'NONE') return { throttleTimeMs: 0, errorCode: code(placed), members: [] };
    const entry = this.groups.get(req.groupId);
    const leave = (memberId: string): number => code(entry ? entry.group.leave(memberId) : 'UNKNOWN_MEMBER_ID');
    if (version < 3) return { throttleTimeMs: 0, errorCode: leave(req.memberId), members: [] };
    return { throttleTimeMs: 0, errorCode: 0, members: req.members.map((m) => ({ ...m, errorCode: leave(m.memberId) })) };
  }

  // ------------------------------------------------------------------ offsets

  async offsetCommit(req: OffsetCommitRequest): Promise<OffsetCommitResponse> {
    const answer = (errorOf: (topic: string, partition: number) => number): OffsetCommitResponse => ({
      throttleTimeMs: 0,
      topics: req.topics.map((t) => ({ name: t.name, partitions: t.partitions.map((p) => ({ partitionIndex: p.partitionIndex, errorCode: errorOf(t.name, p.partitionIndex) })) })),
    });
    const placed = await this.placement(req.groupId);
    if (placed !== 'NONE') return answer(() => code(placed));
    let entry: Entry;
    try {
      entry = this.entry(req.groupId);
    } catch (err) {
      return answer(() => codeOf(err));
    }
    const allowed = entry.group.checkCommit(req.memberId, req.generationId);
    if (allowed !== 'NONE') return answer(() => code(allowed));

    const errors = new Map<string, number>();
    const commits: { topic: string; partition: number; committed: CommittedOffset }[] = [];
    const now = Date.now();
    for (const t of req.topics) {
      let partitions = -1;
      let topicError = 0;
      try {
        partitions = await this.options.partitionsOf(t.name);
      } catch (err) {
        topicError = codeOf(err);
      }
      for (const p of t.partitions) {
        const key = `${t.name}\0${p.partitionIndex}`;
        if (topicError !== 0) errors.set(key, topicError);
        else if (p.partitionIndex < 0 || p.partitionIndex >= partitions) errors.set(key, KafkaErrors.UNKNOWN_TOPIC_OR_PARTITION);
        else if (p.committedMetadata !== null && Buffer.byteLength(p.committedMetadata) > this.options.maxOffsetMetadataBytes) errors.set(key, KafkaErrors.OFFSET_METADATA_TOO_LARGE);
        else commits.push({ topic: t.name, partition: p.partitionIndex, committed: { offset: p.committedOffset, leaderEpoch: p.committedLeaderEpoch, metadata: p.committedMetadata, commitTimeMs: now } });
      }
    }
    if (commits.length > 0) {
      const write = entry.writes.then(() => this.store.commit(req.groupId, commits));
      entry.writes = write.catch(() => undefined);
      try {
        await write;
        for (const c of commits) offsetsOf(entry, c.topic).set(c.partition, c.committed);
      } catch (err) {
        for (const c of commits) errors.set(`${c.topic}\0${c.partition}`, codeOf(err));
      }
    }
    return answer((topic, partition) => errors.get(`${topic}\0${partition}`) ?? 0);
  }

  async offsetFetch(req: OffsetFetchRequest): Promise<OffsetFetchResponse> {
    const placed = await this.placement(req.groupId);
    const missing = (partitionIndex: number, errorCode = 0): OffsetFetchPartition => ({ partitionIndex, committedOffset: -1n, committedLeaderEpoch: -1, metadata: '', errorCode });
    if (placed !== 'NONE') {
      return { throttleTimeMs: 0, errorCode: code(placed), topics: (req.topics ?? []).map((t) => ({ name: t.name, partitions: t.partitionIndexes.map((p) => missing(p, code(placed))) })) };
    }
    const offsets = this.groups.get(req.groupId)?.offsets ?? new Map<string, Map<number, CommittedOffset>>();
    const wanted = req.topics ?? [...offsets].map(([name, byPartition]) => ({ name, partitionIndexes: [...byPartition.keys()] }));
    return {
      throttleTimeMs: 0,
      errorCode: 0,
      topics: wanted.map((t) => ({
        name: t.name,
        partitions: t.partitionIndexes.map((p) => {
          const c = offsets.get(t.name)?.get(p);
          return c ? { partitionIndex: p, committedOffset: c.offset, committedLeaderEpoch: c.leaderEpoch, metadata: c.metadata, errorCode: 0 } : missing(p);
        }),
      })),
    };
  }

  // ------------------------------------------------------------------ listing

  listGroups(req: ListGroupsRequest): ListGroupsResponse {
    const states = new Set(req.statesFilter.map((s) => s.toLowerCase()));
    const groups = this.summaries()
      .filter((g) => states.size === 0 || states.has(g.state.toLowerCase()))
      .map((g) => ({ groupId: g.group, protocolType: g.protocolType, groupState: g.state }));
    return { throttleTimeMs: 0, errorCode: 0, groups };
  }

  async describeGroups(req: DescribeGroupsRequest): Promise<DescribeGroupsResponse> {
    const groups = await Promise.all(
      req.groups.map(async (groupId) => {
        const head = { groupId, groupState: 'Dead', protocolType: '', protocolData: '', members: [] };
        const placed = await this.placement(groupId);
        if (placed !== 'NONE') return { ...head, errorCode: code(placed) };
        const entry = this.groups.get(groupId);
        if (!entry || isVacant(entry)) return { ...head, errorCode: 0 };
        const g = entry.group;
        return {
          errorCode: 0,
          groupId,
          groupState: g.state,
          protocolType: g.protocolType,
          protocolData: g.protocol,
          members: g.describeMembers().map((m) => ({ memberId: m.memberId, groupInstanceId: null, clientId: m.clientId, clientHost: m.clientHost, memberMetadata: m.metadata, memberAssignment: m.assignment })),
        };
      }),
    );
    return { throttleTimeMs: 0, groups };
  }

  /** The groups this server coordinates that have members or committed offsets, by name. */
  summaries(): GroupSummary[] {
    return [...this.groups]
      .filter(([, e]) => !isVacant(e))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([group, e]) => ({
        group,
        state: e.group.state,
        members: e.group.memberCount,
        protocolType: e.group.protocolType,
        protocol: e.group.protocol,
        offsets: new Map([...e.offsets].map(([topic, byPartition]) => [topic, new Map([...byPartition].map(([p, c]) => [p, c.offset]))])),
      }));
  }
}

/**
 * The groups and their lag, given the log end (high watermark) of each partition of a topic
 * (undefined for a topic that is gone).
 */
export function groupLag(groups: GroupSummary[], logEnds: (topic: string) => ReadonlyMap<number, bigint> | undefined): GroupLag[] {
  return groups.map(({ offsets, ...g }) => ({
    ...g,
    topics: [...offsets].map(([topic, byPartition]) => {
      const ends = logEnds(topic);
      let lag = 0n;
      for (const [p, committed] of byPartition) {
        const end = ends?.get(p);
        if (end !== undefined && end > committed) lag += end - committed;
      }
      return { topic, partitions: byPartition.size, lag };
    }),
  }));
}

function offsetsOf(entry: Entry, topic: string): Map<number, CommittedOffset> {
  let m = entry.offsets.get(topic);
  if (!m) entry.offsets.set(topic, (m = new Map()));
  return m;
}

/** A group with neither members nor committed offsets: nothing to keep. */
function isVacant(e: Entry): boolean {
  return e.group.memberCount === 0 && e.offsets.size === 0 && e.group.state === 'Empty';
}
