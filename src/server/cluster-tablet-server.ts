/**
 * A tablet server of a cluster (`tributary tablet-server`): its buckets' replicas, led or followed
 * as the active coordinator says (NotifyLeaderAndIsr), on a data dir of its own. Once its RPC
 * listener serves it registers in ZooKeeper (an ephemeral znode: the coordinator sees it join, and
 * leave when its session ends). It reaches the active coordinator through the address the
 * coordinator publishes in ZooKeeper, for ISR changes, KV snapshot commits, schemas and its
 * controlled shutdown.
 *
 * With `http.port` set it serves HTTP too (node-endpoint.ts): /health, /ready (its RPC listener's
 * readiness) and /metrics (its buckets, the followers of those it leads and their lag, the process).
 *
 * With `kafka.enabled` it also speaks the Kafka protocol on its KAFKA listener, advertised in its
 * registration: Produce, Fetch and ListOffsets run on this server's own buckets (a partition it does
 * not lead answers NOT_LEADER_OR_FOLLOWER, so a Kafka client refreshes its metadata), topic DDL and
 * metadata go to the active coordinator, and Metadata names every tablet server with a Kafka
 * listener as a broker.
 *
 * SIGTERM is a controlled shutdown: the server asks the coordinator to move its leaderships to
 * other in-sync replicas (`tablet-server.controlled-shutdown.*`), keeps serving while they move,
 * and then stops, so that writers see a new leader instead of a gap.
 */
import { create } from '@bufbuild/protobuf';
import { Options } from '../common/config.js';
import type { ServerActivity } from '../common/activity.js';
import { TributaryError } from '../common/errors.js';
import { createLogger, type Logger } from '../common/logger.js';
import { schemaFromJson } from '../common/schema.js';
import { kafkaLakeHistory, registerListConsumerGroups } from './kafka-service.js';
import { type GroupLag, kafkaListenerOf, parseListeners, type KafkaBrokerNode, type RunningKafkaListener, startKafkaListener, type TributaryBackend } from '../kafka/index.js';
import { ApiKeys } from '../rpc/api-keys.js';
import { RpcConnection } from '../rpc/connection.js';
import * as pb from '../rpc/gen/tributary_pb.js';
import type { RpcServer } from '../rpc/server.js';
import { CoordinatorLink } from './coordinator-link.js';
import type { DataDirLock } from './data-dir-lock.js';
import { NodeEndpoint, statusApp } from './http/node-endpoint.js';
import { TabletServerRegistration } from './metadata/tablet-server-registry.js';
import { zooKeeperSettings } from './metadata/zookeeper-session.js';
import { NodeMetrics } from './metrics.js';
import { parseListener, processMetricSources, tabletMetricSources } from './server.js';
import { releaseDataDir, rpcServerOf, startOnDataDir } from './startup.js';
import type { DataDisk } from './tablet/data-disk.js';
import { registerTabletService } from './tablet/tablet-service.js';
import { TabletServer } from './tablet/tablet-server.js';

/** The APIs a Kafka request reaches on this server itself; every other one goes to the active coordinator. */
/** The APIs the Kafka listener runs on this server: the data APIs, and the group coordinator's on the offsets buckets it leads. */
const LOCAL_KAFKA_APIS = new Set<number>([ApiKeys.ProduceLog.key, ApiKeys.FetchLog.key, ApiKeys.ListOffsets.key, ApiKeys.PutKv.key, ApiKeys.ScanKv.key]);

export class ClusterTabletServer {
  private constructor(
    readonly id: number,
    readonly rpcAddress: { host: string; port: number },
    private readonly http: NodeEndpoint | undefined,
    private readonly options: Options,
    private readonly rpc: RpcServer,
    private readonly kafka: RunningKafkaListener | undefined,
    private readonly tablets: TabletServer,
    private readonly registration: TabletServerRegistration,
    private readonly coordinator: CoordinatorLink,
    private readonly disk: DataDisk,
    private readonly activity: ServerActivity,
    private readonly lock: DataDirLock,
    private readonly log: Logger,
  ) {}

  static async start(settings: Record<string, string>, log: Logger = createLogger()): Promise<ClusterTabletServer> {
    const options = new Options('server', settings);
    const id = options.int('tablet-server.id');
    if (id === undefined) throw new TributaryError('INVALID_CONFIG_EXCEPTION', "option 'tablet-server.id' is required to start a tablet server: a unique integer, the same across restarts");
    const zooKeeper = zooKeeperSettings(options);
    const kafkaName = options.string('kafka.listener.names')!;
    const listen = parseListener(options.string('bind.listeners')!, kafkaName);
    const kafkaListen = kafkaListenerOf(options);
    return startOnDataDir(options, log, async ({ dataDir, lock, activity, disk, undo }) => {
      const requestTimeoutMs = options.durationMs('client.request-timeout');
      let registration: TabletServerRegistration | undefined;
      const coordinator = new CoordinatorLink(
        () => {
          if (!registration) throw new TributaryError('NETWORK_EXCEPTION', 'not registered in ZooKeeper yet');
          return registration.session;
        },
        zooKeeper.root,
        log.child({ role: 'coordinator-link' }),
        requestTimeoutMs,
      );
      undo.push(() => coordinator.close());
      const tablets = new TabletServer(
        dataDir,
        options,
        {
          cluster: {
            serverId: id,
            connect: (node) => RpcConnection.connect(node.host, node.port, { requestTimeoutMs, clientName: `tributary-tablet-server-${id}` }),
            adjustIsr: (req) => coordinator.request(ApiKeys.AdjustIsr, req),
            commitKvSnapshot: (req) => coordinator.request(ApiKeys.CommitKvSnapshot, req),
            commitRemoteLogManifest: (req) => coordinator.request(ApiKeys.CommitRemoteLogManifest, req),
            fetchSchema: async (table, schemaId) => {
              const resp = await coordinator.request(ApiKeys.GetTableSchema, { tablePath: { databaseName: table.database, tableName: table.table }, schemaId });
              return schemaFromJson(JSON.parse(resp.schemaJson));
            },
          },
        },
        log.child({ role: 'tablet-server' }),
        disk,
        activity,
      );
      undo.push(() => tablets.stop());
      await tablets.start([]);
      // Metrics only where they are served: with an HTTP port.
      let kafka: RunningKafkaListener | undefined;
      const kafkaDatabase = options.string('kafka.database')!;
      // A group's lag counts the partitions this server hosts a replica of (all of them where every server has one).
      const consumerGroups = (): GroupLag[] => kafka?.consumerGroups((topic) => tablets.hostedHighWatermarks({ database: kafkaDatabase, table: topic })) ?? [];
      const metrics = options.has('http.port')
        ? new NodeMetrics({ ...processMetricSources(() => rpc, disk, activity), ...tabletMetricSources(tablets), ...(kafkaListen ? { consumerGroups, kafka: () => kafka?.stats() ?? { heldBytes: 0 } } : {}) }, options.int('metrics.replica-lag.max-bucket-series'))
        : undefined;
      const rpc = rpcServerOf(options, listen, log, () => metrics);
      registerTabletService(rpc, tablets);
      registerListConsumerGroups(rpc, consumerGroups);
      // A client that bootstraps here learns where the coordinator and the other servers are.
      rpc.register(ApiKeys.GetMetadata, async (req) => {
        if (req.tablePath.length > 0 || req.partitionsId.length > 0) {
          throw new TributaryError('NOT_LEADER_OR_FOLLOWER', `tablet server ${id} answers table metadata only through the coordinator`);
        }
        const { coordinator: active, tabletServers } = tablets.clusterNodes();
        return { ...(active ? { coordinatorServer: active } : {}), tabletServers };
      });
      undo.push(() => rpc.close());
      const bound = await rpc.listen();
      const advertised = options.string('advertised.listeners');
      const rpcAddress = advertised ? parseListener(advertised, kafkaName) : bound;
      const rack = options.string('tablet-server.rack');
      let kafkaAddress: { host: string; port: number } | undefined;
      if (kafkaListen) {
        const backend: TributaryBackend = { call: (api, req) => (LOCAL_KAFKA_APIS.has(api.key) ? rpc.invoke(api, req) : coordinator.request(api, req)) };
        kafka = await startKafkaListener(options, kafkaListen, rpc.requestMemory, backend, id, (at) => kafkaBrokers(tablets, id, kafkaAddress ?? at, rack), kafkaLakeHistory(backend), log.child({ role: 'kafka' }), (deadline) => metrics?.connectionClosed(deadline, 'kafka'));
        undo.push(() => kafka!.close());
        const unsubscribe = tablets.onLeadershipChange((bucket, leading) => kafka?.leadershipChanged(bucket.tableId, bucket.bucket, leading));
        undo.push(async () => unsubscribe());
        kafkaAddress = (advertised ? parseListeners(advertised).find((l) => l.name === kafkaName) : undefined) ?? kafka.address;
      }
      registration = await TabletServerRegistration.register(
        zooKeeper,
        { id, ...rpcAddress, ...(rack ? { rack } : {}), ...(kafkaAddress ? { kafka: { host: kafkaAddress.host, port: kafkaAddress.port } } : {}) },
        log.child({ role: 'registration' }),
      );
      registration.on('failed', (err) => log.error({ err }, 'could not register again in ZooKeeper: this server takes no new leaderships'));
      const http = metrics && (await NodeEndpoint.start(listen.host, options.int('http.port'), statusApp({ metrics, readiness: () => rpc.readiness() })));
      log.info({ id, rpc: rpcAddress, http: http?.address, ...(kafkaAddress ? { kafka: kafkaAddress } : {}), dataDir }, 'tablet server started');
      return new ClusterTabletServer(id, rpcAddress, http, options, rpc, kafka, tablets, registration, coordinator, disk, activity, lock, log);
    });
  }

  /** The HTTP endpoint's address, when it serves one (`http.port`). */
  get httpAddress(): { host: string; port: number } | undefined {
    return this.http?.address;
  }

  /** Where the Kafka listener listens, when kafka.enabled is on. */
  get kafkaAddress(): { host: string; port: number } | undefined {
    return this.kafka?.address;
  }

  /** Controlled shutdown, then: stop serving, leave the cluster, close every replica. */
  async stop(): Promise<void> {
    this.log.info('tablet server stopping');
    await this.moveLeadershipsAway();
    await this.http?.close();
    this.tablets.stopServing();
    await this.kafka?.close();
    await this.rpc.close();
    await this.registration.close();
    await this.coordinator.close();
    await this.tablets.stop();
    await releaseDataDir(this.disk, this.activity, this.lock);
    this.log.info('tablet server stopped');
  }

  /** Asks the coordinator until this server leads nothing, or the retries run out (then it stops anyway). */
  private async moveLeadershipsAway(): Promise<void> {
    const retries = this.options.int('tablet-server.controlled-shutdown.max-retries')!;
    const pauseMs = this.options.durationMs('tablet-server.controlled-shutdown.retry-interval');
    for (let attempt = 0; attempt <= retries && this.tablets.leaderCount() > 0; attempt++) {
      if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
      try {
        const resp = await this.coordinator.request(ApiKeys.ControlledShutdown, create(pb.ControlledShutdownRequestSchema, { serverId: this.id, serverEpoch: this.registration.epoch }));
        this.log.info({ remainingLeaders: resp.remainingLeaders, attempt }, 'controlled shutdown');
        if (resp.remainingLeaders === 0) await this.untilLeadsNothing(pauseMs);
      } catch (err) {
        this.log.warn({ err, attempt }, 'controlled shutdown request failed');
      }
    }
    const left = this.tablets.leaderCount();
    if (left > 0) this.log.warn({ leaders: left }, 'stopping while still leading buckets: they are offline until the coordinator elects new leaders');
  }

  /** The coordinator's NotifyLeaderAndIsr making this server a follower arrives right after its answer. */
  private async untilLeadsNothing(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.tablets.leaderCount() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * The brokers of Metadata: every tablet server that advertises a Kafka listener, as the
 * coordinator's UpdateMetadata last named them, and this server at its own address even before
 * the first UpdateMetadata names it.
 */
function kafkaBrokers(tablets: TabletServer, id: number, self: { host: string; port: number }, rack: string | undefined): KafkaBrokerNode[] {
  const others = tablets
    .clusterNodes()
    .tabletServers.filter((n) => n.nodeId !== id && n.kafka !== undefined)
    .map((n) => ({ nodeId: n.nodeId, host: n.kafka!.host, port: n.kafka!.port, rack: n.rack ?? null }));
  return [{ nodeId: id, host: self.host, port: self.port, rack: rack ?? null }, ...others].sort((a, b) => a.nodeId - b.nodeId);
}
