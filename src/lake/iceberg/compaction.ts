/**
 * Compaction of a lake table's partitions (a bucket of a primary-key table, or any partition): all
 * live data files of the partition become one data file without the rows its delete files remove,
 * and the partition's delete files go, in one "replace" snapshot that changes no row.
 *
 *   plan     planScan of the current snapshot S; its data files (with the deletes that apply to
 *            each) and its live delete files, grouped by partition tuple
 *   write    per partition, DuckDB (the SQL engine the caller gives, LakeSqlEngine) runs the SQL of the partition's scan tasks (duckdb-sql.ts: equality
 *            and position deletes applied), ordered by the table's sort order (__offset), into
 *            `COPY … TO <location>/data/<partition path>/<uuid>.parquet` (Parquet, ZSTD, Iceberg
 *            field ids); the file is fsynced, then read back (parquet-wasm → Arrow) for exact
 *            column metrics. A partition left with no row gets no file.
 *   commit   commitRewrite(removed = the partition's data and delete files, added = the new files,
 *            startingSequenceNumber = S's sequence number): deletes committed after S, also while
 *            the rewrite ran, still apply to the new files, and those applied do not apply again.
 *            Position deletes committed meanwhile name the old files: the commit then fails
 *            (COMMIT_FAILED) rather than bring their rows back.
 *
 * The rewrite's snapshot summary carries the tributary.* properties (tiered-offsets.ts) of the
 * newest tiered snapshot it read, so the current snapshot keeps saying which log offsets the lake
 * holds after expiry drops the older ones. Those offsets would be stale if tiering committed
 * meanwhile: the commit is then refused with FENCED_TIERING_EPOCH_EXCEPTION, and a later
 * compaction starts over. Tables with more than one partition spec are not compacted.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import * as arrow from 'apache-arrow';
import { type ErrorName, TributaryError } from '../../common/errors.js';
import { joinLocation } from '../../storage/object-store.js';
import { localCopies, objectStoreFor, publishStaged, writePathFor } from '../../storage/stores.js';
import { type LakeSqlEngine, type LakeSqlSession, TABLE_ID_PROPERTY } from '../lake-format.js';
import { latestTieredSnapshot, SUMMARY_BUCKET_OFFSETS, SUMMARY_TABLE_ID, SUMMARY_TIERING_EPOCH } from '../tiered-offsets.js';
import type { FileSystemCatalog } from './catalog.js';
import { type DataFile, FileContent, ManifestContent, type PartitionValue } from './data-file.js';
import { scanTasksSql } from './duckdb-sql.js';
import { columnSizesOf } from '../parquet/projection.js';
import { computeMetrics } from './metrics.js';
import { rowGroupRowLimit } from './parquet.js';
import { isLive, partitionKey, planScan, readManifest, readManifestList, type ScanTask } from './scan.js';
import { commitRewrite } from './snapshot-producer.js';
import { ancestorsOf, currentSchema, currentSnapshot, type PartitionSpec, partitionSpecById, snapshotById, type TableMetadata } from './table-metadata.js';
import { parseTransform } from './transforms.js';
import { fixedLengthOf, type IcebergSchema } from './types.js';

/** Rows per Arrow batch when the written file is read back for its metrics. */
const READ_BACK_BATCH_ROWS = 65_536;
/** Failures after which the rewrite's snapshot surely was not committed, so its files can go. */
const NOT_COMMITTED = new Set<ErrorName>(['COMMIT_FAILED', 'FENCED_TIERING_EPOCH_EXCEPTION', 'INVALID_ARGUMENT']);

export interface CompactionOptions {
  /** The partition tuples to consider; every partition by default. */
  partitions?: readonly (readonly PartitionValue[])[];
  /**
   * Only partitions holding at least this many delete files. Either way a partition is compacted
   * only when it has a delete file or more than one data file.
   */
  minDeleteFiles?: number;
  /** Told the rows written so far after each partition is rewritten (the CLI's progress line). */
  onProgress?: (rowsWritten: number) => void;
}

export interface CompactedPartition {
  partition: PartitionValue[];
  /** As partition paths show it, e.g. `k=a/__bucket=0`; empty for an unpartitioned table. */
  name: string;
  removedDataFiles: DataFile[];
  removedDeleteFiles: DataFile[];
  /** The new data file; none when no row was left. */
  added?: DataFile;
}

/** A rewrite whose files are written, not committed yet. */
export interface PreparedCompaction {
  partitions: CompactedPartition[];
  /** Commits the rewrite; returns its snapshot id. When it surely did not commit, the new files are deleted. */
  commit(): Promise<bigint>;
}

/** Compacts the chosen partitions in one commit; undefined (no commit) when none needs it. */
export async function compactLakeTable(
  catalog: FileSystemCatalog,
  db: string,
  table: string,
  sql: LakeSqlEngine,
  options: CompactionOptions = {},
): Promise<{ snapshotId: bigint; partitions: CompactedPartition[] } | undefined> {
  const prepared = await prepareCompaction(catalog, db, table, sql, options);
  return prepared && { snapshotId: await prepared.commit(), partitions: prepared.partitions };
}

interface PartitionFiles {
  partition: PartitionValue[];
  tasks: ScanTask[];
  deletes: DataFile[];
}

/** Plans the rewrite of the chosen partitions and writes their new data files; undefined when none needs it. */
export async function prepareCompaction(catalog: FileSystemCatalog, db: string, table: string, sql: LakeSqlEngine, options: CompactionOptions = {}): Promise<PreparedCompaction | undefined> {
  if (options.partitions?.length === 0) return undefined;
  const loaded = await catalog.loadTable(db, table);
  const { metadata } = loaded;
  if (metadata.partitionSpecs.length > 1) {
    throw new TributaryError('INVALID_TABLE_EXCEPTION', `lake table ${db}.${table} has more than one partition spec; compaction needs its files in one`);
  }
  // No partition can hold more delete files than the table: then the manifests need no reading.
  const totalDeleteFiles = Number(currentSnapshot(metadata)?.summary['total-delete-files'] ?? Number.NaN);
  if (totalDeleteFiles < (options.minDeleteFiles ?? 0)) return undefined;
  const plan = await planScan(loaded);
  if (plan.snapshotId === null) return undefined;
  const spec = partitionSpecById(metadata, metadata.defaultSpecId);
  const schema = currentSchema(metadata);
  const fixed = schema.fields.find((f) => fixedLengthOf(f.type) !== undefined);
  if (fixed) throw new TributaryError('INVALID_TYPE', `lake column '${fixed.name}' is ${fixed.type}, which compaction cannot write`);

  const byPartition = new Map<string, PartitionFiles>();
  const filesOf = (partition: PartitionValue[]): PartitionFiles => {
    const key = partitionKey(spec['spec-id'], partition);
    let files = byPartition.get(key);
    if (!files) byPartition.set(key, (files = { partition, tasks: [], deletes: [] }));
    return files;
  };
  for (const task of plan.dataFiles) filesOf(task.file.partition).tasks.push(task);
  for (const file of await liveDeleteFiles(metadata, plan.snapshotId)) filesOf(file.partition).deletes.push(file);
  const wanted = options.partitions && new Set(options.partitions.map((p) => partitionKey(spec['spec-id'], p)));
  const chosen = [...byPartition]
    .filter(([key, f]) => (!wanted || wanted.has(key)) && (f.deletes.length > 0 || f.tasks.length > 1) && f.deletes.length >= (options.minDeleteFiles ?? 0))
    .map(([, f]) => f);
  if (chosen.length === 0) return undefined;

  const partitions: CompactedPartition[] = [];
  const duck = await sql();
  try {
    const writer = new PartitionWriter(duck, metadata, schema, spec, rowGroupRowLimit(metadata.properties, `${db}.${table}`));
    let rowsWritten = 0;
    for (const files of chosen) {
      const written = await writer.write(files);
      partitions.push({
        partition: files.partition,
        name: writer.partitionPath(files.partition).join('/'),
        removedDataFiles: files.tasks.map((t) => t.file),
        removedDeleteFiles: files.deletes,
        ...written,
      });
      rowsWritten += written.added?.recordCount ?? 0;
      options.onProgress?.(rowsWritten);
    }
  } catch (err) {
    await deleteQuietly(partitions);
    throw err;
  } finally {
    duck.close();
  }

  const tableId = metadata.properties[TABLE_ID_PROPERTY];
  const tiered = tableId === undefined ? undefined : latestTieredSnapshot(ancestorsOf(metadata, plan.snapshotId), Number(tableId));
  const tieredSummary: Record<string, string> = tiered ? snapshotById(metadata, tiered.snapshotId)!.summary : {};
  const summary = Object.fromEntries([SUMMARY_TABLE_ID, SUMMARY_TIERING_EPOCH, SUMMARY_BUCKET_OFFSETS].filter((k) => tieredSummary[k] !== undefined).map((k) => [k, tieredSummary[k]]));
  return {
    partitions,
    commit: async () => {
      try {
        return await commitRewrite(catalog, db, table, {
          removed: partitions.flatMap((p) => [...p.removedDataFiles, ...p.removedDeleteFiles]),
          added: partitions.flatMap((p) => (p.added ? [p.added] : [])),
          startingSequenceNumber: plan.sequenceNumber,
          summary,
          validate: (current) => {
            const now = tableId === undefined ? undefined : latestTieredSnapshot(ancestorsOf(current, current.currentSnapshotId), Number(tableId));
            if (now?.snapshotId !== tiered?.snapshotId) {
              throw new TributaryError('FENCED_TIERING_EPOCH_EXCEPTION', `tiering committed lake snapshot ${now?.snapshotId} of ${db}.${table} while it was being compacted`);
            }
            // Equality deletes committed since still apply to the new files; position deletes name the old ones.
            for (const s of ancestorsOf(current, current.currentSnapshotId)) {
              if (s.snapshotId === plan.snapshotId) return;
              if (Number(s.summary['added-position-delete-files'] ?? 0) > 0) {
                throw new TributaryError('COMMIT_FAILED', `snapshot ${s.snapshotId} of ${db}.${table} added position deletes while it was being compacted`);
              }
            }
            throw new TributaryError('COMMIT_FAILED', `the snapshot compaction read is no longer in the history of ${db}.${table}`);
          },
        });
      } catch (err) {
        if (err instanceof TributaryError && NOT_COMMITTED.has(err.errorName)) await deleteQuietly(partitions);
        throw err;
      }
    },
  };
}

/** The live delete files of a snapshot. */
async function liveDeleteFiles(metadata: TableMetadata, snapshotId: bigint): Promise<DataFile[]> {
  const files: DataFile[] = [];
  for (const manifest of await readManifestList(snapshotById(metadata, snapshotId)!.manifestList)) {
    if (manifest.content !== ManifestContent.DELETES) continue;
    for (const e of (await readManifest(manifest)).entries) if (isLive(e)) files.push(e.dataFile);
  }
  return files;
}

/** Writes the new data file of a partition. */
class PartitionWriter {
  private readonly orderBy: string;
  private readonly sortOrderId?: number;
  private readonly fieldIds: string;

  constructor(
    private readonly duck: LakeSqlSession,
    private readonly metadata: TableMetadata,
    private readonly schema: IcebergSchema,
    private readonly spec: PartitionSpec,
    /** Rows per row group (write.parquet.row-group-row-limit); DuckDB's default when absent. */
    private readonly rowGroupRows: number | undefined,
  ) {
    // Sorted by the table's sort order when it is made of columns (Tributary's: __offset).
    const order = metadata.sortOrders.find((o) => o['order-id'] === metadata.defaultSortOrderId);
    const columns = order?.fields.map((f) => (f.transform === 'identity' ? schema.fields.find((x) => x.id === f['source-id']) : undefined));
    if (order && columns && columns.every((c) => c !== undefined)) {
      const terms = order.fields.map((f, i) => `${identifier(columns[i]!.name)} ${f.direction === 'desc' ? 'DESC' : 'ASC'} NULLS ${f['null-order'] === 'nulls-last' ? 'LAST' : 'FIRST'}`);
      this.orderBy = terms.length > 0 ? ` ORDER BY ${terms.join(', ')}` : '';
      this.sortOrderId = order['order-id'];
    } else {
      this.orderBy = '';
    }
    this.fieldIds = schema.fields.map((f) => `${literal(f.name)}: ${f.id}`).join(', ');
  }

  /** Partition directories as the spec's transforms show the values: `name=value`. */
  partitionPath(partition: readonly PartitionValue[]): string[] {
    return this.spec.fields.map((f, i) => {
      const source = this.schema.fields.find((x) => x.id === f['source-id']);
      if (!source) throw new TributaryError('INVALID_TABLE_EXCEPTION', `partition field ${f.name} has no source column in the current schema`);
      return `${f.name}=${encodeURIComponent(parseTransform(f.transform).toHumanString(source.type, partition[i]))}`;
    });
  }

  async write(files: PartitionFiles): Promise<{ added?: DataFile }> {
    if (files.tasks.length === 0) return {};
    const location = joinLocation(this.metadata.location, 'data', ...this.partitionPath(files.partition), `${crypto.randomUUID()}.parquet`);
    // In place on a local warehouse; staged in the remote file cache and uploaded on object storage.
    const file = await writePathFor(location);
    let created: string | undefined;
    try {
      created = await fs.promises.mkdir(path.dirname(file), { recursive: true });
    } catch (err) {
      throw new TributaryError('STORAGE_EXCEPTION', `cannot create ${path.dirname(file)}: ${(err as Error).message}`, { cause: err });
    }
    const sources = await localCopies(files.tasks.flatMap((t) => [t.file.filePath, ...t.deletes.map((d) => d.filePath)]));
    let bytes: Uint8Array;
    let batches: arrow.RecordBatch[];
    let columnSizes: Map<number, number>;
    try {
      const rows = scanTasksSql(this.metadata, files.tasks, { schema: this.schema, pathOf: (l) => sources.path(l) ?? l });
      const copied = await this.duck.run(
        `COPY (SELECT * FROM (${rows}) AS r${this.orderBy}) TO ${literal(file)} (FORMAT parquet, COMPRESSION zstd, FIELD_IDS {${this.fieldIds}}${this.rowGroupRows !== undefined ? `, ROW_GROUP_SIZE ${this.rowGroupRows}` : ''})`,
      );
      if (Number(copied.rows[0][0]) === 0) {
        await fs.promises.rm(file, { force: true });
        return {};
      }
      await syncWritten(file, created);
      const rowGroups = Number((await this.duck.run(`SELECT num_row_groups FROM parquet_file_metadata(${literal(file)})`)).rows[0][0]);
      bytes = await fs.promises.readFile(file);
      batches = await readBack(bytes, rowGroups);
      columnSizes = await columnSizesOf(file);
      await publishStaged(location, file);
    } catch (err) {
      await fs.promises.rm(file, { force: true }).catch(() => {});
      throw err;
    } finally {
      sources.release();
    }
    const metrics = computeMetrics(batches, this.schema);
    return {
      added: {
        content: FileContent.DATA,
        filePath: location,
        fileFormat: 'PARQUET',
        partition: files.partition,
        recordCount: metrics.recordCount,
        fileSizeInBytes: bytes.length,
        columnSizes,
        valueCounts: metrics.valueCounts,
        nullValueCounts: metrics.nullValueCounts,
        nanValueCounts: metrics.nanValueCounts,
        lowerBounds: metrics.lowerBounds,
        upperBounds: metrics.upperBounds,
        ...(this.sortOrderId !== undefined ? { sortOrderId: this.sortOrderId } : {}),
      },
    };
  }
}

const literal = (s: string): string => `'${s.replaceAll("'", "''")}'`;
const identifier = (name: string): string => `"${name.replaceAll('"', '""')}"`;

type ParquetWasm = typeof import('parquet-wasm');
let parquetWasm: ParquetWasm | undefined;

/** The Arrow batches of a Parquet file, decoded a row group at a time with turns of the event loop in between. */
async function readBack(bytes: Uint8Array, rowGroups: number): Promise<arrow.RecordBatch[]> {
  parquetWasm ??= createRequire(import.meta.url)('parquet-wasm') as ParquetWasm;
  const batches: arrow.RecordBatch[] = [];
  for (let group = 0; group < rowGroups; group++) {
    try {
      batches.push(...arrow.tableFromIPC(parquetWasm.readParquet(bytes, { rowGroups: [group], batchSize: READ_BACK_BATCH_ROWS }).intoIPCStream()).batches);
    } catch (err) {
      throw new TributaryError('STORAGE_EXCEPTION', `cannot read back the compacted file: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    await nextTurn();
  }
  return batches;
}

/** Makes a written file durable: its content, its directory entry and any directory created for it. */
async function syncWritten(file: string, firstCreated: string | undefined): Promise<void> {
  const sync = async (p: string): Promise<void> => {
    const handle = await fs.promises.open(p, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  };
  try {
    await sync(file);
    for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
      await sync(dir);
      if (firstCreated === undefined || dir === path.dirname(firstCreated) || dir === path.dirname(dir)) break;
    }
  } catch (err) {
    throw new TributaryError('STORAGE_EXCEPTION', `cannot sync ${file}: ${(err as Error).message}`, { cause: err });
  }
}

async function deleteQuietly(partitions: readonly CompactedPartition[]): Promise<void> {
  await Promise.all(partitions.map((p) => p.added && objectStoreFor(p.added.filePath).delete(p.added.filePath).catch(() => {})));
}
