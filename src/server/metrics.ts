/**
 * A server's metrics in the Prometheus text format (prom-client), served by its HTTP endpoint at
 * `GET /metrics`. Each server gives the sources it has: the coordinator's (tables, the cluster's
 * health, lake tiering), the tablet server's (buckets, replicas and their followers' lag), or both
 * on the one-process node; a metric whose source is missing is not exported. Offsets, sizes, row counts and tiering lag are read from the components when
 * Prometheus scrapes, so the write and read paths count nothing for them; only finished RPC
 * requests are counted as they happen. Rates come from the counters and offsets
 * (`rate(tributary_log_end_offset[1m])` is records appended per second). Names follow Fluss's
 * metrics where there is one (docs/operations.md lists them all).
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { type DurationStats, GC_KINDS } from '../common/runtime-monitor.js';
import type { ServerActivity } from '../common/activity.js';
import type { StorageStats } from '../storage/storage-stats.js';
import { metricType, type SeriesFamily, seriesFamily, writeSeries } from './metric-series.js';
import type { DataDiskState } from './tablet/data-disk.js';
import type { BucketMetrics, FollowerMetrics, KvSnapshotMetrics, ReplicaMetrics } from './tablet/tablet-server.js';

/** One lake-enabled table's tiering, as metrics see it. */
export interface LakeTableMetrics {
  database: string;
  table: string;
  /** Records of the log not yet in the lake, over all buckets. */
  lagRecords: bigint;
  /** How long the oldest row not yet in the lake has waited, 0 when the lake holds everything. */
  lagMs: number;
  failures: number;
  /** Commit time (ms since epoch) of the latest lake snapshot, if there is one. */
  lastSnapshotTime?: number;
}

/** The replicas of the cluster as its coordinator sees them (one node: itself, every bucket led). */
export interface ClusterMetrics {
  tabletServers: number;
  offlineBuckets: number;
  underReplicatedBuckets: number;
  isrShrinks: number;
  isrExpands: number;
  /** Buckets a rebalance is moving to other servers now. */
  bucketsMoving: number;
}

/** A Kafka consumer group this server coordinates, with its lag per topic. */
export interface ConsumerGroupMetrics {
  group: string;
  members: number;
  topics: { topic: string; lag: bigint }[];
}

export interface MetricSources {
  /** Tablet servers: the hosted buckets. */
  buckets?(): BucketMetrics[];
  /** Tablet servers: the buckets led and their followers. */
  replicas?(): ReplicaMetrics;
  /** Tablet servers: KV states opened by where they came from, and what KV snapshots uploaded. */
  kvSnapshots?(): KvSnapshotMetrics;
  /** The coordinator: the cluster's replicas as it sees them. */
  cluster?(): ClusterMetrics;
  /** The coordinator: tiering of the lake-enabled tables. */
  lakeTables?(): LakeTableMetrics[];
  /** The coordinator: tables and partitions. */
  tables?(): { tables: number; partitions: number };
  /** Tablet servers with a remote log: its requests, uploads and reads. */
  remoteLog?(): { requests: number; uploadedBytes: number; failedRounds: number; downloads: number; hits: number };
  /** Servers with a Kafka listener: the consumer groups they coordinate. */
  consumerGroups?(): ConsumerGroupMetrics[];
  /** Servers with a Kafka listener: the request bytes its connections hold. */
  kafka?(): { heldBytes: number };
  rpc(): { connections: number; heldBytes: number };
  /** What the process asked of remote storage, and how its lake file cache served reads. */
  storage(): Readonly<StorageStats>;
  dataDisk(): DataDiskState;
  /** Read once per scrape: each scrape starts a new window. */
  activity(): ReturnType<ServerActivity['take']>;
}

/** What one scrape reads of the sources, and of the followers the series exported. */
type Scrape = { [K in keyof MetricSources]-?: ReturnType<NonNullable<MetricSources[K]>> } & { followerSeries: FollowerSeries };

/** The followers' lag as exported: at most the cap of bucket series, the most lagging first, and one total per follower. */
interface FollowerSeries {
  buckets: FollowerMetrics[];
  totals: { follower: number; lagRecords: bigint; sinceCaughtUpMs: number }[];
}

const BUCKET_LABELS = ['database', 'table', 'partition', 'bucket'] as const;
const FOLLOWER_LABELS = [...BUCKET_LABELS, 'follower'] as const;
/** The quantiles of the windowed summaries; 1 is the longest. */
const QUANTILES: [string, keyof DurationStats][] = [['0.5', 'p50Ms'], ['0.99', 'p99Ms'], ['0.999', 'p999Ms'], ['1', 'maxMs']];
const TABLE_LABELS = ['database', 'table'] as const;

export class NodeMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'api'>;
  private readonly errors: Counter<'api' | 'error'>;
  private readonly latency: Histogram<'api'>;
  private readonly deadlineClosed: { rpc: Counter<'deadline'>; kafka?: Counter<'deadline'> };
  /** The sources as read for the scrape under way, so each is read once per scrape, not once per gauge. */
  private scrape?: Scrape;
  /** The metrics of one series per item, which `exposition` writes itself (metric-series.ts). */
  private readonly families: SeriesFamily<Scrape>[] = [];

  /** `maxFollowerSeries` bounds the bucket series of the followers' lag (`metrics.replica-lag.max-bucket-series`). */
  constructor(
    private readonly sources: MetricSources,
    private readonly maxFollowerSeries = Number.POSITIVE_INFINITY,
  ) {
    const registers = [this.registry];
    const current = (): Scrape => this.scrape ?? this.read();
    const series = <T>(
      name: string,
      help: string,
      labelNames: readonly string[],
      items: (s: Scrape) => readonly T[],
      labels: (item: T) => readonly string[],
      value: (item: T) => number | undefined,
    ): void => {
      this.families.push(seriesFamily({ name, help, labelNames, items, labels, value }));
    };
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({ name: 'tributary_rpc_requests_total', help: 'RPC requests answered, by API.', labelNames: ['api'], registers });
    this.errors = new Counter({ name: 'tributary_rpc_request_errors_total', help: 'RPC requests answered with an error, by API and error name.', labelNames: ['api', 'error'], registers });
    this.latency = new Histogram({
      name: 'tributary_rpc_request_duration_seconds',
      help: 'Time from a request being read to its answer being written, by API (long-polling fetches include their wait).',
      labelNames: ['api'],
      buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers,
    });
    const deadlineCounter = (listener: string): Counter<'deadline'> => {
      const counter = new Counter({
        name: `tributary_${listener.toLowerCase()}_connections_closed_total`,
        help: `${listener} connections the server closed because they missed a deadline: frame-timeout (rpc.frame-timeout), idle (netty.connection.max-idle-time).`,
        labelNames: ['deadline'],
        registers,
      });
      for (const deadline of ['frame-timeout', 'idle']) counter.inc({ deadline }, 0);
      return counter;
    };
    this.deadlineClosed = { rpc: deadlineCounter('RPC'), ...(sources.kafka ? { kafka: deadlineCounter('Kafka') } : {}) };
    // One series read when scraped, typed by its name as the per-item series are (metricType).
    const scalar = (name: string, help: string, value: () => number): void => {
      if (metricType(name) === 'counter') {
        new Counter({
          name,
          help,
          registers,
          collect() {
            this.reset();
            this.inc(value());
          },
        });
      } else {
        new Gauge({
          name,
          help,
          registers,
          collect() {
            this.set(value());
          },
        });
      }
    };
    scalar('tributary_rpc_connections', 'Open RPC connections.', () => current().rpc.connections);
    scalar('tributary_rpc_held_bytes', 'Request bytes read and not yet answered (bounded by server.buffer.memory-size).', () => current().rpc.heldBytes);
    if (sources.tables) {
      scalar('tributary_tables', 'Tables of all databases.', () => current().tables.tables);
      scalar('tributary_partitions', 'Partitions of all tables.', () => current().tables.partitions);
    }
    if (sources.cluster) {
      scalar('tributary_tablet_servers', 'Live tablet servers of the cluster (1 for the one-process node).', () => current().cluster.tabletServers);
      scalar('tributary_offline_buckets', 'Buckets without a live leader: none of their in-sync replicas is alive.', () => current().cluster.offlineBuckets);
      scalar('tributary_under_replicated_buckets', 'Buckets with fewer replicas in the ISR than assigned.', () => current().cluster.underReplicatedBuckets);
      scalar('tributary_isr_shrinks_total', 'ISR shrinks leaders asked for and the coordinator accepted, since it leads.', () => current().cluster.isrShrinks);
      scalar('tributary_isr_expands_total', 'ISR expansions leaders asked for and the coordinator accepted, since it leads.', () => current().cluster.isrExpands);
      scalar('tributary_rebalance_buckets_moving', 'Buckets whose replicas a rebalance is moving now (at most coordinator.rebalance.max-concurrent-moves).', () => current().cluster.bucketsMoving);
    }
    if (sources.replicas) {
      scalar('tributary_server_led_buckets', 'Buckets this tablet server leads.', () => current().replicas.led);
      scalar('tributary_server_under_replicated_buckets', 'Buckets this tablet server leads with fewer replicas in the ISR than assigned.', () => current().replicas.underReplicated);
      const follower = (name: string, help: string, value: (f: FollowerMetrics) => number | undefined): void =>
        series(name, help, FOLLOWER_LABELS, (s) => s.followerSeries.buckets, followerLabels, value);
      follower('tributary_replica_lag_records', 'Records a follower of a bucket this server leads is behind the leader\'s log end (absent before its first fetch of this leader epoch).', (f) =>
        f.lagRecords === undefined ? undefined : Number(f.lagRecords),
      );
      follower('tributary_replica_last_caught_up_seconds', 'Seconds since a follower of a bucket this server leads last caught up with the leader\'s log end.', (f) => f.sinceCaughtUpMs / 1000);
      const total = (name: string, help: string, value: (t: FollowerSeries['totals'][number]) => number): void =>
        series(name, help, ['follower'], (s) => s.followerSeries.totals, (t) => [String(t.follower)], value);
      total('tributary_follower_lag_records', 'Records a follower is behind, summed over every bucket this server leads (every bucket, also past the cap of bucket series).', (t) => Number(t.lagRecords));
      total('tributary_follower_last_caught_up_seconds', 'Seconds since a follower last caught up, the longest over every bucket this server leads.', (t) => t.sinceCaughtUpMs / 1000);
    }
    if (sources.kvSnapshots) {
      series('tributary_kv_restores_total', 'Primary-key bucket states opened, by what they were recovered from: a registered snapshot, the local state, or none (the changelog alone).', ['source'], (s) => Object.entries(s.kvSnapshots.restores), ([source]) => [source], ([, n]) => n);
      scalar('tributary_kv_snapshot_bytes_total', 'Bytes of the lmdb copies of the KV snapshots taken here.', () => current().kvSnapshots.uploads.bytes);
      scalar('tributary_kv_snapshot_uploaded_bytes_total', 'Bytes KV snapshots uploaded to remote.data.dir: the chunks no earlier snapshot of the bucket had stored.', () => current().kvSnapshots.uploads.uploadedBytes);
      scalar('tributary_kv_snapshot_uploaded_chunks_total', 'Chunks KV snapshots uploaded to remote.data.dir.', () => current().kvSnapshots.uploads.uploadedChunks);
    }
    series('tributary_remote_requests_total', 'S3 requests this process sent, by operation (each attempt, retries included).', ['operation'], (s) => [...s.storage.requests], ([operation]) => [operation], ([, n]) => n);
    scalar('tributary_remote_request_failures_total', 'S3 request attempts that failed (a retried request counts each failed attempt).', () => current().storage.failedRequests);
    series('tributary_remote_bytes_total', 'Bytes this process sent to (up) and received from (down) S3.', ['direction'], (s): [string, number][] => [['up', s.storage.uploadedBytes], ['down', s.storage.downloadedBytes]], ([direction]) => [direction], ([, n]) => n);
    scalar('tributary_lake_cache_hits_total', 'Reads of a remote lake file the lake file cache held already.', () => current().storage.cacheHits);
    scalar('tributary_lake_cache_misses_total', 'Reads of a remote lake file the lake file cache had to download.', () => current().storage.cacheMisses);
    scalar('tributary_lake_cache_fetched_bytes_total', 'Bytes the lake file cache downloaded.', () => current().storage.cacheFetchedBytes);
    scalar('tributary_data_disk_write_locked', '1 while writes are refused because the data disk is full (DISK_WRITE_LOCKED), else 0.', () => (current().dataDisk.writeLocked ? 1 : 0));
    scalar('tributary_data_disk_used_ratio', 'Share of the data disk in use, 0 to 1, as of its last check.', () => current().dataDisk.usedRatio);
    const bucket = (name: string, help: string, value: (b: BucketMetrics) => number | undefined): void =>
      series(name, help, BUCKET_LABELS, (s) => s.buckets, bucketLabels, value);
    const lake = (name: string, help: string, value: (t: LakeTableMetrics) => number | undefined): void =>
      series(name, help, TABLE_LABELS, (s) => s.lakeTables, tableLabels, value);
    if (sources.buckets) {
      bucket('tributary_log_start_offset', 'First offset of the bucket\'s local log.', (b) => Number(b.logStartOffset));
      bucket('tributary_log_end_offset', 'Offset the next record appended to the bucket gets.', (b) => Number(b.logEndOffset));
      bucket('tributary_log_high_watermark', 'Offset below which the bucket\'s records are durable and visible to readers.', (b) => Number(b.highWatermark));
      bucket('tributary_log_size_bytes', 'Bytes of the bucket\'s log segments on local disk.', (b) => b.logSizeBytes);
      bucket('tributary_log_segments', 'Segment files of the bucket\'s log.', (b) => b.segments);
      bucket('tributary_kv_rows', 'Rows of a primary-key bucket\'s current state.', (b) => b.kvRows);
      bucket('tributary_remote_log_size_bytes', 'Bytes of the bucket\'s segments in the remote log (remote.data.dir set).', (b) => b.remote?.remoteBytes);
      bucket('tributary_remote_log_segments', 'Segments of the bucket in the remote log.', (b) => b.remote?.remoteSegments);
      bucket('tributary_remote_log_upload_lag_segments', 'Closed segments of a bucket this server leads that wait for their upload to the remote log.', (b) => b.remote?.pendingSegments);
      bucket('tributary_remote_log_upload_lag_bytes', 'Bytes of the closed segments that wait for their upload to the remote log.', (b) => b.remote?.pendingBytes);
    }
    if (sources.remoteLog) {
      scalar('tributary_remote_log_requests_total', 'Requests of remote log uploads, manifest reads and writes and deletes to the remote store.', () => current().remoteLog.requests);
      scalar('tributary_remote_log_uploaded_bytes_total', 'Bytes of log segments uploaded to the remote log.', () => current().remoteLog.uploadedBytes);
      scalar('tributary_remote_log_failed_rounds_total', 'Remote log rounds of a bucket that failed (and backed off).', () => current().remoteLog.failedRounds);
      scalar('tributary_remote_log_downloads_total', 'Remote segments downloaded to serve fetches below the local log start.', () => current().remoteLog.downloads);
      scalar('tributary_remote_log_cache_hits_total', 'Fetches of remote segments served from the local cache of downloaded segments.', () => current().remoteLog.hits);
    }
    if (sources.lakeTables) {
      lake('tributary_lake_tiering_lag_records', 'Records of a lake-enabled table not yet tiered into the lake.', (t) => Number(t.lagRecords));
      lake('tributary_lake_tiering_lag_seconds', 'How long the oldest row not yet in the lake has waited (0 when the lake holds everything).', (t) => t.lagMs / 1000);
      lake('tributary_lake_tiering_failures', 'Tiering rounds of the table that failed.', (t) => t.failures);
      lake('tributary_lake_snapshot_timestamp_seconds', 'Commit time of the table\'s latest lake snapshot, Unix seconds.', (t) => (t.lastSnapshotTime === undefined ? undefined : t.lastSnapshotTime / 1000));
    }
    const window = (name: string, help: string, labelName: string | undefined, items: () => [string, DurationStats][], counted = true): void =>
      windowSummary(registers, name, help, labelName, items, counted);
    window('tributary_event_loop_delay_seconds', 'How late the event loop ran callbacks (1 ms resolution), by quantile over the time since the previous scrape.', undefined, () => [['', current().activity.runtime.loopDelay]], false);
    window('tributary_gc_pause_seconds', 'Garbage-collection pauses by kind (minor, major, incremental, weakcb): quantiles since the previous scrape, count and sum since the start.', 'kind', () => GC_KINDS.map((k) => [k, current().activity.runtime.gc[k]]));
    window('tributary_log_flush_seconds', 'fdatasync of a log on the append path (acknowledgements and readers wait for it): quantiles since the previous scrape, count and sum since the start.', undefined, () => [['', current().activity.flushes]]);
    window('tributary_background_task_seconds', 'Runs of the periodic tasks (checkpoint, retention, kv snapshots, tiering and auto-partition timers, data-disk check, sweepers): quantiles since the previous scrape, count and sum since the start.', 'task', () => [...current().activity.tasks]);
    if (sources.kafka) {
      scalar('tributary_kafka_held_bytes', 'Kafka request bytes read and not yet answered (with the RPC listener\'s, bounded by server.buffer.memory-size).', () => current().kafka.heldBytes);
    }
    if (sources.consumerGroups) {
      scalar('tributary_kafka_consumer_groups', 'Kafka consumer groups this server coordinates (with members or committed offsets).', () => current().consumerGroups.length);
      series('tributary_kafka_consumer_group_members', 'Members of a Kafka consumer group.', ['group'], (s) => s.consumerGroups, (g) => [g.group], (g) => g.members);
      series(
        'tributary_kafka_consumer_group_lag',
        'Records of a topic a Kafka consumer group has not committed: per partition with a committed offset, log end (high watermark) minus it, summed.',
        ['group', 'topic'],
        (s) => s.consumerGroups.flatMap((g) => g.topics.map((t) => ({ group: g.group, ...t }))),
        (t) => [t.group, t.topic],
        (t) => Number(t.lag),
      );
    }
  }

  /** Counts a finished request; `error` is the error name it was answered with, if any. */
  requestDone(api: string, seconds: number, error?: string): void {
    this.requests.inc({ api });
    this.latency.observe({ api }, seconds);
    if (error !== undefined) this.errors.inc({ api, error });
  }

  /** Counts a connection a listener closed on a deadline (`frame-timeout`, `idle`). */
  connectionClosed(deadline: string, listener: 'rpc' | 'kafka'): void {
    this.deadlineClosed[listener]?.inc({ deadline });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * The metrics in the Prometheus text format (UTF-8), from one reading of the sources:
   * prom-client's metrics, then the series per item, written in slices between which requests
   * are served.
   */
  async exposition(): Promise<Buffer> {
    const scrape = this.read();
    this.scrape = scrape;
    let registered: string;
    try {
      registered = await this.registry.metrics();
    } finally {
      this.scrape = undefined;
    }
    return writeSeries(registered.endsWith('\n') ? registered : `${registered}\n`, this.families, scrape);
  }

  private read(): Scrape {
    const { sources } = this;
    const replicas = sources.replicas?.() ?? { led: 0, underReplicated: 0, followers: [] };
    return {
      buckets: sources.buckets?.() ?? [],
      replicas,
      followerSeries: followerSeries(replicas.followers, this.maxFollowerSeries),
      cluster: sources.cluster?.() ?? { tabletServers: 0, offlineBuckets: 0, underReplicatedBuckets: 0, isrShrinks: 0, isrExpands: 0, bucketsMoving: 0 },
      lakeTables: sources.lakeTables?.() ?? [],
      tables: sources.tables?.() ?? { tables: 0, partitions: 0 },
      consumerGroups: sources.consumerGroups?.() ?? [],
      kafka: sources.kafka?.() ?? { heldBytes: 0 },
      remoteLog: sources.remoteLog?.() ?? { requests: 0, uploadedBytes: 0, failedRounds: 0, downloads: 0, hits: 0 },
      kvSnapshots: sources.kvSnapshots?.() ?? { restores: { snapshot: 0, local: 0, none: 0 }, uploads: { bytes: 0, uploadedBytes: 0, chunks: 0, uploadedChunks: 0 } },
      rpc: sources.rpc(),
      storage: sources.storage(),
      dataDisk: sources.dataDisk(),
      activity: sources.activity(),
    };
  }
}

/**
 * The bucket series of the followers' lag, at most `max`: the most lagging first (in records, then
 * in time since caught up), so that a cap hides the followers that keep up; and each follower's
 * total over every bucket, which the cap does not cut.
 */
export function followerSeries(followers: readonly FollowerMetrics[], max: number): FollowerSeries {
  const totals = new Map<number, FollowerSeries['totals'][number]>();
  for (const f of followers) {
    const t = totals.get(f.follower) ?? { follower: f.follower, lagRecords: 0n, sinceCaughtUpMs: 0 };
    t.lagRecords += f.lagRecords ?? 0n;
    t.sinceCaughtUpMs = Math.max(t.sinceCaughtUpMs, f.sinceCaughtUpMs);
    totals.set(f.follower, t);
  }
  const byLag = (a: FollowerMetrics, b: FollowerMetrics): number => {
    const [la, lb] = [a.lagRecords ?? -1n, b.lagRecords ?? -1n];
    return la === lb ? b.sinceCaughtUpMs - a.sinceCaughtUpMs : la < lb ? 1 : -1;
  };
  const buckets = followers.length <= max ? [...followers] : [...followers].sort(byLag).slice(0, max);
  return { buckets, totals: [...totals.values()].sort((a, b) => a.follower - b.follower) };
}

/**
 * A summary of durations per label value: `name{quantile}` gauges over the window the scrape
 * closes (activity.ts) and, when `counted`, `name_count` and `name_sum` counters since the start.
 */
function windowSummary(registers: Registry[], name: string, help: string, labelName: string | undefined, items: () => [string, DurationStats][], counted: boolean): void {
  const labelsOf = (value: string): Record<string, string> => (labelName === undefined ? {} : { [labelName]: value });
  const labelNames = labelName === undefined ? [] : [labelName];
  // Registered before the counters, which a scrape writes after this gauge's collect has counted into them.
  new Gauge({
    name,
    help,
    labelNames: [...labelNames, 'quantile'],
    registers,
    collect() {
      for (const [value, stats] of items()) {
        const labels = labelsOf(value);
        for (const [quantile, field] of QUANTILES) this.set({ ...labels, quantile }, stats[field] / 1000);
        count?.inc(labels, stats.count);
        sum?.inc(labels, stats.totalMs / 1000);
      }
    },
  });
  const count = counted ? new Counter({ name: `${name}_count`, help: `${help} (count)`, labelNames, registers }) : undefined;
  const sum = counted ? new Counter({ name: `${name}_sum`, help: `${help} (sum)`, labelNames, registers }) : undefined;
}

const bucketLabels = (b: Pick<BucketMetrics, 'database' | 'table' | 'partition' | 'bucket'>): string[] => [b.database, b.table, b.partition, String(b.bucket)];
const followerLabels = (f: FollowerMetrics): string[] => [...bucketLabels(f), String(f.follower)];
const tableLabels = (t: LakeTableMetrics): string[] => [t.database, t.table];
