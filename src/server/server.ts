/**
 * One Tributary node: coordinator and tablet server roles in one process, sharing one RPC listener,
 * plus the HTTP endpoint (health, REST API, Iceberg REST catalog). `TributaryServer.start` recovers
 * every bucket before the listener opens, so a client never sees a half-recovered log.
 */
import path from 'node:path';
import fs from 'node:fs';
import { Options } from '../common/config.js';
import { IcebergLakeCatalog } from '../lake/lake-catalog-sync.js';
import { TributaryError } from '../common/errors.js';
import { sqlLimits } from '../query/sql-limits.js';
import { initArrowCompression } from '../record/compression.js';
import { ApiKeys } from '../rpc/api-keys.js';
import { decodeLookupRequest } from '../rpc/lookup-messages.js';
import { RpcServer, type RpcServerStats } from '../rpc/server.js';
import { Coordinator } from './coordinator/coordinator.js';
import { isLakeEnabled } from './coordinator/lake-tiering-manager.js';
import { lakeTieringLag, registerTieringService, type TieringServiceDeps } from './coordinator/tiering-service.js';
import { registerCoordinatorService } from './coordinator/coordinator-service.js';
import { HttpServer } from './http/http-server.js';
import { createLogger, type Logger } from './logger.js';
import { LocalMetadataStore } from './metadata/local-metadata-store.js';
import { NodeMetrics } from './metrics.js';
import { TabletServer } from './tablet/tablet-server.js';

export interface Address {
  host: string;
  port: number;
}

/** Reads `NAME://host:port` (the first listener of `bind.listeners`). */
export function parseListener(spec: string): Address {
  const first = spec.split(',')[0].trim();
  const m = /^(?:[A-Za-z_][A-Za-z0-9_]*:\/\/)?(\[[^\]]+\]|[^:]+):(\d+)$/.exec(first);
  if (!m) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `invalid bind.listeners '${spec}': expected NAME://host:port`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2]) };
}

export class TributaryServer {
  private constructor(
    readonly rpcAddress: Address,
    readonly httpAddress: Address,
    private readonly rpc: RpcServer,
    private readonly http: HttpServer,
    private readonly coordinator: Coordinator,
    private readonly tablets: TabletServer,
    private readonly store: LocalMetadataStore,
    private readonly log: Logger,
    private readonly dataDir: string,
  ) {}

  static async start(settings: Record<string, string>, log: Logger = createLogger()): Promise<TributaryServer> {
    const options = new Options('server', settings);
    const dataDir = path.resolve(options.string('data.dir')!);
    await fs.promises.mkdir(dataDir, { recursive: true });
    await lockDataDir(dataDir);
    await initArrowCompression();
    const store = await LocalMetadataStore.open(path.join(dataDir, 'metadata'));
    const warehouse = path.resolve(options.string('datalake.iceberg.warehouse') ?? path.join(dataDir, 'lake'));
    const lakeCatalog = new IcebergLakeCatalog(warehouse);
    const coordinator = new Coordinator(store, options, log.child({ role: 'coordinator' }), lakeCatalog);
    const tablets = new TabletServer(dataDir, options, coordinator, log.child({ role: 'tablet-server' }));
    await tablets.start(coordinator.allTables());
    await coordinator.start(tablets);

    const listen = parseListener(options.string('bind.listeners')!);
    const tiering: TieringServiceDeps = { coordinator, warehouse, highWatermarks: (id) => tablets.highWatermarks(id) };
    const metrics = nodeMetrics(tiering, tablets, () => rpc.stats());
    const rpc = new RpcServer({
      host: listen.host,
      port: listen.port,
      maxFrameBytes: options.bytes('rpc.max-frame-size'),
      maxInflightBytes: options.bytes('server.buffer.memory-size'),
      logger: log.child({ role: 'rpc' }),
      onAnswered: (api, seconds, errorName) => metrics.requestDone(api.name, seconds, errorName),
    });
    let self = { nodeId: 0, host: listen.host, port: listen.port };
    registerCoordinatorService(rpc, coordinator, () => self);
    registerTieringService(rpc, tiering);
    rpc.register(ApiKeys.ProduceLog, (req) => tablets.produceLog(req), { releasesBody: true });
    rpc.register(ApiKeys.FetchLog, (req) => tablets.fetchLog(req));
    rpc.register(ApiKeys.ListOffsets, (req) => tablets.listOffsets(req));
    rpc.register(ApiKeys.LimitScan, (req) => tablets.limitScan(req));
    const kv = tablets.kvService;
    rpc.register(ApiKeys.PutKv, (req) => kv.putKv(req));
    rpc.register(ApiKeys.Lookup, (req) => kv.lookup(req), { decode: decodeLookupRequest });
    rpc.register(ApiKeys.PrefixLookup, (req) => kv.prefixLookup(req));
    rpc.register(ApiKeys.GetTableStats, (req) => kv.getTableStats(req));
    rpc.register(ApiKeys.ScanKv, (req) => kv.scanKv(req));
    rpc.register(ApiKeys.GetLatestKvSnapshots, async (req) => {
      const table = coordinator.getTableInfo({ database: req.tablePath?.databaseName ?? '', table: req.tablePath?.tableName ?? '' });
      const partition = req.partitionName === undefined ? undefined : coordinator.listPartitions(table.path).find((p) => p.partitionName === req.partitionName);
      if (req.partitionName !== undefined && !partition) throw new TributaryError('PARTITION_NOT_EXISTS', `partition '${req.partitionName}' does not exist`);
      return {
        tableId: BigInt(table.tableId),
        ...(partition ? { partitionId: BigInt(partition.partitionId) } : {}),
        latestSnapshots: kv.snapshotsOf(table, partition?.partitionId),
      };
    });
    rpc.register(ApiKeys.TriggerKvSnapshot, async (req) => {
      const table = coordinator.getTableInfo({ database: req.tablePath?.databaseName ?? '', table: req.tablePath?.tableName ?? '' });
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
    const rpcAddress = await rpc.listen();
    self = { nodeId: 0, host: rpcAddress.host, port: rpcAddress.port };

    const httpServer = await HttpServer.start({
      host: listen.host,
      port: options.int('http.port'),
      rpc: rpcAddress,
      tables: coordinator,
      catalog: lakeCatalog.catalog,
      metrics,
      sql: sqlLimits(options, path.join(dataDir, 'sql-spill')),
      log: log.child({ role: 'http' }),
    });
    log.info({ rpc: rpcAddress, http: httpServer.address.port, dataDir }, 'server started');
    return new TributaryServer(
      rpcAddress,
      httpServer.address,
      rpc,
      httpServer,
      coordinator,
      tablets,
      store,
      log,
      dataDir,
    );
  }

  /** Stops accepting requests, finishes in-flight ones, then flushes and checkpoints every log. */
  async stop(): Promise<void> {
    this.log.info('server stopping');
    await this.http.close();
    this.tablets.stopServing();
    await this.rpc.close();
    await this.coordinator.stop();
    await this.tablets.stop();
    await this.store.close();
    await fs.promises.rm(path.join(this.dataDir, LOCK_FILE), { force: true });
    this.log.info('server stopped');
  }
}

/** The node's metrics, read from the coordinator, the tablet server and the RPC listener when scraped. */
function nodeMetrics(tiering: TieringServiceDeps, tablets: TabletServer, rpcStats: () => RpcServerStats): NodeMetrics {
  const { coordinator } = tiering;
  return new NodeMetrics({
    buckets: () => tablets.bucketMetrics(),
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
    rpc: rpcStats,
  });
}

const LOCK_FILE = 'server.lock';

/**
 * Claims the data dir for this process: `server.lock` holds the owner's pid. A lock whose process
 * is gone (a crash, kill -9) is taken over; one held by a live process is refused, so two servers
 * never write the same logs.
 */
async function lockDataDir(dataDir: string): Promise<void> {
  const file = path.join(dataDir, LOCK_FILE);
  try {
    const owner = Number((await fs.promises.readFile(file, 'utf8')).trim());
    if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && isAlive(owner)) {
      throw new TributaryError('STORAGE_EXCEPTION', `data dir ${dataDir} is in use by the server with pid ${owner}`);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await fs.promises.writeFile(file, `${process.pid}\n`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
