/**
 * The client's view of cluster metadata: the nodes (the active coordinator and the tablet
 * servers), tables by path, the leader of each bucket (per partition), partitions by name and
 * table schemas by id. Entries are fetched from the coordinator on first use; leaders are dropped
 * when a request finds them stale (invalidateLeaders) and fetched again on the next use.
 */
import { TributaryError } from '../common/errors.js';
import { type PartitionInfo, type Schema, schemaFromJson, type TableInfo, type TablePath, tableInfoFromJson, tablePathString } from '../common/schema.js';
import { ApiKeys } from '../rpc/api-keys.js';
import { SERVER_TAGS, type ServerTag } from '../rpc/cluster-admin.js';
import type { RpcConnection } from '../rpc/connection.js';
import type { MetadataResponse, PbBucketMetadata, PbServerNode } from '../rpc/gen/tributary_pb.js';
import { toPartitionInfo } from './responses.js';

export interface ServerNode {
  nodeId: number;
  host: string;
  port: number;
  rack?: string;
}

/** Where a bucket lives, as the coordinator last said. */
export interface BucketLeader {
  bucket: number;
  /** -1 while the bucket has no leader. */
  leader: number;
  leaderEpoch: number;
  /** Replica ids in assignment order, and those in sync. */
  replicas: number[];
  isr: number[];
}

/** A node's address as the client connects to it. */
export const addressOf = (node: { host: string; port: number }): string => `${node.host}:${node.port}`;

/** Hosts a server may advertise when it listens on every interface: reached at the host that told us of it. */
const WILDCARD_HOSTS = new Set(['', '0.0.0.0', '::', '[::]']);

export class MetadataCache {
  private coordinatorNode?: ServerNode;
  private readonly tabletServerNodes = new Map<number, ServerNode>();
  /** The tagged tablet servers (AddServerTag), as the last metadata answer named them. */
  private readonly tags = new Map<number, ServerTag>();
  private readonly tables = new Map<string, TableInfo>();
  /** Bucket leaders by `<table id>/<partition id or ->`, in bucket order; a promise so that concurrent users share one request. */
  private readonly leaders = new Map<string, Promise<BucketLeader[]>>();
  private readonly partitions = new Map<string, Map<string, PartitionInfo>>();
  /** Schemas by `<table id>/<schema id>`. */
  private readonly schemas = new Map<string, Schema>();

  constructor(
    /** Runs requests on the active coordinator, retried while there is none (ConnectionCore.withCoordinator). */
    private readonly withCoordinator: <T>(task: (rpc: RpcConnection) => Promise<T>) => Promise<T>,
  ) {}

  /** The active coordinator, as the last metadata answer named it. */
  get coordinatorServer(): ServerNode | undefined {
    return this.coordinatorNode;
  }

  get tabletServers(): ServerNode[] {
    return [...this.tabletServerNodes.values()];
  }

  serverTag(nodeId: number): ServerTag | undefined {
    return this.tags.get(nodeId);
  }

  tabletServer(nodeId: number): ServerNode | undefined {
    return this.tabletServerNodes.get(nodeId);
  }

  /** Takes the nodes of a GetMetadata answer, received over `from`, as the current ones. */
  learnNodes(resp: MetadataResponse, from: RpcConnection): void {
    const via = from.address.slice(0, from.address.lastIndexOf(':'));
    const node = (n: PbServerNode): ServerNode => ({
      nodeId: n.nodeId,
      host: WILDCARD_HOSTS.has(n.host) ? via : n.host,
      port: n.port,
      ...(n.rack !== undefined ? { rack: n.rack } : {}),
    });
    if (resp.coordinatorServer) this.coordinatorNode = node(resp.coordinatorServer);
    if (resp.tabletServers.length > 0) {
      this.tabletServerNodes.clear();
      for (const n of resp.tabletServers) this.tabletServerNodes.set(n.nodeId, node(n));
      this.tags.clear();
      for (const t of resp.serverTags) if (SERVER_TAGS[t.serverTag]) this.tags.set(t.serverId, SERVER_TAGS[t.serverTag]);
    }
  }

  /** Asks the coordinator for the nodes again (a tablet server the client does not know of yet). */
  async refreshNodes(): Promise<void> {
    await this.getMetadata({});
  }

  async table(path: TablePath, refresh = false): Promise<TableInfo> {
    const key = tablePathString(path);
    let info = refresh ? undefined : this.tables.get(key);
    if (!info) {
      const resp = await this.getMetadata({ tablePath: [{ databaseName: path.database, tableName: path.table }] });
      const meta = resp.tableMetadata[0];
      if (!meta) throw new TributaryError('TABLE_NOT_EXIST', `table '${key}' does not exist`);
      const fetched = tableInfoFromJson(JSON.parse(meta.tableJson));
      if (fetched.partitionKeys.length === 0) this.leaders.set(leadersKey(fetched.tableId, undefined), Promise.resolve(meta.bucketMetadata.map(toBucketLeader)));
      this.tables.set(key, fetched);
      info = fetched;
    }
    return info;
  }

  /** Where each bucket of `table` (of partition `partitionId` of a partitioned table) lives, in bucket order. */
  bucketLeaders(table: TableInfo, partitionId: number | undefined): Promise<BucketLeader[]> {
    const key = leadersKey(table.tableId, partitionId);
    let known = this.leaders.get(key);
    if (!known) {
      known = this.fetchLeaders(table, partitionId);
      this.leaders.set(key, known);
      // A failed fetch is not remembered: the next use asks again.
      known.catch(() => {
        if (this.leaders.get(key) === known) this.leaders.delete(key);
      });
    }
    return known;
  }

  /** The node leading a bucket; NOT_LEADER_OR_FOLLOWER (retriable: the caller drops the leaders and asks again) while it has none. */
  async leaderOf(table: TableInfo, partitionId: number | undefined, bucket: number): Promise<number> {
    const leader = (await this.bucketLeaders(table, partitionId)).find((b) => b.bucket === bucket)?.leader ?? -1;
    if (leader < 0) throw new TributaryError('NOT_LEADER_OR_FOLLOWER', `bucket ${bucket} of '${tablePathString(table.path)}'${partitionId !== undefined ? ` (partition ${partitionId})` : ''} has no leader now`);
    return leader;
  }

  /** Forgets the bucket leaders of `table` (every partition): a request found one of them stale. */
  invalidateLeaders(table: TableInfo): void {
    const prefix = `${table.tableId}/`;
    for (const key of this.leaders.keys()) if (key.startsWith(prefix)) this.leaders.delete(key);
  }

  /**
   * Schema `schemaId` of `table`, as batches and KV values written with it name it. Schemas never
   * change under an id (a re-created table gets a new table id), so each is fetched once.
   */
  async schema(table: TableInfo, schemaId: number): Promise<Schema> {
    const known = this.cachedSchema(table, schemaId);
    if (known) return known;
    const resp = await this.withCoordinator((rpc) => rpc.request(ApiKeys.GetTableSchema, { tablePath: { databaseName: table.path.database, tableName: table.path.table }, schemaId }));
    const schema = schemaFromJson(JSON.parse(resp.schemaJson));
    this.schemas.set(`${table.tableId}/${schemaId}`, schema);
    return schema;
  }

  /** Schema `schemaId` of `table` when already fetched (or it is the table info's own); else undefined. */
  cachedSchema(table: TableInfo, schemaId: number): Schema | undefined {
    return schemaId === table.schemaId ? table.schema : this.schemas.get(`${table.tableId}/${schemaId}`);
  }

  /** The partition named `name` of `table`, or undefined when the server does not have it. */
  async partition(table: TableInfo, name: string, refresh = false): Promise<PartitionInfo | undefined> {
    const key = tablePathString(table.path);
    let byName = this.partitions.get(key);
    if (!byName || refresh || !byName.has(name)) {
      byName = new Map((await this.listPartitions(table.path)).map((p) => [p.partitionName, p]));
      this.partitions.set(key, byName);
    }
    return byName.get(name);
  }

  async listPartitions(path: TablePath): Promise<PartitionInfo[]> {
    const resp = await this.withCoordinator((rpc) => rpc.request(ApiKeys.ListPartitionInfos, { tablePath: { databaseName: path.database, tableName: path.table } }));
    return resp.partitionsInfo.map(toPartitionInfo);
  }

  /** The table info cached for `path`, if any, without asking the server. */
  cachedTable(path: TablePath): TableInfo | undefined {
    return this.tables.get(tablePathString(path));
  }

  invalidate(path: TablePath): void {
    const info = this.tables.get(tablePathString(path));
    if (info) this.invalidateLeaders(info);
    this.tables.delete(tablePathString(path));
    this.partitions.delete(tablePathString(path));
  }

  private async fetchLeaders(table: TableInfo, partitionId: number | undefined): Promise<BucketLeader[]> {
    if (partitionId === undefined) {
      const resp = await this.getMetadata({ tablePath: [{ databaseName: table.path.database, tableName: table.path.table }] });
      const meta = resp.tableMetadata[0];
      if (!meta || Number(meta.tableId) !== table.tableId) throw new TributaryError('TABLE_NOT_EXIST', `table '${tablePathString(table.path)}' (id ${table.tableId}) does not exist`);
      return meta.bucketMetadata.map(toBucketLeader);
    }
    const resp = await this.getMetadata({ partitionsId: [BigInt(partitionId)] });
    const meta = resp.partitionMetadata[0];
    if (!meta) throw new TributaryError('PARTITION_NOT_EXISTS', `partition ${partitionId} of '${tablePathString(table.path)}' does not exist`);
    return meta.bucketMetadata.map(toBucketLeader);
  }

  /** One GetMetadata to the coordinator; the nodes it names become the current ones. */
  private async getMetadata(init: { tablePath?: { databaseName: string; tableName: string }[]; partitionsId?: bigint[] }): Promise<MetadataResponse> {
    return this.withCoordinator(async (rpc) => {
      const resp = await rpc.request(ApiKeys.GetMetadata, init);
      this.learnNodes(resp, rpc);
      return resp;
    });
  }
}

function leadersKey(tableId: number, partitionId: number | undefined): string {
  return `${tableId}/${partitionId ?? '-'}`;
}

/** A server that lists no replicas (one node, `tributary start`) holds each bucket's leader only. */
function toBucketLeader(b: PbBucketMetadata): BucketLeader {
  const alone = b.leaderId >= 0 ? [b.leaderId] : [];
  return { bucket: b.bucketId, leader: b.leaderId, leaderEpoch: b.leaderEpoch, replicas: b.replicaId.length > 0 ? [...b.replicaId] : alone, isr: b.replicaId.length > 0 ? [...b.isr] : alone };
}
