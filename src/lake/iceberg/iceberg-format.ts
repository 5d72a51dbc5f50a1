/**
 * Apache Iceberg as a lake format (lake-format.ts): the filesystem catalog of a warehouse
 * (catalog.ts), its tables as Tributary sees them, tiering writes (tiering-writer.ts) and commits
 * (snapshot-producer.ts), maintenance (maintenance.ts) and the Iceberg REST catalog's documents.
 */
import type * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import { type TableInfo, type TablePath, tablePathString } from '../../common/schema.js';
import {
  type ExpireOptions,
  type ExpiredSnapshots,
  type LakeColumn,
  type LakeCompactedPartition,
  type LakeCompactionOptions,
  type LakeFormat,
  type LakeFormatOptions,
  type LakeReadPlan,
  type LakeRestCatalog,
  type LakeRestTable,
  type LakeSnapshotReader,
  type LakeSqlEngine,
  type LakeStorage,
  type LakeTable,
  type LakeWriter,
  type LakeWriteResult,
  TABLE_ID_PROPERTY,
  type TieringFence,
} from '../lake-format.js';
import { fileIoProperties } from '../../storage/stores.js';
import { latestTieredSnapshot, type TieredSnapshot } from '../tiered-offsets.js';
import type { FileSystemCatalog, LoadedTable } from './catalog.js';
import { FileContent } from './data-file.js';
import { DataFileWriterPool } from './data-file-writer.js';
import { snapshotReader } from './bucket-reader.js';
import { compactLakeTable } from './compaction.js';
import { IcebergLakeCatalog } from './iceberg-catalog.js';
import { expireSnapshots, removeOrphanFiles } from './maintenance.js';
import { lakeFilesSql, lakeSnapshotsSql, schemaOf, snapshotAsOf } from './duckdb-sql.js';
import { readPlanOf } from './read-plan.js';
import { planScan, readMetadataFile } from './scan.js';
import { commitRowDelta } from './snapshot-producer.js';
import { ancestorsOf, currentSchema, type TableMetadata } from './table-metadata.js';
import { lakeColumnsOf } from './table-shape.js';
import { filesOf, IcebergRoundWriter } from './tiering-writer.js';

export const ICEBERG = 'iceberg';

/** One version of an Iceberg table as a LakeTable. */
class IcebergLakeTable implements LakeTable {
  readonly tableId?: number;
  readonly columns: readonly LakeColumn[];

  constructor(
    readonly path: TablePath,
    readonly loaded: LoadedTable,
    private readonly catalog: FileSystemCatalog,
    private readonly pool: () => DataFileWriterPool,
  ) {
    const owner = loaded.metadata.properties[TABLE_ID_PROPERTY];
    if (owner !== undefined && /^\d+$/.test(owner)) this.tableId = Number(owner);
    this.columns = lakeColumnsOf(currentSchema(loaded.metadata));
  }

  /** The table's uuid and metadata file: a version's file never changes, and a re-created table gets a new uuid. */
  get version(): string {
    return `${this.loaded.metadata.tableUuid}/${this.loaded.metadataLocation}`;
  }

  tieredSnapshot(tableId: number): TieredSnapshot | undefined {
    return tieredSnapshotOf(this.loaded.metadata, tableId);
  }

  snapshotAt(epochMicros: bigint): bigint {
    return snapshotAsOf(this.loaded.metadata, epochMicros, tablePathString(this.path));
  }

  async planRead(snapshotId?: bigint, options: { currentSchema?: boolean } = {}): Promise<LakeReadPlan> {
    const { metadata } = this.loaded;
    const plan = await planScan(this.loaded, snapshotId === undefined ? {} : { snapshotId });
    const schema = options.currentSchema ? currentSchema(metadata) : schemaOf(metadata, snapshotId);
    return await readPlanOf(metadata, schema, plan.snapshotId ?? undefined, plan.dataFiles);
  }

  snapshotReader(snapshotId: bigint, info: TableInfo, schema: () => arrow.Schema): Promise<LakeSnapshotReader> {
    return snapshotReader(this.loaded, snapshotId, info, schema);
  }

  snapshotsSql(): string {
    return lakeSnapshotsSql(this.loaded.metadata);
  }

  filesSql(snapshotId?: bigint): Promise<string> {
    return lakeFilesSql(this.loaded.metadata, this.path.database, this.path.table, snapshotId);
  }

  newWriter(info: TableInfo): LakeWriter {
    return new IcebergRoundWriter(info, this.loaded.metadata, this.pool());
  }

  /** One row-delta snapshot of the round's data and delete files; its table version waits for the data files to be durable. */
  async commit(written: LakeWriteResult, properties: Readonly<Record<string, string>>, fence: TieringFence): Promise<bigint> {
    const { files, durable } = filesOf(written);
    const name = tablePathString(this.path);
    return commitRowDelta(this.catalog, this.path.database, this.path.table, {
      dataFiles: files.filter((f) => f.content === FileContent.DATA),
      deleteFiles: files.filter((f) => f.content !== FileContent.DATA),
      summary: { ...properties },
      addedFilesDurable: durable(),
      base: this.loaded,
      validate: (current) => {
        fence.signal.throwIfAborted();
        // Purged with its table and created anew for a namesake meanwhile: not this round's table.
        if (current.properties[TABLE_ID_PROPERTY] !== String(fence.tableId)) {
          throw new TributaryError('TABLE_NOT_EXIST', `lake table ${name} now belongs to another table (id ${current.properties[TABLE_ID_PROPERTY]})`);
        }
        const now = tieredSnapshotOf(current, fence.tableId);
        if (now?.snapshotId !== fence.basedOn) {
          throw new TributaryError('FENCED_TIERING_EPOCH_EXCEPTION', `lake snapshot ${now?.snapshotId} of table ${name} was committed by another tiering worker meanwhile`);
        }
      },
    });
  }
}

function tieredSnapshotOf(metadata: TableMetadata, tableId: number): TieredSnapshot | undefined {
  return latestTieredSnapshot(ancestorsOf(metadata, metadata.currentSnapshotId), tableId);
}

class IcebergLakeStorage extends IcebergLakeCatalog implements LakeStorage {
  readonly format = ICEBERG;
  readonly restCatalog: LakeRestCatalog = { loadTable: (path) => this.restTable(path) };

  constructor(
    warehouse: string,
    private readonly pool: () => DataFileWriterPool,
  ) {
    super(warehouse);
  }

  async loadTable(path: TablePath, known?: LakeTable): Promise<IcebergLakeTable> {
    const before = known instanceof IcebergLakeTable && known.path.database === path.database && known.path.table === path.table ? known : undefined;
    const loaded = await this.catalog.loadTable(path.database, path.table, before?.loaded);
    return loaded === before?.loaded ? before : new IcebergLakeTable(path, loaded, this.catalog, this.pool);
  }

  expireSnapshots(path: TablePath, options: ExpireOptions = {}): Promise<ExpiredSnapshots> {
    return expireSnapshots(this.catalog, path.database, path.table, options);
  }

  async compact(path: TablePath, sql: LakeSqlEngine, options: LakeCompactionOptions = {}): Promise<{ snapshotId: bigint; partitions: LakeCompactedPartition[] } | undefined> {
    const { partitions, ...rest } = options;
    const result = await compactLakeTable(this.catalog, path.database, path.table, sql, { ...rest, ...(partitions ? { partitions } : {}) });
    return (
      result && {
        snapshotId: result.snapshotId,
        partitions: result.partitions.map((p) => ({
          name: p.name,
          removedDataFiles: p.removedDataFiles.length,
          removedDeleteFiles: p.removedDeleteFiles.length,
          ...(p.added ? { added: { path: p.added.filePath, recordCount: p.added.recordCount } } : {}),
        })),
      }
    );
  }

  removeOrphanFiles(path: TablePath, options: { olderThanMs?: number } = {}): Promise<{ deletedFiles: string[] }> {
    return removeOrphanFiles(this.catalog, path.database, path.table, options);
  }

  /**
   * LoadTableResult { metadata-location, metadata, config }: `metadata` is the current
   * `v<N>.metadata.json` byte for byte, as snapshot ids are 63-bit integers that a JSON round trip
   * through JavaScript numbers would corrupt.
   */
  private async restTable(path: TablePath): Promise<LakeRestTable | undefined> {
    let table: IcebergLakeTable;
    try {
      table = await this.loadTable(path);
    } catch (err) {
      if ((err as TributaryError).errorName === 'TABLE_NOT_EXIST') return undefined;
      throw err;
    }
    const { metadata, metadataLocation } = table.loaded;
    return {
      ...(table.tableId !== undefined ? { tableId: table.tableId } : {}),
      // A version file is never rewritten, and a re-created table gets a new uuid.
      version: `${metadata.tableUuid}/${metadataLocation}`,
      document: async () => {
        const text = Buffer.from(await readMetadataFile(metadataLocation)).toString('utf8');
        return `{"metadata-location":${JSON.stringify(metadataLocation)},"metadata":${text.trim()},"config":${JSON.stringify(fileIoProperties(metadataLocation))}}`;
      },
    };
  }
}

/** The Iceberg format; its data files are encoded by a pool of threads (data-file-writer.ts), started by the first writer. */
export class IcebergFormat implements LakeFormat {
  readonly name = ICEBERG;
  private pool?: DataFileWriterPool;

  constructor(private readonly options: LakeFormatOptions = {}) {}

  open(warehouse: string): LakeStorage {
    return new IcebergLakeStorage(warehouse, () => (this.pool ??= new DataFileWriterPool(this.options.writerThreads ?? 1)));
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }
}
