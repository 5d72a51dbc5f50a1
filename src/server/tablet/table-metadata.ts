/**
 * What the tablet server needs to know of tables (TableMetadataSource): on one node the coordinator
 * in the same process answers; in a cluster, ClusterTables, what the server has been told. Each
 * NotifyLeaderAndIsr names the table (and partition) of its buckets, current schema included; the
 * older schemas (ids 0 to the current one: ADD COLUMN makes one each) are read from the coordinator
 * once, before the first replica of the table opens, since batches and KV values written with them
 * are read with no request to wait on. A schema never changes under its id.
 */
import type { PartitionInfo, Schema, TableInfo, TablePath } from '../../common/schema.js';

/** What the tablet server needs to know about tables. */
export interface TableMetadataSource {
  getTableInfoById(tableId: number): TableInfo | undefined;
  schemaById(tableId: number, schemaId: number): Schema | undefined;
  partitionById(partitionId: number): (PartitionInfo & { tableId: number }) | undefined;
}

/** Reads one schema of a table from the coordinator (GetTableSchema). */
export type SchemaFetcher = (table: TablePath, schemaId: number) => Promise<Schema>;

export class ClusterTables implements TableMetadataSource {
  private readonly tables = new Map<number, TableInfo>();
  private readonly partitions = new Map<number, PartitionInfo & { tableId: number }>();
  private readonly schemas = new Map<string, Schema>();

  constructor(private readonly fetchSchema: SchemaFetcher) {}

  /** Takes the table (and partition) a coordinator request names, with every schema it had. */
  async learn(table: TableInfo, partition?: PartitionInfo): Promise<void> {
    for (let id = 0; id < table.schemaId; id++) {
      const key = `${table.tableId}/${id}`;
      if (!this.schemas.has(key)) this.schemas.set(key, await this.fetchSchema(table.path, id));
    }
    this.schemas.set(`${table.tableId}/${table.schemaId}`, table.schema);
    const known = this.tables.get(table.tableId);
    if (!known || known.schemaId <= table.schemaId) this.tables.set(table.tableId, table);
    if (partition) this.partitions.set(partition.partitionId, { ...partition, tableId: table.tableId });
  }

  getTableInfoById(tableId: number): TableInfo | undefined {
    return this.tables.get(tableId);
  }

  schemaById(tableId: number, schemaId: number): Schema | undefined {
    return this.schemas.get(`${tableId}/${schemaId}`);
  }

  partitionById(partitionId: number): (PartitionInfo & { tableId: number }) | undefined {
    return this.partitions.get(partitionId);
  }
}
