/**
 * The coordinator's RPC surface: turns protobuf requests into Coordinator calls and results back
 * into responses. No metadata logic lives here.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { TributaryError } from '../../common/errors.js';
import { type TableInfo, tableDescriptorFromJson, tableInfoToJson, schemaToJson } from '../../common/schema.js';
import type { PbKeyValue } from '../../rpc/gen/tributary_pb.js';
import { type Api, ApiKeys } from '../../rpc/api-keys.js';
import { codeOf, SERVER_TAGS, type ServerTag } from '../../rpc/cluster-admin.js';
import { databaseNameOf, fieldError, idOf, jsonOf, tablePathOf } from '../../rpc/request-fields.js';
import type { ApiRegistrar } from '../../rpc/server.js';
import type { PbBucketMetadataSchema, PbServerNodeSchema } from '../../rpc/gen/tributary_pb.js';
import type { Coordinator } from './coordinator.js';

/** A partition spec: every key named, none twice. */
function toSpec(api: Api, field: string, kvs: PbKeyValue[]): Record<string, string> {
  const spec: Record<string, string> = {};
  kvs.forEach((kv, i) => {
    if (!kv.key) throw fieldError(api, `${field}[${i}].key`, 'is required', 'PARTITION_SPEC_INVALID_EXCEPTION');
    if (Object.hasOwn(spec, kv.key)) throw fieldError(api, `${field}[${i}].key`, `'${kv.key}' is given twice`, 'PARTITION_SPEC_INVALID_EXCEPTION');
    spec[kv.key] = kv.value;
  });
  return spec;
}

type ServerNode = MessageInitShape<typeof PbServerNodeSchema>;

/** What GetMetadata tells besides the tables: the tablet servers (and their tags), and each bucket's leader, replicas and ISR. */
export interface ClusterView {
  tabletServers(): ServerNode[];
  serverTags?(): { serverId: number; serverTag: ServerTag }[];
  bucketMetadata(table: TableInfo, partitionId?: number): MessageInitShape<typeof PbBucketMetadataSchema>[];
}

/** The one-process node: it is the only tablet server, and every bucket's one replica, leader at epoch 0. */
function singleNode(self: () => ServerNode): ClusterView {
  return {
    tabletServers: () => [self()],
    bucketMetadata: (table) => {
      const nodeId = self().nodeId ?? 0;
      return Array.from({ length: table.bucketCount }, (_, b) => ({ bucketId: b, leaderId: nodeId, leaderEpoch: 0, replicaId: [nodeId], isr: [nodeId] }));
    },
  };
}

/**
 * Registers the coordinator's APIs on `rpc`; `self` is this node as clients should reach it, and
 * `cluster` the tablet servers it answers GetMetadata with (by default this node alone).
 */
export function registerCoordinatorService(rpc: ApiRegistrar, coordinator: Coordinator, self: () => ServerNode, cluster: ClusterView = singleNode(self)): void {
  rpc.register(ApiKeys.CreateDatabase, async (req) => {
    const api = ApiKeys.CreateDatabase;
    const name = databaseNameOf(api, req.databaseName);
    const descriptor = req.databaseJson ? jsonOf(api, 'database_json', req.databaseJson, 'INVALID_DATABASE_EXCEPTION') : {};
    if (descriptor === null || typeof descriptor !== 'object' || Array.isArray(descriptor)) throw fieldError(api, 'database_json', 'must be a JSON object', 'INVALID_DATABASE_EXCEPTION');
    const { comment } = descriptor as { comment?: unknown };
    if (comment !== undefined && typeof comment !== 'string') throw fieldError(api, 'database_json.comment', 'must be a string', 'INVALID_DATABASE_EXCEPTION');
    await coordinator.createDatabase(name, comment !== undefined ? { comment } : {}, req.ignoreIfExists);
    return {};
  });
  rpc.register(ApiKeys.DropDatabase, async (req) => {
    await coordinator.dropDatabase(databaseNameOf(ApiKeys.DropDatabase, req.databaseName), req.ignoreIfNotExists, req.cascade);
    return {};
  });
  rpc.register(ApiKeys.ListDatabases, async () => ({ databaseNames: coordinator.listDatabases() }));
  rpc.register(ApiKeys.DatabaseExists, async (req) => ({ exists: coordinator.databaseExists(databaseNameOf(ApiKeys.DatabaseExists, req.databaseName)) }));

  rpc.register(ApiKeys.CreateTable, async (req) => {
    const api = ApiKeys.CreateTable;
    const path = tablePathOf(api, req.tablePath);
    if (!req.tableJson) throw fieldError(api, 'table_json', 'is required', 'INVALID_TABLE_EXCEPTION');
    const descriptor = tableDescriptorFromJson(jsonOf(api, 'table_json', req.tableJson, 'INVALID_TABLE_EXCEPTION'), `${api.name}: table_json`);
    const tableId = await coordinator.createTable(path, descriptor, req.ignoreIfExists, req.creationToken);
    return { tableId: BigInt(tableId) };
  });
  rpc.register(ApiKeys.DropTable, async (req) => {
    await coordinator.dropTable(tablePathOf(ApiKeys.DropTable, req.tablePath), req.ignoreIfNotExists, req.purge);
    return {};
  });
  rpc.register(ApiKeys.ListLakeTables, async () => {
    const { warehouse, tables } = await coordinator.listLakeTables();
    return {
      warehouse,
      tables: tables.map((t) => ({
        tablePath: { databaseName: t.path.database, tableName: t.path.table },
        ...(t.tableId !== undefined ? { tableId: BigInt(t.tableId) } : {}),
        owned: t.owned,
        location: t.location,
      })),
    };
  });
  rpc.register(ApiKeys.DropLakeTable, async (req) => {
    await coordinator.dropLakeTable(tablePathOf(ApiKeys.DropLakeTable, req.tablePath), req.ignoreIfNotExists);
    return {};
  });
  rpc.register(ApiKeys.AlterTable, async (req) => {
    const api = ApiKeys.AlterTable;
    const path = tablePathOf(api, req.tablePath);
    const options = req.configChanges.map((c, i) => {
      const field = `config_changes[${i}]`;
      if (!c.configKey) throw fieldError(api, `${field}.config_key`, 'is required', 'INVALID_ALTER_TABLE_EXCEPTION');
      if (c.opType !== 0 && c.opType !== 1) throw fieldError(api, `${field}.op_type`, `${c.opType} is not an alter operation (0 SET, 1 DELETE)`, 'INVALID_ALTER_TABLE_EXCEPTION');
      if (c.opType === 0 && c.configValue === undefined) throw fieldError(api, `${field}.config_value`, `is required to SET '${c.configKey}'`, 'INVALID_ALTER_TABLE_EXCEPTION');
      return { key: c.configKey, ...(c.opType === 0 ? { value: c.configValue } : {}) };
    });
    const addColumns = req.addColumns.map((c, i) => {
      if (!c.dataType) throw fieldError(api, `add_columns[${i}].data_type`, 'is required', 'INVALID_TYPE');
      return { name: c.columnName, type: c.dataType, nullable: !c.notNull, ...(c.comment !== undefined ? { comment: c.comment } : {}) };
    });
    await coordinator.alterTable(path, { options, addColumns }, req.ignoreIfNotExists);
    return {};
  });
  rpc.register(ApiKeys.GetTableInfo, async (req) => {
    const info = coordinator.getTableInfo(tablePathOf(ApiKeys.GetTableInfo, req.tablePath));
    return {
      tableId: BigInt(info.tableId),
      schemaId: info.schemaId,
      tableJson: JSON.stringify(tableInfoToJson(info)),
      createdTime: BigInt(info.createdTime),
      modifiedTime: BigInt(info.modifiedTime),
    };
  });
  rpc.register(ApiKeys.GetTableSchema, async (req) => {
    const { schemaId, schema } = coordinator.getSchema(tablePathOf(ApiKeys.GetTableSchema, req.tablePath), req.schemaId);
    return { schemaId, schemaJson: JSON.stringify(schemaToJson(schema)) };
  });
  rpc.register(ApiKeys.ListTables, async (req) => ({ tableNames: coordinator.listTables(databaseNameOf(ApiKeys.ListTables, req.databaseName)) }));
  rpc.register(ApiKeys.TableExists, async (req) => ({ exists: coordinator.tableExists(tablePathOf(ApiKeys.TableExists, req.tablePath)) }));

  rpc.register(ApiKeys.ListPartitionInfos, async (req) => ({
    partitionsInfo: coordinator.listPartitions(tablePathOf(ApiKeys.ListPartitionInfos, req.tablePath), toSpec(ApiKeys.ListPartitionInfos, 'partial_spec', req.partialSpec)).map((p) => ({
      partitionId: BigInt(p.partitionId),
      partitionName: p.partitionName,
      spec: Object.entries(p.spec).map(([key, value]) => ({ key, value })),
    })),
  }));
  rpc.register(ApiKeys.CreatePartition, async (req) => ({
    partitionId: BigInt(await coordinator.createPartition(tablePathOf(ApiKeys.CreatePartition, req.tablePath), toSpec(ApiKeys.CreatePartition, 'partition_spec', req.partitionSpec), req.ignoreIfExists, req.creationToken)),
  }));
  rpc.register(ApiKeys.DropPartition, async (req) => {
    await coordinator.dropPartition(tablePathOf(ApiKeys.DropPartition, req.tablePath), toSpec(ApiKeys.DropPartition, 'partition_spec', req.partitionSpec), req.ignoreIfNotExists);
    return {};
  });

  rpc.register(ApiKeys.GetMetadata, async (req) => {
    const tableMetadata = req.tablePath.map((p, i) => {
      const info = coordinator.getTableInfo(tablePathOf(ApiKeys.GetMetadata, p, `table_path[${i}]`));
      return {
        tablePath: p,
        tableId: BigInt(info.tableId),
        schemaId: info.schemaId,
        tableJson: JSON.stringify(tableInfoToJson(info)),
        bucketMetadata: cluster.bucketMetadata(info),
        createdTime: BigInt(info.createdTime),
        modifiedTime: BigInt(info.modifiedTime),
      };
    });
    const partitionMetadata = req.partitionsId.map((id, i) => {
      const p = coordinator.partitionById(idOf(ApiKeys.GetMetadata, `partitions_id[${i}]`, id));
      const info = p && coordinator.getTableInfoById(p.tableId);
      if (!p || !info) throw new TributaryError('PARTITION_NOT_EXISTS', `partition ${id} does not exist`);
      return { tableId: BigInt(p.tableId), partitionName: p.partitionName, partitionId: id, bucketMetadata: cluster.bucketMetadata(info, p.partitionId) };
    });
    const serverTags = (cluster.serverTags?.() ?? []).map((t) => ({ serverId: t.serverId, serverTag: codeOf(SERVER_TAGS, t.serverTag, 'server tag') }));
    return { coordinatorServer: self(), tabletServers: cluster.tabletServers(), tableMetadata, partitionMetadata, serverTags };
  });

  rpc.register(ApiKeys.InitWriter, async () => ({ writerId: await coordinator.allocateWriterId() }));

  // Answered from the registered handles, the same on one node and in a cluster.
  rpc.register(ApiKeys.GetLatestKvSnapshots, async (req) => {
    const table = coordinator.getTableInfo(tablePathOf(ApiKeys.GetLatestKvSnapshots, req.tablePath));
    if (!table.schema.primaryKey) throw new TributaryError('NON_PRIMARY_KEY_TABLE_EXCEPTION', `table '${table.path.database}.${table.path.table}' has no primary key`);
    if (table.partitionKeys.length > 0 && req.partitionName === undefined) {
      throw new TributaryError('PARTITION_NOT_EXISTS', `table '${table.path.database}.${table.path.table}' is partitioned: the request must name a partition`);
    }
    const partition = req.partitionName === undefined ? undefined : coordinator.listPartitions(table.path).find((p) => p.partitionName === req.partitionName);
    if (req.partitionName !== undefined && !partition) throw new TributaryError('PARTITION_NOT_EXISTS', `partition '${req.partitionName}' does not exist`);
    const partitionId = partition?.partitionId;
    return {
      tableId: BigInt(table.tableId),
      ...(partitionId !== undefined ? { partitionId: BigInt(partitionId) } : {}),
      latestSnapshots: Array.from({ length: table.bucketCount }, (_, bucketId) => {
        const latest = coordinator.kvSnapshots.latest({ tableId: table.tableId, ...(partitionId !== undefined ? { partitionId } : {}), bucket: bucketId });
        return latest ? { bucketId, snapshotId: BigInt(latest.snapshotId), logOffset: latest.logOffset, rowCount: BigInt(latest.rowCount) } : { bucketId };
      }),
    };
  });
}
