/**
 * The catalog side of the Iceberg lake (LakeCatalog, lake-format.ts): creates the Iceberg table of a lake-enabled table and
 * keeps its schema in step with the table's (ADD COLUMN), in the filesystem catalog under the
 * warehouse; lists the lake tables and deletes one (DROP TABLE … PURGE, DROP LAKE TABLE). Table options `iceberg.<key>` become lake table properties `<key>`. The lake table records which Tributary table it belongs to (`tributary.table-id`
 * property), so a re-created table of the same name is not mixed into another table's history.
 */
import { TributaryError } from '../../common/errors.js';
import { type TableInfo, type TablePath, tablePathString } from '../../common/schema.js';
import { type LakeCatalog, type LakeTableEntry, TABLE_ID_PROPERTY } from '../lake-format.js';
import { FileSystemCatalog } from './catalog.js';
import { manifestMergePolicy } from './manifest-merge.js';
import { rowGroupRowLimit } from './parquet.js';
import { currentSchema, newTableMetadata } from './table-metadata.js';
import { evolveLakeSchema, lakePartitionSpec, lakeSortOrder, newLakeSchema } from './table-shape.js';
/** Table options with this prefix become lake table properties, prefix stripped (as in Fluss). */
const LAKE_PROPERTY_PREFIX = 'iceberg.';

/** The properties the lake table of `info` must have. */
function lakeProperties(info: TableInfo): Record<string, string> {
  const props: Record<string, string> = { [TABLE_ID_PROPERTY]: String(info.tableId), 'write.format.default': 'parquet', 'write.parquet.compression-codec': 'zstd' };
  for (const [k, v] of Object.entries(info.properties)) if (k.startsWith(LAKE_PROPERTY_PREFIX)) props[k.slice(LAKE_PROPERTY_PREFIX.length)] = v;
  return props;
}

export class IcebergLakeCatalog implements LakeCatalog {
  readonly catalog: FileSystemCatalog;

  constructor(warehouse: string) {
    this.catalog = new FileSystemCatalog(warehouse);
  }

  get warehouse(): string {
    return this.catalog.warehouse;
  }

  async listTables(): Promise<LakeTableEntry[]> {
    const out: LakeTableEntry[] = [];
    for (const database of await this.catalog.listNamespaces()) {
      for (const table of await this.catalog.listTables(database)) {
        const entry = await this.describeTable({ database, table });
        if (entry) out.push(entry); // else dropped meanwhile
      }
    }
    return out;
  }

  async describeTable(path: TablePath): Promise<LakeTableEntry | undefined> {
    let owner: string | undefined;
    try {
      owner = (await this.catalog.loadTable(path.database, path.table)).metadata.properties[TABLE_ID_PROPERTY];
    } catch (err) {
      if (err instanceof TributaryError && err.errorName === 'TABLE_NOT_EXIST') return undefined;
      throw err;
    }
    const location = this.catalog.tableLocation(path.database, path.table);
    return { path, location, ...(owner !== undefined && /^\d+$/.test(owner) ? { tableId: Number(owner) } : {}) };
  }

  async dropTable(path: TablePath): Promise<void> {
    await this.catalog.dropTable(path.database, path.table, { purge: true });
  }

  async syncTable(info: TableInfo): Promise<void> {
    const { database, table } = info.path;
    const wanted = lakeProperties(info);
    // Checked here, not at the first tiering round, so a bad option never reaches the lake table.
    manifestMergePolicy(wanted, tablePathString(info.path));
    rowGroupRowLimit(wanted, tablePathString(info.path));
    if (!(await this.catalog.tableExists(database, table))) {
      const schema = newLakeSchema(info);
      const metadata = newTableMetadata({
        location: this.catalog.tableLocation(database, table),
        schema,
        spec: lakePartitionSpec(info, schema),
        sortOrder: lakeSortOrder(schema),
        properties: wanted,
      });
      try {
        await this.catalog.createTable(database, table, metadata);
        return;
      } catch (err) {
        if ((err as TributaryError).errorName !== 'TABLE_ALREADY_EXIST') throw err;
        // Created concurrently: fall through and check it like an existing one.
      }
    }
    const loaded = await this.catalog.loadTable(database, table);
    const owner = loaded.metadata.properties[TABLE_ID_PROPERTY];
    if (owner !== String(info.tableId)) {
      throw new TributaryError(
        'LAKE_TABLE_ALREADY_EXIST',
        `the lake already holds a table ${tablePathString(info.path)} of another table (id ${owner}), left by a plain DROP TABLE: remove it with DROP LAKE TABLE ${tablePathString(info.path)} (its history goes with it), or move it out of the warehouse`,
      );
    }
    const evolved = evolveLakeSchema(currentSchema(loaded.metadata), info);
    const propertiesChanged = Object.entries(wanted).some(([k, v]) => loaded.metadata.properties[k] !== v);
    if (!evolved && !propertiesChanged) return;
    await this.catalog.commit(database, table, loaded.version, {
      ...loaded.metadata,
      properties: { ...loaded.metadata.properties, ...wanted },
      ...(evolved
        ? {
            schemas: [...loaded.metadata.schemas, evolved],
            currentSchemaId: evolved['schema-id'],
            lastColumnId: Math.max(loaded.metadata.lastColumnId, ...evolved.fields.map((f) => f.id)),
          }
        : {}),
    });
  }
}
