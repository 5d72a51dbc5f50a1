/**
 * A cluster's coordinator, from candidate to active: joins the election (coordinator-election.ts),
 * waits to lead, then opens the metadata store in ZooKeeper with its epoch fence, takes control of
 * the replicas (ClusterController: rebuilt from ZooKeeper alone, every live tablet server told again
 * with the new epoch), starts the Coordinator (whose automatic partitioning and lake tiering so run
 * on the active coordinator only) and publishes its address (active-coordinator.ts).
 *
 * Losing the ZooKeeper session loses the lead: everything stops and `deposed` is emitted; the
 * process should exit so that a supervisor starts it again as a new candidate. A coordinator that
 * was deposed without noticing (paused past its session timeout) can no longer commit anything
 * (the fence), and tablet servers refuse its requests (the epoch).
 */
import { EventEmitter } from 'node:events';
import type { Options } from '../../common/config.js';
import type { ServerActivity } from '../../common/activity.js';
import { TributaryError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { LakeCatalog } from '../../lake/lake-format.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import { fieldError, idOf, optionalIdOf } from '../../rpc/request-fields.js';
import type { ApiRegistrar } from '../../rpc/server.js';
import { publishActiveCoordinator } from '../metadata/active-coordinator.js';
import { CoordinatorElection } from '../metadata/coordinator-election.js';
import { LiveTabletServers } from '../metadata/tablet-server-registry.js';
import { ZooKeeperMetadataStore } from '../metadata/zookeeper-metadata-store.js';
import type { ZooKeeperSession } from '../metadata/zookeeper-session.js';
import { ClusterController } from './cluster-controller.js';
import { Coordinator } from './coordinator.js';
import { registerCoordinatorService } from './coordinator-service.js';
import { registerRebalanceService } from './rebalance-service.js';

export interface ClusterCoordinatorSettings {
  options: Options;
  /** A connected session, shared by the election and the store; the caller closes it after stop(). */
  session: ZooKeeperSession;
  /** This coordinator's id and the address tablet servers and clients reach it at. */
  self: { id: number; host: string; port: number };
  log: Logger;
  /** Times the automatic partitioning runs. */
  activity: ServerActivity;
  lake?: LakeCatalog;
  /** Aborting it withdraws a candidate that does not lead yet (a standby told to stop): start() rejects. */
  signal?: AbortSignal;
}

export class ClusterCoordinator extends EventEmitter<{ deposed: [Error] }> {
  private stopped = false;
  private readonly onExpired = (): void => {
    void this.stop().finally(() => this.emit('deposed', new TributaryError('STORAGE_EXCEPTION', `coordinator ${this.settings.self.id} lost its ZooKeeper session and with it the lead (epoch ${this.epoch})`)));
  };

  private constructor(
    private readonly settings: ClusterCoordinatorSettings,
    private readonly election: CoordinatorElection,
    private readonly store: ZooKeeperMetadataStore,
    private readonly servers: LiveTabletServers,
    readonly coordinator: Coordinator,
    readonly controller: ClusterController,
    /** The coordinator epoch this coordinator leads with. */
    readonly epoch: number,
  ) {
    super();
    settings.session.once('expired', this.onExpired);
  }

  /** Resolves once this coordinator leads and is in control; rejects when its session expires first. */
  static async start(settings: ClusterCoordinatorSettings): Promise<ClusterCoordinator> {
    const { options, session, self, log } = settings;
    const root = options.string('zookeeper.path.root')!;
    const election = await CoordinatorElection.join(session, root, String(self.id));
    log.info({ candidate: election.name }, 'coordinator candidate: waiting to lead');
    const withdraw = (): void => void election.resign().catch((err: unknown) => log.warn({ err }, 'could not withdraw the candidate'));
    if (settings.signal?.aborted) withdraw();
    settings.signal?.addEventListener('abort', withdraw, { once: true });
    const { epoch, fence } = await election.elected.finally(() => settings.signal?.removeEventListener('abort', withdraw));
    const undo: (() => Promise<unknown>)[] = [() => election.resign()];
    try {
      const store = await ZooKeeperMetadataStore.open(session, root, fence);
      undo.push(() => store.close());
      const servers = await LiveTabletServers.watch(session, root);
      undo.push(async () => servers.close());
      const coordinator = new Coordinator(store, options, log.child({ role: 'coordinator' }), settings.activity, settings.lake);
      const controller = new ClusterController({
        store,
        servers,
        coordinatorEpoch: epoch,
        self: { nodeId: self.id, host: self.host, port: self.port },
        tables: coordinator,
        kvSnapshots: coordinator.kvSnapshots,
        remoteLogs: coordinator.remoteLogs,
        options,
        log: log.child({ role: 'cluster-controller' }),
      });
      undo.push(() => controller.stop());
      await controller.start();
      undo.push(() => coordinator.stop());
      await coordinator.start(controller, controller, controller);
      await publishActiveCoordinator(session, root, { id: self.id, host: self.host, port: self.port, epoch });
      log.info({ epoch, tabletServers: servers.list().map((s) => s.id) }, 'coordinator leads');
      return new ClusterCoordinator(settings, election, store, servers, coordinator, controller, epoch);
    } catch (err) {
      for (const step of undo.reverse()) await step().catch((e: unknown) => log.warn({ err: e }, 'cleanup after a failed coordinator start failed'));
      throw err;
    }
  }

  /** Registers what the active coordinator answers: the coordinator service (GetMetadata from the cluster), AdjustIsr, ControlledShutdown, CommitKvSnapshot, CommitRemoteLogManifest, server tags and rebalance. */
  registerServices(rpc: ApiRegistrar): void {
    const { self } = this.settings;
    registerCoordinatorService(rpc, this.coordinator, () => ({ nodeId: self.id, host: self.host, port: self.port }), this.controller);
    rpc.register(ApiKeys.AdjustIsr, (req) => this.controller.adjustIsr(req));
    rpc.register(ApiKeys.ControlledShutdown, (req) => this.controller.controlledShutdown(req));
    registerRebalanceService(rpc, this.controller);
    rpc.register(ApiKeys.CommitKvSnapshot, async (req) => {
      const api = ApiKeys.CommitKvSnapshot;
      const snapshot = req.snapshot;
      if (!snapshot) throw fieldError(api, 'snapshot', 'is required');
      const partitionId = optionalIdOf(api, 'partition_id', req.partitionId);
      await this.coordinator.commitKvSnapshot({
        bucket: { tableId: idOf(api, 'table_id', req.tableId), ...(partitionId !== undefined ? { partitionId } : {}), bucket: req.bucketId },
        snapshot: { snapshotId: Number(snapshot.snapshotId), logOffset: snapshot.logOffset, rowCount: Number(snapshot.rowCount), metadataPath: snapshot.metadataPath },
        leaderEpoch: req.bucketLeaderEpoch,
        coordinatorEpoch: req.coordinatorEpoch,
      });
      return {};
    });
    rpc.register(ApiKeys.CommitRemoteLogManifest, async (req) => {
      const api = ApiKeys.CommitRemoteLogManifest;
      const manifest = req.manifest;
      if (!manifest) throw fieldError(api, 'manifest', 'is required');
      const partitionId = optionalIdOf(api, 'partition_id', req.partitionId);
      await this.coordinator.commitRemoteLogManifest({
        bucket: { tableId: idOf(api, 'table_id', req.tableId), ...(partitionId !== undefined ? { partitionId } : {}), bucket: req.bucketId },
        manifest: { manifestPath: manifest.manifestPath, remoteLogStartOffset: manifest.remoteLogStartOffset, remoteLogEndOffset: manifest.remoteLogEndOffset },
        leaderEpoch: req.bucketLeaderEpoch,
        coordinatorEpoch: req.coordinatorEpoch,
      });
      return {};
    });
  }

  /** Stops leading and hands the lead on (the session stays open: the caller closes it). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.settings.session.off('expired', this.onExpired);
    // The controller first: dropping its undelivered requests releases DDL that waits for replicas to answer.
    await this.controller.stop();
    await this.coordinator.stop();
    this.servers.close();
    await this.store.close();
    if (this.settings.session.connected) await this.election.resign().catch((err: unknown) => this.settings.log.warn({ err }, 'could not resign the lead'));
  }
}
