/**
 * A coordinator of a cluster (`tributary coordinator-server`): a candidate in the coordinator
 * election that, once elected, serves the coordinator's APIs (metadata, DDL, lake tiering,
 * AdjustIsr, ControlledShutdown) and the HTTP endpoint, while its ClusterCoordinator keeps the
 * replicas placed and led. Until elected it is a standby: its RPC listener is open and lists every
 * API (so a client connected to it needs no new handshake once it leads), but answers each with a
 * retriable NETWORK_EXCEPTION naming the active coordinator, so a client that bootstraps to it
 * moves on to the next server it knows.
 *
 * Its data dir holds only what DuckDB spills for the REST API's SQL, and its lock; everything else
 * is in ZooKeeper. Losing the ZooKeeper session while leading emits `deposed`.
 */
import { EventEmitter } from 'node:events';
import path from 'node:path';
import { Connection } from '../client/index.js';
import { lakeWarehouse, Options } from '../common/config.js';
import type { ServerActivity } from '../common/activity.js';
import { TributaryError } from '../common/errors.js';
import { createLogger, type Logger } from '../common/logger.js';
import { lakeFormat } from '../lake/formats/index.js';
import { sqlLimits } from '../query/sql-limits.js';
import { ApiKeys, type Api } from '../rpc/api-keys.js';
import type { ApiRegistrar, Handler, RequestContext, RpcServer } from '../rpc/server.js';
import { CoordinatorLink } from './coordinator-link.js';
import { ClusterCoordinator } from './coordinator/cluster-coordinator.js';
import { isLakeEnabled } from './coordinator/lake-tiering-manager.js';
import { lakeTieringLag, registerTieringService, type TieringServiceDeps } from './coordinator/tiering-service.js';
import type { DataDirLock } from './data-dir-lock.js';
import { HttpServer } from './http/http-server.js';
import { LeaderHighWatermarks } from './leader-high-watermarks.js';
import { zooKeeperSettings, ZooKeeperSession } from './metadata/zookeeper-session.js';
import { NodeMetrics } from './metrics.js';
import { nodeMetrics, parseListener } from './server.js';
import type { DataDisk } from './tablet/data-disk.js';
import { releaseDataDir, rpcServerOf, startOnDataDir } from './startup.js';

export class CoordinatorServer extends EventEmitter<{ deposed: [Error] }> {
  private leading?: { coordinator: ClusterCoordinator; http: HttpServer; conn: Connection; highWatermarks: LeaderHighWatermarks };
  private readonly withdraw = new AbortController();
  private stopping = false;
  /** The handlers of the elected coordinator, by api key: the listener's handlers hand each request on to them. */
  private readonly served = new Map<number, Handler<Api, unknown>>();

  private constructor(
    readonly rpcAddress: { host: string; port: number },
    private readonly options: Options,
    private readonly rpc: RpcServer,
    private readonly session: ZooKeeperSession,
    private readonly activity: ServerActivity,
    /** Holds what DuckDB spills; watched like any data disk. */
    private readonly disk: DataDisk,
    private readonly dataDir: string,
    private readonly lock: DataDirLock,
    private readonly log: Logger,
    private readonly active: CoordinatorLink,
  ) {
    super();
    for (const api of Object.values(ApiKeys)) {
      if (api !== ApiKeys.ApiVersions) rpc.register(api, (req: unknown, ctx: RequestContext) => this.serve(api, req, ctx));
    }
  }

  /** The elected coordinator's answer, or why this one cannot answer. */
  private async serve(api: Api, req: unknown, ctx: RequestContext): Promise<never> {
    const handler = this.served.get(api.key);
    if (handler) return handler(req, ctx) as Promise<never>;
    if (this.leading) throw new TributaryError('UNSUPPORTED_VERSION', `${api.name} is served by tablet servers, not by the coordinator`);
    const other = await this.active.coordinator().catch(() => undefined);
    const where = other ? `coordinator ${other.id} at ${other.host}:${other.port} is active` : 'no coordinator is active yet';
    throw new TributaryError('NETWORK_EXCEPTION', `this coordinator stands by (${where})`);
  }

  /**
   * Claims the data dir, connects to ZooKeeper, opens the RPC listener and joins the election;
   * resolves once it leads, or at once as a standby when another coordinator leads.
   */
  static async start(settings: Record<string, string>, log: Logger = createLogger()): Promise<CoordinatorServer> {
    const options = new Options('server', settings);
    const listen = parseListener(options.string('bind.listeners')!);
    const zooKeeper = zooKeeperSettings(options);
    return startOnDataDir(options, log, async ({ dataDir, lock, activity, disk, undo }) => {
      const session = await ZooKeeperSession.connect(zooKeeper);
      undo.push(() => session.close());
      let metrics: NodeMetrics | undefined;
      const rpc = rpcServerOf(options, listen, log, () => metrics);
      undo.push(() => rpc.close());
      const active = new CoordinatorLink(() => session, zooKeeper.root, log, options.durationMs('client.request-timeout'));
      undo.push(() => active.close());
      const rpcAddress = await rpc.listen();
      // In the same tick as listen's: no request arrives before its handlers are registered.
      const server = new CoordinatorServer(rpcAddress, options, rpc, session, activity, disk, dataDir, lock, log, active);
      const elected = server.lead().then((m) => (metrics = m));
      // A coordinator that starts while another leads serves as a standby; the first one waits for its election.
      const standby = await server.anotherLeads();
      if (!standby) await elected;
      else
        elected.catch((err: unknown) => {
          if (!server.stopping) server.emit('deposed', err instanceof Error ? err : new Error(String(err)));
        });
      log.info({ rpc: rpcAddress, standby }, 'coordinator server started');
      return server;
    });
  }

  /** The HTTP endpoint's address while this coordinator leads. */
  get httpAddress(): { host: string; port: number } | undefined {
    return this.leading?.http.address;
  }

  /** Leaves the election (or hands the lead on), then closes the listener and the session. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.log.info('coordinator server stopping');
    this.withdraw.abort();
    const leading = this.leading;
    this.leading = undefined;
    if (leading) {
      await leading.http.close();
      leading.highWatermarks.stop();
      await leading.conn.close();
    }
    await this.rpc.close();
    await leading?.coordinator.stop();
    await this.active.close();
    await this.session.close();
    await releaseDataDir(this.disk, this.activity, this.lock);
    this.log.info('coordinator server stopped');
  }

  /** Whether another coordinator is active: resolves once one is, or once this one leads. */
  private async anotherLeads(): Promise<boolean> {
    // By address: ids are ports, which coordinators on different machines may share.
    const { host, port } = this.rpcAddress;
    while (!this.leading && !this.stopping) {
      const active = await this.active.coordinator().catch(() => undefined);
      if (active && (active.host !== host || active.port !== port)) return true;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return false;
  }

  /** Waits for the lead, then serves: the coordinator's APIs, tiering, HTTP. Resolves with the node's metrics. */
  private async lead(): Promise<NodeMetrics> {
    const { options, log, rpc, rpcAddress } = this;
    const warehouse = clusterWarehouse(options);
    const lake = lakeFormat(options.string('datalake.format')!).open(warehouse);
    const coordinator = await ClusterCoordinator.start({
      options,
      session: this.session,
      self: { id: coordinatorId(rpcAddress), host: rpcAddress.host, port: rpcAddress.port },
      log,
      activity: this.activity,
      lake,
      signal: this.withdraw.signal,
    });
    if (this.stopping) {
      await coordinator.stop();
      throw new TributaryError('CONNECTION_CLOSED', 'the coordinator server stopped');
    }
    coordinator.once('deposed', (err) => {
      if (!this.stopping) this.emit('deposed', err);
    });
    const registrar: ApiRegistrar = { register: (api, handler) => void this.served.set(api.key, handler as Handler<Api, unknown>) };
    coordinator.registerServices(registrar);
    const conn = await Connection.create({ 'bootstrap.servers': `${rpcAddress.host}:${rpcAddress.port}` });
    const highWatermarks = new LeaderHighWatermarks(conn, coordinator.coordinator, () => coordinator.coordinator.allTables().map(({ table }) => table).filter(isLakeEnabled), log);
    const tiering: TieringServiceDeps = { coordinator: coordinator.coordinator, warehouse, lakeFormat: lake.format, highWatermarks: (id) => highWatermarks.of(id) };
    registerTieringService(registrar, tiering);
    const metrics = nodeMetrics(tiering, () => [], () => coordinator.controller.health(), () => rpc.stats(), this.disk, this.activity, () => []);
    const http = await HttpServer.start({
      host: rpcAddress.host,
      port: options.int('http.port'),
      rpc: rpcAddress,
      tables: coordinator.coordinator,
      lake,
      metrics,
      readiness: () => rpc.readiness(),
      sql: sqlLimits(options, path.join(this.dataDir, 'sql-spill')),
      log: log.child({ role: 'http' }),
    });
    this.leading = { coordinator, http, conn, highWatermarks };
    log.info({ epoch: coordinator.epoch, http: http.address.port }, 'coordinator serving');
    return metrics;
  }
}

/**
 * The lake warehouse of a cluster: `datalake.iceberg.warehouse`, or else `lake` under the
 * remote.data.dir every server shares, so that the coordinator elected next finds the same lake.
 */
function clusterWarehouse(options: Options): string {
  const remote = options.string('remote.data.dir');
  return options.string('datalake.iceberg.warehouse') === undefined && remote !== undefined ? path.resolve(remote, 'lake') : lakeWarehouse(options);
}

/**
 * A coordinator's id in the election: its port, which tells the coordinators of one machine apart
 * (they run on different ports) and reads well in logs and in GetMetadata. It need not be unique
 * across machines: the election orders candidates by their znodes' sequence, and a standby tells
 * the active coordinator from itself by address.
 */
function coordinatorId(address: { port: number }): number {
  return address.port;
}
