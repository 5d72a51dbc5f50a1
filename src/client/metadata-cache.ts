/**
 * The client's view of cluster metadata: tables by path (with their info and bucket leaders),
 * partitions by name and table schemas by id. Entries are fetched on first use and refreshed when
 * the server says the view is stale (unknown table/bucket, missing partition).
 */
import { TributaryError } from '../common/errors.js';
import { type PartitionInfo, type Schema, schemaFromJson, type TableInfo, type TablePath, tableInfoFromJson, tablePathString } from '../common/schema.js';
import { ApiKeys } from '../rpc/api-keys.js';
import type { RpcConnection } from '../rpc/connection.js';
import { toPartitionInfo } from './responses.js';

export interface ServerNode {
  nodeId: number;
  host: string;
  port: number;
}

export class MetadataCache {
  private readonly tables = new Map<string, TableInfo>();
  private readonly partitions = new Map<string, Map<string, PartitionInfo>>();
  /** Schemas by `<table id>/<schema id>`. */
  private readonly schemas = new Map<string, Schema>();

  constructor(private readonly coordinator: () => Promise<RpcConnection>) {}

  async table(path: TablePath, refresh = false): Promise<TableInfo> {
    const key = tablePathString(path);
    let info = refresh ? undefined : this.tables.get(key);
    if (!info) {
      const conn = await this.coordinator();
      const resp = await conn.request(ApiKeys.GetMetadata, { tablePath: [{ databaseName: path.database, tableName: path.table }] });
      const meta = resp.tableMetadata[0];
      if (!meta) throw new TributaryError('TABLE_NOT_EXIST', `table '${key}' does not exist`);
      info = tableInfoFromJson(JSON.parse(meta.tableJson));
      this.tables.set(key, info);
    }
    return info;
  }

  /**
   * Schema `schemaId` of `table`, as batches and KV values written with it name it. Schemas never
   * change under an id (a re-created table gets a new table id), so each is fetched once.
   */
  async schema(table: TableInfo, schemaId: number): Promise<Schema> {
    const known = this.cachedSchema(table, schemaId);
    if (known) return known;
    const conn = await this.coordinator();
    const resp = await conn.request(ApiKeys.GetTableSchema, { tablePath: { databaseName: table.path.database, tableName: table.path.table }, schemaId });
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
    const conn = await this.coordinator();
    const resp = await conn.request(ApiKeys.ListPartitionInfos, { tablePath: { databaseName: path.database, tableName: path.table } });
    return resp.partitionsInfo.map(toPartitionInfo);
  }

  /** The table info cached for `path`, if any, without asking the server. */
  cachedTable(path: TablePath): TableInfo | undefined {
    return this.tables.get(tablePathString(path));
  }

  invalidate(path: TablePath): void {
    this.tables.delete(tablePathString(path));
    this.partitions.delete(tablePathString(path));
  }
}
