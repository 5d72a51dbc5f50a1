/**
 * The client's view of cluster metadata: tables by path (with their info and bucket leaders) and
 * partitions by name. Entries are fetched on first use and refreshed when the server says the view
 * is stale (unknown table/bucket, missing partition).
 */
import { TributaryError } from '../common/errors.js';
import { type PartitionInfo, type TableInfo, type TablePath, tableInfoFromJson, tablePathString } from '../common/schema.js';
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

  invalidate(path: TablePath): void {
    this.tables.delete(tablePathString(path));
    this.partitions.delete(tablePathString(path));
  }
}
