/**
 * Apache Iceberg as a lake format (lake-format.ts): the filesystem catalog of a warehouse
 * (catalog.ts), its tables as Tributary sees them, tiering writes (tiering-writer.ts) and commits
 * (snapshot-producer.ts), maintenance (maintenance.ts) and the Iceberg REST catalog's documents.
 */
import fs from 'node:fs';
import { TributaryError } from '../../common/errors.js';
import { type TableInfo, type TablePath, tablePathString } from '../../common/schema.js';
import type { DataType } from '../../common/types.js';
import {
  type ExpireOptions,
  type ExpiredSnapshots,
  type LakeColumn,
  type LakeFormat,
  type LakeFormatOptions,
  type LakeRestCatalog,
  type LakeRestTable,
  type LakeStorage,
  type LakeTable,
  type LakeWriter,
  type LakeWriteResult,
  TABLE_ID_PROPERTY,
  type TieringFence,
} from '../lake-format.js';
import { latestTieredSnapshot, type TieredSnapshot } from '../tiered-offsets.js';
import type { FileSystemCatalog, LoadedTable } from './catalog.js';
import { FileContent } from './data-file.js';
import { DataFileWriterPool } from './data-file-writer.js';
import { IcebergLakeCatalog } from './iceberg-catalog.js';
import { expireSnapshots, removeOrphanFiles } from './maintenance.js';
import { commitRowDelta } from './snapshot-producer.js';
import { ancestorsOf, currentSchema, type TableMetadata } from './table-metadata.js';
import { filesOf, IcebergRoundWriter } from './tiering-writer.js';
import { decimalOf, fixedLengthOf, type IcebergPrimitive } from './types.js';

export const ICEBERG = 'iceberg';

/** Tributary's type of an Iceberg primitive (the widest one it maps from, for int). */
export function dataTypeOfIceberg(type: IcebergPrimitive): DataType {
  switch (type) {
    case 'boolean':
      return { kind: 'BOOLEAN' };
    case 'int':
      return { kind: 'INT' };
    case 'long':
      return { kind: 'BIGINT' };
    case 'float':
      return { kind: 'FLOAT' };
    case 'double':
      return { kind: 'DOUBLE' };
    case 'string':
      return { kind: 'STRING' };
    case 'binary':
      return { kind: 'BYTES' };
    case 'uuid':
      return { kind: 'BINARY', length: 16 };
    case 'date':
      return { kind: 'DATE' };
    case 'time':
      return { kind: 'TIME', precision: 6 };
    case 'timestamp':
      return { kind: 'TIMESTAMP', precision: 6 };
    case 'timestamptz':
      return { kind: 'TIMESTAMP_LTZ', precision: 6 };
  }
  const decimal = decimalOf(type);
  if (decimal) return { kind: 'DECIMAL', ...decimal };
  const length = fixedLengthOf(type);
  if (length !== undefined) return { kind: 'BINARY', length };
  throw new TributaryError('INVALID_TYPE', `Iceberg type ${type} has no Tributary type`);
}

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
    this.columns = currentSchema(loaded.metadata).fields.map((f) => ({ id: f.id, name: f.name, type: dataTypeOfIceberg(f.type), nullable: !f.required }));
  }

  tieredSnapshot(tableId: number): TieredSnapshot | undefined {
    return tieredSnapshotOf(this.loaded.metadata, tableId);
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

  async loadTable(path: TablePath): Promise<IcebergLakeTable> {
    return new IcebergLakeTable(path, await this.catalog.loadTable(path.database, path.table), this.catalog, this.pool);
  }

  expireSnapshots(path: TablePath, options: ExpireOptions = {}): Promise<ExpiredSnapshots> {
    return expireSnapshots(this.catalog, path.database, path.table, options);
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
        let text: string;
        try {
          text = await fs.promises.readFile(metadataLocation, 'utf8');
        } catch (err) {
          throw new TributaryError('STORAGE_EXCEPTION', `cannot read ${metadataLocation}: ${(err as Error).message}`, { cause: err });
        }
        return `{"metadata-location":${JSON.stringify(metadataLocation)},"metadata":${text.trim()},"config":{}}`;
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
