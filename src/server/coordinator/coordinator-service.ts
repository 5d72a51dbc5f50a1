/**
 * The coordinator's RPC surface: turns protobuf requests into Coordinator calls and results back
 * into responses. No metadata logic lives here.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { TributaryError } from '../../common/errors.js';
import { type TableDescriptor, type TableInfo, type TablePath, tableInfoToJson, schemaToJson } from '../../common/schema.js';
import type { PbKeyValue, PbTablePath } from '../../rpc/gen/tributary_pb.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import type { RpcServer } from '../../rpc/server.js';
import type { PbBucketMetadataSchema, PbServerNodeSchema } from '../../rpc/gen/tributary_pb.js';
import type { Coordinator } from './coordinator.js';

function toPath(p: PbTablePath | undefined): TablePath {
  if (!p || !p.databaseName || !p.tableName) throw new TributaryError('INVALID_TABLE_EXCEPTION', 'request names no table (database and table are required)');
  return { database: p.databaseName, table: p.tableName };
}

function toSpec(kvs: PbKeyValue[]): Record<string, string> {
  return Object.fromEntries(kvs.map((kv) => [kv.key, kv.value]));
}

function parseJson<T>(text: string, what: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new TributaryError('INVALID_TABLE_EXCEPTION', `${what} is not valid JSON: ${(err as Error).message}`);
  }
}

function buckets(info: TableInfo, nodeId: number): MessageInitShape<typeof PbBucketMetadataSchema>[] {
  return Array.from({ length: info.bucketCount }, (_, b) => ({ bucketId: b, leaderId: nodeId, leaderEpoch: 0 }));
}

/** Registers the coordinator's APIs on `rpc`; `self` is this node as clients should reach it. */
export function registerCoordinatorService(rpc: RpcServer, coordinator: Coordinator, self: () => MessageInitShape<typeof PbServerNodeSchema>): void {
  rpc.register(ApiKeys.CreateDatabase, async (req) => {
    const descriptor = req.databaseJson ? parseJson<{ comment?: string }>(req.databaseJson, 'database_json') : {};
    await coordinator.createDatabase(req.databaseName, descriptor, req.ignoreIfExists);
    return {};
  });
  rpc.register(ApiKeys.DropDatabase, async (req) => {
    await coordinator.dropDatabase(req.databaseName, req.ignoreIfNotExists, req.cascade);
    return {};
  });
  rpc.register(ApiKeys.ListDatabases, async () => ({ databaseNames: coordinator.listDatabases() }));
  rpc.register(ApiKeys.DatabaseExists, async (req) => ({ exists: coordinator.databaseExists(req.databaseName) }));

  rpc.register(ApiKeys.CreateTable, async (req) => {
    const descriptor = parseJson<TableDescriptor>(req.tableJson, 'table_json');
    if (!descriptor || !Array.isArray(descriptor.columns)) throw new TributaryError('INVALID_TABLE_EXCEPTION', 'table_json must hold a "columns" array');
    const tableId = await coordinator.createTable(toPath(req.tablePath), descriptor, req.ignoreIfExists);
    return { tableId: BigInt(tableId) };
  });
  rpc.register(ApiKeys.DropTable, async (req) => {
    await coordinator.dropTable(toPath(req.tablePath), req.ignoreIfNotExists, req.purge);
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
    await coordinator.dropLakeTable(toPath(req.tablePath), req.ignoreIfNotExists);
    return {};
  });
  rpc.register(ApiKeys.AlterTable, async (req) => {
    const options = req.configChanges.map((c) => {
      if (c.opType !== 0 && c.opType !== 1) throw new TributaryError('INVALID_ALTER_TABLE_EXCEPTION', `unsupported alter operation ${c.opType}`);
      if (c.opType === 0 && c.configValue === undefined) throw new TributaryError('INVALID_ALTER_TABLE_EXCEPTION', `SET of '${c.configKey}' needs a value`);
      return { key: c.configKey, ...(c.opType === 0 ? { value: c.configValue } : {}) };
    });
    const addColumns = req.addColumns.map((c) => ({ name: c.columnName, type: c.dataType, nullable: !c.notNull, ...(c.comment !== undefined ? { comment: c.comment } : {}) }));
    await coordinator.alterTable(toPath(req.tablePath), { options, addColumns }, req.ignoreIfNotExists);
    return {};
  });
  rpc.register(ApiKeys.GetTableInfo, async (req) => {
    const info = coordinator.getTableInfo(toPath(req.tablePath));
    return {
      tableId: BigInt(info.tableId),
      schemaId: info.schemaId,
      tableJson: JSON.stringify(tableInfoToJson(info)),
      createdTime: BigInt(info.createdTime),
      modifiedTime: BigInt(info.modifiedTime),
    };
  });
  rpc.register(ApiKeys.GetTableSchema, async (req) => {
    const { schemaId, schema } = coordinator.getSchema(toPath(req.tablePath), req.schemaId);
    return { schemaId, schemaJson: JSON.stringify(schemaToJson(schema)) };
  });
  rpc.register(ApiKeys.ListTables, async (req) => ({ tableNames: coordinator.listTables(req.databaseName) }));
  rpc.register(ApiKeys.TableExists, async (req) => ({ exists: coordinator.tableExists(toPath(req.tablePath)) }));

  rpc.register(ApiKeys.ListPartitionInfos, async (req) => ({
    partitionsInfo: coordinator.listPartitions(toPath(req.tablePath), toSpec(req.partialSpec)).map((p) => ({
      partitionId: BigInt(p.partitionId),
      partitionName: p.partitionName,
      spec: Object.entries(p.spec).map(([key, value]) => ({ key, value })),
    })),
  }));
  rpc.register(ApiKeys.CreatePartition, async (req) => ({
    partitionId: BigInt(await coordinator.createPartition(toPath(req.tablePath), toSpec(req.partitionSpec), req.ignoreIfExists)),
  }));
  rpc.register(ApiKeys.DropPartition, async (req) => {
    await coordinator.dropPartition(toPath(req.tablePath), toSpec(req.partitionSpec), req.ignoreIfNotExists);
    return {};
  });

  rpc.register(ApiKeys.GetMetadata, async (req) => {
    const node = self();
    const nodeId = node.nodeId ?? 0;
    const tableMetadata = req.tablePath.map((p) => {
      const info = coordinator.getTableInfo(toPath(p));
      return {
        tablePath: p,
        tableId: BigInt(info.tableId),
        schemaId: info.schemaId,
        tableJson: JSON.stringify(tableInfoToJson(info)),
        bucketMetadata: buckets(info, nodeId),
        createdTime: BigInt(info.createdTime),
        modifiedTime: BigInt(info.modifiedTime),
      };
    });
    const partitionMetadata = req.partitionsId.map((id) => {
      const p = coordinator.partitionById(Number(id));
      const info = p && coordinator.getTableInfoById(p.tableId);
      if (!p || !info) throw new TributaryError('PARTITION_NOT_EXISTS', `partition ${id} does not exist`);
      return { tableId: BigInt(p.tableId), partitionName: p.partitionName, partitionId: id, bucketMetadata: buckets(info, nodeId) };
    });
    return { coordinatorServer: node, tabletServers: [node], tableMetadata, partitionMetadata };
  });

  rpc.register(ApiKeys.InitWriter, async () => ({ writerId: await coordinator.allocateWriterId() }));
}
