/**
 * src/kafka: the Kafka-protocol listener. Owns the Kafka wire grammar (protocol/: primitive types,
 * messages as data, one file per API), Kafka record batches and their codecs (records/), the
 * mapping of topics onto tables (topic-mapping.ts), the API handlers (broker.ts) and the TCP
 * listener (listener.ts). It reaches the node only through the node's own APIs (backend.ts).
 * May import: common, record, rpc.
 */
import type { Options } from '../common/config.js';
import { TributaryError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { RequestMemoryBudget } from '../rpc/request-memory.js';
import type { ConnectionDeadline } from '../rpc/connection-deadlines.js';
import type { KafkaBrokerNode, LakeHistory, TributaryBackend } from './backend.js';
import { KafkaBroker } from './broker.js';
import { KafkaListener, type KafkaListenerStats } from './listener.js';
import { initKafkaCompression } from './records/compression.js';

import { groupLag, type GroupLag } from './groups/group-coordinator.js';

export type { KafkaBrokerNode, LakeCursor, LakeHistory, LakeRun, TributaryBackend } from './backend.js';
export type { GroupLag } from './groups/group-coordinator.js';
export type { KafkaListenerStats } from './listener.js';

export interface Listener {
  name: string;
  host: string;
  port: number;
}

/** Reads `bind.listeners`: `NAME://host:port[,NAME://host:port…]` (a listener without a name is the first). */
export function parseListeners(spec: string): Listener[] {
  return spec.split(',').map((part, i) => {
    const m = /^(?:([A-Za-z_][A-Za-z0-9_]*):\/\/)?(\[[^\]]+\]|[^:]+):(\d+)$/.exec(part.trim());
    if (!m) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `invalid bind.listeners '${spec}': expected NAME://host:port`);
    const port = Number(m[3]);
    if (port > 65535) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `invalid bind.listeners '${spec}': port ${port} is above 65535`);
    return { name: m[1] ?? (i === 0 ? 'TRIBUTARY' : ''), host: m[2].replace(/^\[|\]$/g, ''), port };
  });
}

/** The Kafka listener of the options, or undefined when kafka.enabled is off. */
export function kafkaListenerOf(options: Options): Listener | undefined {
  if (!options.bool('kafka.enabled')) return undefined;
  const name = options.string('kafka.listener.names')!;
  const found = parseListeners(options.string('bind.listeners')!).find((l) => l.name === name);
  if (!found) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `kafka.enabled is on but bind.listeners names no listener '${name}' (kafka.listener.names): add ${name}://host:port`);
  return found;
}

export interface RunningKafkaListener {
  address: { host: string; port: number };
  /** The consumer groups this server coordinates and their lag, given each topic's log ends by partition. */
  consumerGroups(logEnds: (topic: string) => ReadonlyMap<number, bigint> | undefined): GroupLag[];
  /** This server began or stopped leading a bucket of table `tableId` (the group coordinator follows its offsets buckets). */
  leadershipChanged(tableId: number, bucket: number, leading: boolean): void;
  /** Its connections and the request bytes they hold. */
  stats(): KafkaListenerStats;
  close(): Promise<void>;
}

/**
 * Starts the Kafka listener on `listen`; `requestMemory` is the node's request memory (the RPC
 * listener's), which its connections join, `nodeId` this server's id, `brokers` the Kafka
 * listeners of the servers that lead buckets, given this one's bound address, `lake` the history
 * of lake-enabled topics below their log start, `onDeadlineClosed` told of each connection closed
 * on a deadline.
 */
export async function startKafkaListener(
  options: Options,
  listen: Listener,
  requestMemory: RequestMemoryBudget,
  backend: TributaryBackend,
  nodeId: number,
  brokers: (self: { host: string; port: number }) => KafkaBrokerNode[],
  lake: LakeHistory,
  log: Logger,
  onDeadlineClosed?: (deadline: ConnectionDeadline) => void,
): Promise<RunningKafkaListener> {
  await initKafkaCompression();
  let self = { host: listen.host, port: listen.port };
  const broker = new KafkaBroker(backend, lake, {
    database: options.string('kafka.database')!,
    autoCreateTopics: options.bool('kafka.auto-create-topics'),
    defaultPartitions: options.int('num.partitions'),
    fetchMaxBytes: options.bytes('kafka.fetch.max-bytes'),
    lakeCursors: options.int('kafka.fetch.lake-cursors'),
    maxBatchBytes: options.bytes('rpc.max-frame-size'),
    maxWaitMs: options.durationMs('rpc.max-wait'),
    nodeId,
    brokers: () => brokers(self),
    clusterId: 'tributary',
    groups: {
      minSessionTimeoutMs: options.durationMs('kafka.group.min-session-timeout'),
      maxSessionTimeoutMs: options.durationMs('kafka.group.max-session-timeout'),
      initialRebalanceDelayMs: options.durationMs('kafka.group.initial-rebalance-delay'),
      maxGroups: options.int('kafka.group.max-groups'),
      maxMembers: options.int('kafka.group.max-members'),
      maxMetadataBytes: options.bytes('kafka.group.max-metadata-size'),
      maxOffsetMetadataBytes: options.bytes('kafka.group.offset-metadata.max-bytes'),
      offsetsBuckets: options.int('kafka.group.offsets-buckets'),
    },
  });
  const listener = new KafkaListener(broker, {
    host: listen.host,
    port: listen.port,
    maxFrameBytes: options.bytes('rpc.max-frame-size'),
    maxProducesInFlight: options.int('kafka.produce.max-in-flight'),
    requestMemory,
    frameTimeoutMs: options.durationMs('rpc.frame-timeout'),
    idleTimeoutMs: options.durationMs('netty.connection.max-idle-time'),
    logger: log,
    ...(onDeadlineClosed ? { onDeadlineClosed } : {}),
  });
  // Tolerated on a tablet server, where no coordinator may be active yet: the first topic creates
  // the database then, and the group coordinator opens its offsets table on its first request.
  await broker.start().catch((err: unknown) => log.info({ err }, 'no coordinator answered yet: kafka.database and the offsets table are created when one does'));
  const address = await listener.listen();
  self = address;
  log.info({ kafka: address }, 'kafka listener started');
  return {
    address,
    consumerGroups: (logEnds) => groupLag(broker.groups.summaries(), logEnds),
    leadershipChanged: (tableId, bucket, leading) => broker.groups.leadershipChanged(tableId, bucket, leading),
    stats: () => listener.stats(),
    close: async () => {
      await listener.close();
      await broker.groups.close();
    },
  };
}
