/**
 * One Tributary node: coordinator and tablet server roles in one process, sharing one RPC listener,
 * plus the HTTP endpoint (health, REST API, Iceberg REST catalog). `TributaryServer.start` recovers
 * every bucket before the listener opens, so a client never sees a half-recovered log.
 */
import path from 'node:path';
import { storageStats } from '../storage/storage-stats.js';
import { lakeWarehouse, Options } from '../common/config.js';
import { lakeFormat } from '../lake/formats/index.js';
import { TributaryError } from '../common/errors.js';
import { sqlLimits } from '../query/sql-limits.js';
import { ApiKeys } from '../rpc/api-keys.js';
import { tablePathOf } from '../rpc/request-fields.js';
import type { RpcServer } from '../rpc/server.js';
import { Coordinator } from './coordinator/coordinator.js';
import type { ServerActivity } from '../common/activity.js';
import type { DataDirLock } from './data-dir-lock.js';
import type { DataDisk } from './tablet/data-disk.js';
import { isLakeEnabled } from './coordinator/lake-tiering-manager.js';
import { lakeTieringLag, registerTieringService, type TieringServiceDeps } from './coordinator/tiering-service.js';
import { registerCoordinatorService } from './coordinator/coordinator-service.js';
import { HttpServer } from './http/http-server.js';
import { createLogger, type Logger } from '../common/logger.js';
import { LocalMetadataStore } from './metadata/local-metadata-store.js';
import { type ClusterMetrics, type MetricSources, NodeMetrics } from './metrics.js';
import { releaseDataDir, rpcServerOf, type ServerBase, startOnDataDir } from './startup.js';
import { TabletServer } from './tablet/tablet-server.js';
import { registerTabletService } from './tablet/tablet-service.js';
import { type GroupLag, kafkaListenerOf, parseListeners, type RunningKafkaListener, startKafkaListener, type TributaryBackend } from '../kafka/index.js';
import { kafkaLakeHistory, registerListConsumerGroups } from './kafka-service.js';

/** The one-process node: its own single tablet server, leading every bucket as its only replica. */
const ONE_NODE: ClusterMetrics = { tabletServers: 1, offlineBuckets: 0, underReplicatedBuckets: 0, isrShrinks: 0, isrExpands: 0, bucketsMoving: 0 };

export interface Address {
  host: string;
  port: number;
}

/**
 * The RPC listener of `bind.listeners` (`NAME://host:port[,…]`): the first one not named
 * `kafkaName` (the Kafka listener, kafka.listener.names).
 */
export function parseListener(spec: string, kafkaName = 'KAFKA'): Address {
  const rpc = parseListeners(spec).find((l) => l.name !== kafkaName);
  if (!rpc) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `bind.listeners '${spec}' has no listener for Tributary's RPC, only ${kafkaName}`);
  return { host: rpc.host, port: rpc.port };
}

export class TributaryServer {
  private constructor(
    readonly rpcAddress: Address,
    readonly httpAddress: Address,
    private readonly kafka: RunningKafkaListener | undefined,
    private readonly rpc: RpcServer,
    private readonly http: HttpServer,
    private readonly coordinator: Coordinator,
    private readonly tablets: TabletServer,
    private readonly store: LocalMetadataStore,
    private readonly disk: DataDisk,
    private readonly lock: DataDirLock,
    private readonly activity: ServerActivity,
    private readonly log: Logger,
  ) {}

  /**
   * Opens the data dir and serves it. A start that fails stops what it opened, releases the lock
   * and removes the data dir if it created it, then throws the named error.
   */
  static async start(settings: Record<string, string>, log: Logger = createLogger()): Promise<TributaryServer> {
    const options = new Options('server', settings);
    const listen = parseListener(options.string('bind.listeners')!, options.string('kafka.listener.names'));
    return startOnDataDir(options, log, (base) => TributaryServer.open(options, listen, base, log));
  }

  /** The start after the lock: each part opened pushes its closing onto `undo`. */
  private static async open(options: Options, listen: Address, { dataDir, lock, activity, disk, undo }: ServerBase, log: Logger): Promise<TributaryServer> {
    const store = await LocalMetadataStore.open(path.join(dataDir, 'metadata'));
    undo.push(() => store.close());
    const warehouse = lakeWarehouse(options);
    const lake = lakeFormat(options.string('datalake.format')!).open(warehouse);
    const coordinator = new Coordinator(store, options, log.child({ role: 'coordinator' }), activity, lake, disk);
    const tablets = new TabletServer(dataDir, options, coordinator, log.child({ role: 'tablet-server' }), disk, activity);
    undo.push(() => tablets.stop());
    await tablets.start(coordinator.allTables());
    undo.push(() => coordinator.stop());
    await coordinator.start(tablets);

    const tiering: TieringServiceDeps = { coordinator, warehouse, lakeFormat: lake.format, highWatermarks: (id) => tablets.highWatermarks(id) };
    let kafka: RunningKafkaListener | undefined;
    const kafkaDatabase = options.string('kafka.database')!;
    /** The high watermark of each bucket of a topic's table, or undefined when the topic is gone. */
    const topicEnds = (topic: string): Map<number, bigint> | undefined => {
      try {
        const { tableId } = coordinator.getTableInfo({ database: kafkaDatabase, table: topic });
        return new Map(tablets.highWatermarks(tableId).map((b) => [b.bucket, b.highWatermark]));
      } catch {
        return undefined;
      }
    };
    const consumerGroups = (): GroupLag[] => kafka?.consumerGroups(topicEnds) ?? [];
    const kafkaListen = kafkaListenerOf(options);
    const metrics = new NodeMetrics(
      {
        ...processMetricSources(() => rpc, disk, activity),
        ...coordinatorMetricSources(tiering, () => ONE_NODE),
        ...tabletMetricSources(tablets),
        consumerGroups,
        ...(kafkaListen ? { kafka: () => kafka?.stats() ?? { heldBytes: 0 } } : {}),
      },
      options.int('metrics.replica-lag.max-bucket-series'),
    );
    const rpc = rpcServerOf(options, listen, log, () => metrics);
    let self = { nodeId: 0, host: listen.host, port: listen.port };
    registerCoordinatorService(rpc, coordinator, () => self);
    registerTieringService(rpc, tiering);
    registerTabletService(rpc, tablets);
    registerListConsumerGroups(rpc, consumerGroups);
    rpc.register(ApiKeys.TriggerKvSnapshot, async (req) => {
      const table = coordinator.getTableInfo(tablePathOf(ApiKeys.TriggerKvSnapshot, req.tablePath));
      if (!table.schema.primaryKey) throw new TributaryError('NON_PRIMARY_KEY_TABLE_EXCEPTION', `table '${table.path.database}.${table.path.table}' has no primary key`);
      const taken = await tablets.snapshotAll(table.tableId);
      return {
        snapshots: taken.map(({ replica, snapshot }) => ({
          bucketId: replica.bucket.bucket,
          snapshotId: BigInt(snapshot.snapshotId),
          logOffset: snapshot.logOffset,
          rowCount: BigInt(snapshot.rowCount),
        })),
      };
    });
    undo.push(() => rpc.close());
    const rpcAddress = await rpc.listen();
    self = { nodeId: 0, host: rpcAddress.host, port: rpcAddress.port };
    if (kafkaListen) {
      // One node leads every bucket: it is the only broker, node 0 as in GetMetadata.
      const backend: TributaryBackend = { call: (api, req) => rpc.invoke(api, req) };
      kafka = await startKafkaListener(options, kafkaListen, rpc.requestMemory, backend, 0, (at) => [{ nodeId: 0, host: at.host, port: at.port, rack: null }], kafkaLakeHistory(backend), log.child({ role: 'kafka' }), (deadline) => metrics.connectionClosed(deadline, 'kafka'));
      undo.push(() => kafka!.close());
    }

    const httpServer = await HttpServer.start({
      listen: { host: listen.host, port: options.int('http.port') },
      rpc: rpcAddress,
      tables: coordinator,
      lake,
      metrics,
      readiness: () => rpc.readiness(),
      sql: sqlLimits(options, path.join(dataDir, 'sql-spill')),
      log: log.child({ role: 'http' }),
    });
    log.info({ rpc: rpcAddress, http: httpServer.address.port, dataDir }, 'server started');
    return new TributaryServer(
      rpcAddress,
      httpServer.address,
      kafka,
      rpc,
      httpServer,
      coordinator,
      tablets,
      store,
      disk,
      lock,
      activity,
      log,
    );
  }

  /** Where the Kafka listener listens, when kafka.enabled is on. */
  get kafkaAddress(): Address | undefined {
    return this.kafka?.address;
  }

  /** Stops accepting requests, finishes in-flight ones, then flushes and checkpoints every log. */
  async stop(): Promise<void> {
    this.log.info('server stopping');
    await this.http.close();
    this.tablets.stopServing();
    await this.kafka?.close();
    await this.rpc.close();
    await this.coordinator.stop();
    await this.tablets.stop();
    await this.store.close();
    await releaseDataDir(this.disk, this.activity, this.lock);
    this.log.info('server stopped');
  }
}

/** What every server's metrics read: its RPC listener (once made), its data disk, its periodic tasks and runtime. */
export function processMetricSources(rpc: () => RpcServer, disk: DataDisk, activity: ServerActivity): Pick<MetricSources, 'rpc' | 'dataDisk' | 'activity' | 'storage'> {
  return { rpc: () => rpc().stats(), dataDisk: () => disk.state, activity: () => activity.take(), storage: storageStats };
}

/** What a tablet server's metrics read: its buckets, those it leads and their followers. */
export function tabletMetricSources(tablets: TabletServer): Pick<MetricSources, 'buckets' | 'replicas' | 'remoteLog' | 'kvSnapshots'> {
  const remote = tablets.remoteLog;
  return {
    buckets: () => tablets.bucketMetrics(),
    replicas: () => tablets.replicaMetrics(),
    kvSnapshots: () => ({ restores: tablets.kvRestores, uploads: tablets.kvSnapshotUploads }),
    ...(remote ? { remoteLog: () => ({ ...remote.counters, downloads: remote.remoteReads.downloads, hits: remote.remoteReads.hits }) } : {}),
  };
}

/** What the coordinator's metrics read: its tables, the cluster's health and lake tiering. */
export function coordinatorMetricSources(tiering: TieringServiceDeps, cluster: () => ClusterMetrics): Pick<MetricSources, 'tables' | 'lakeTables' | 'cluster'> {
  const { coordinator } = tiering;
  return {
    cluster,
    tables: () => {
      const all = coordinator.allTables();
      return { tables: all.length, partitions: all.reduce((n, t) => n + t.partitions.length, 0) };
    },
    lakeTables: () =>
      coordinator
        .allTables()
        .filter(({ table }) => isLakeEnabled(table))
        .map(({ table }) => {
          const { status, lagMs, buckets } = lakeTieringLag(tiering, table);
          return {
            database: table.path.database,
            table: table.path.table,
            lagRecords: buckets.reduce((n, b) => n + (b.highWatermark > b.lakeEndOffset ? b.highWatermark - b.lakeEndOffset : 0n), 0n),
            lagMs,
            failures: status.failures,
            ...(status.snapshot ? { lastSnapshotTime: status.snapshot.commitTimestamp } : {}),
          };
        }),
  };
}
