/**
 * The API table: one entry per RPC with its Fluss api key, its request and response messages
 * (proto/tributary.proto) and the versions this build speaks. The server answers ApiVersions from
 * it and the client picks, per API, the highest version both sides support.
 *
 * Entries carry the generated schemas, so `connection.request(ApiKeys.ProduceLog, {...})` checks
 * the request fields and types the response.
 */
import type { DescMessage, MessageInitShape, MessageShape } from '@bufbuild/protobuf';
import * as pb from './gen/tributary_pb.js';

export interface Api<Req extends DescMessage = DescMessage, Res extends DescMessage = DescMessage> {
  /** Fluss's api key (the int16 in the request frame). */
  readonly key: number;
  readonly name: string;
  readonly request: Req;
  readonly response: Res;
  readonly minVersion: number;
  readonly maxVersion: number;
}

export type RequestInit<A extends Api> = MessageInitShape<A['request']>;
export type RequestMessage<A extends Api> = MessageShape<A['request']>;
export type ResponseInit<A extends Api> = MessageInitShape<A['response']>;
export type ResponseMessage<A extends Api> = MessageShape<A['response']>;

function api<Req extends DescMessage, Res extends DescMessage>(key: number, name: string, request: Req, response: Res): Api<Req, Res> {
  return { key, name, request, response, minVersion: 0, maxVersion: 0 };
}

export const ApiKeys = {
  ApiVersions: api(1000, 'ApiVersions', pb.ApiVersionsRequestSchema, pb.ApiVersionsResponseSchema),
  CreateDatabase: api(1001, 'CreateDatabase', pb.CreateDatabaseRequestSchema, pb.CreateDatabaseResponseSchema),
  DropDatabase: api(1002, 'DropDatabase', pb.DropDatabaseRequestSchema, pb.DropDatabaseResponseSchema),
  ListDatabases: api(1003, 'ListDatabases', pb.ListDatabasesRequestSchema, pb.ListDatabasesResponseSchema),
  DatabaseExists: api(1004, 'DatabaseExists', pb.DatabaseExistsRequestSchema, pb.DatabaseExistsResponseSchema),
  CreateTable: api(1005, 'CreateTable', pb.CreateTableRequestSchema, pb.CreateTableResponseSchema),
  DropTable: api(1006, 'DropTable', pb.DropTableRequestSchema, pb.DropTableResponseSchema),
  GetTableInfo: api(1007, 'GetTableInfo', pb.GetTableInfoRequestSchema, pb.GetTableInfoResponseSchema),
  ListTables: api(1008, 'ListTables', pb.ListTablesRequestSchema, pb.ListTablesResponseSchema),
  ListPartitionInfos: api(1009, 'ListPartitionInfos', pb.ListPartitionInfosRequestSchema, pb.ListPartitionInfosResponseSchema),
  TableExists: api(1010, 'TableExists', pb.TableExistsRequestSchema, pb.TableExistsResponseSchema),
  GetTableSchema: api(1011, 'GetTableSchema', pb.GetTableSchemaRequestSchema, pb.GetTableSchemaResponseSchema),
  GetMetadata: api(1012, 'GetMetadata', pb.MetadataRequestSchema, pb.MetadataResponseSchema),
  ProduceLog: api(1014, 'ProduceLog', pb.ProduceLogRequestSchema, pb.ProduceLogResponseSchema),
  FetchLog: api(1015, 'FetchLog', pb.FetchLogRequestSchema, pb.FetchLogResponseSchema),
  ListOffsets: api(1021, 'ListOffsets', pb.ListOffsetsRequestSchema, pb.ListOffsetsResponseSchema),
  InitWriter: api(1026, 'InitWriter', pb.InitWriterRequestSchema, pb.InitWriterResponseSchema),
  LimitScan: api(1033, 'LimitScan', pb.LimitScanRequestSchema, pb.LimitScanResponseSchema),
  CreatePartition: api(1036, 'CreatePartition', pb.CreatePartitionRequestSchema, pb.CreatePartitionResponseSchema),
  DropPartition: api(1037, 'DropPartition', pb.DropPartitionRequestSchema, pb.DropPartitionResponseSchema),
  AlterTable: api(1044, 'AlterTable', pb.AlterTableRequestSchema, pb.AlterTableResponseSchema),
  PutKv: api(1016, 'PutKv', pb.PutKvRequestSchema, pb.PutKvResponseSchema),
  Lookup: api(1017, 'Lookup', pb.LookupRequestSchema, pb.LookupResponseSchema),
  GetLatestKvSnapshots: api(1023, 'GetLatestKvSnapshots', pb.GetLatestKvSnapshotsRequestSchema, pb.GetLatestKvSnapshotsResponseSchema),
  PrefixLookup: api(1034, 'PrefixLookup', pb.PrefixLookupRequestSchema, pb.PrefixLookupResponseSchema),
  GetTableStats: api(1059, 'GetTableStats', pb.GetTableStatsRequestSchema, pb.GetTableStatsResponseSchema),
  ScanKv: api(1061, 'ScanKv', pb.ScanKvRequestSchema, pb.ScanKvResponseSchema),
  CommitLakeTableSnapshot: api(1030, 'CommitLakeTableSnapshot', pb.CommitLakeTableSnapshotRequestSchema, pb.CommitLakeTableSnapshotResponseSchema),
  GetLakeSnapshot: api(1032, 'GetLakeSnapshot', pb.GetLakeSnapshotRequestSchema, pb.GetLakeSnapshotResponseSchema),
  LakeTieringHeartbeat: api(1042, 'LakeTieringHeartbeat', pb.LakeTieringHeartbeatRequestSchema, pb.LakeTieringHeartbeatResponseSchema),
  // Cluster: coordinator -> tablet servers (carry the coordinator epoch) and back.
  UpdateMetadata: api(1013, 'UpdateMetadata', pb.UpdateMetadataRequestSchema, pb.UpdateMetadataResponseSchema),
  NotifyLeaderAndIsr: api(1018, 'NotifyLeaderAndIsr', pb.NotifyLeaderAndIsrRequestSchema, pb.NotifyLeaderAndIsrResponseSchema),
  StopReplica: api(1019, 'StopReplica', pb.StopReplicaRequestSchema, pb.StopReplicaResponseSchema),
  AdjustIsr: api(1020, 'AdjustIsr', pb.AdjustIsrRequestSchema, pb.AdjustIsrResponseSchema),
  NotifyLakeTableOffset: api(1031, 'NotifyLakeTableOffset', pb.NotifyLakeTableOffsetRequestSchema, pb.NotifyLakeTableOffsetResponseSchema),
  /** A bucket leader registers a complete KV snapshot with the active coordinator. */
  CommitKvSnapshot: api(1022, 'CommitKvSnapshot', pb.CommitKvSnapshotRequestSchema, pb.CommitKvSnapshotResponseSchema),
  /** A bucket leader registers its remote log manifest (segments and manifest uploaded) with the active coordinator. */
  CommitRemoteLogManifest: api(1027, 'CommitRemoteLogManifest', pb.CommitRemoteLogManifestRequestSchema, pb.CommitRemoteLogManifestResponseSchema),
  /** The coordinator tells a bucket's replicas its committed remote log offsets. */
  NotifyRemoteLogOffsets: api(1028, 'NotifyRemoteLogOffsets', pb.NotifyRemoteLogOffsetsRequestSchema, pb.NotifyRemoteLogOffsetsResponseSchema),
  ControlledShutdown: api(1043, 'ControlledShutdown', pb.ControlledShutdownRequestSchema, pb.ControlledShutdownResponseSchema),
  // Cluster administration: server tags and rebalance (served by the active coordinator of a cluster).
  AddServerTag: api(1047, 'AddServerTag', pb.AddServerTagRequestSchema, pb.AddServerTagResponseSchema),
  RemoveServerTag: api(1048, 'RemoveServerTag', pb.RemoveServerTagRequestSchema, pb.RemoveServerTagResponseSchema),
  Rebalance: api(1049, 'Rebalance', pb.RebalanceRequestSchema, pb.RebalanceResponseSchema),
  ListRebalanceProgress: api(1050, 'ListRebalanceProgress', pb.ListRebalanceProgressRequestSchema, pb.ListRebalanceProgressResponseSchema),
  CancelRebalance: api(1051, 'CancelRebalance', pb.CancelRebalanceRequestSchema, pb.CancelRebalanceResponseSchema),
  /** Tributary's own (Kafka's OffsetsForLeaderEpoch): where a follower's epoch ends in the leader's log. */
  OffsetForLeaderEpoch: api(2005, 'OffsetForLeaderEpoch', pb.OffsetForLeaderEpochRequestSchema, pb.OffsetForLeaderEpochResponseSchema),
  /** Tributary's own: where tiering of a table stands (state, lake snapshot, lag per bucket). */
  GetLakeTieringStatus: api(2002, 'GetLakeTieringStatus', pb.GetLakeTieringStatusRequestSchema, pb.GetLakeTieringStatusResponseSchema),
  /** Tributary's own: the lake tables of the warehouse, and whether a live table owns each. */
  ListLakeTables: api(2003, 'ListLakeTables', pb.ListLakeTablesRequestSchema, pb.ListLakeTablesResponseSchema),
  /** Tributary's own: delete a lake table no live table owns. */
  DropLakeTable: api(2004, 'DropLakeTable', pb.DropLakeTableRequestSchema, pb.DropLakeTableResponseSchema),
  /** Tributary's own: the Kafka consumer groups the server's Kafka listener coordinates, with their lag. */
  ListConsumerGroups: api(2008, 'ListConsumerGroups', pb.ListConsumerGroupsRequestSchema, pb.ListConsumerGroupsResponseSchema),
  /** Tributary's own: take KV snapshots of a table now. */
  TriggerKvSnapshot: api(2001, 'TriggerKvSnapshot', pb.TriggerKvSnapshotRequestSchema, pb.TriggerKvSnapshotResponseSchema),
} as const;

const byKey = new Map<number, Api>(Object.values(ApiKeys).map((a) => [a.key, a]));

export function apiByKey(key: number): Api | undefined {
  return byKey.get(key);
}

export function describeApi(a: Api): string {
  return `${a.name} (${a.key})`;
}

export function versionRange(min: number, max: number): string {
  return min === max ? `version ${min}` : `versions ${min}..${max}`;
}
