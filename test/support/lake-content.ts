/**
 * The content of a lake table as an outside reader sees it: the metadata walked down to the data
 * and delete files (metadata → manifest list → manifests), every Parquet file read by DuckDB, and
 * equality deletes applied by sequence number as the Iceberg spec says. The warehouse is a
 * directory or s3:// (the process's object storage settings reach it). Tests compare it with what
 * was written to the Tributary table.
 */
import { DuckDBInstance } from '@duckdb/node-api';
import { FileContent } from '../../src/lake/iceberg/data-file.js';
import { FileSystemCatalog } from '../../src/lake/iceberg/catalog.js';
import { planScan } from '../../src/lake/iceberg/scan.js';
import { localCopies } from '../../src/storage/stores.js';
import type { TableMetadata } from '../../src/lake/iceberg/table-metadata.js';

export interface LakeContent {
  metadata: TableMetadata;
  /** Live rows (deletes applied), each as column name → value (DuckDB's JS values). */
  rows: Record<string, unknown>[];
  dataFiles: number;
  deleteFiles: number;
}

const sqlString = (s: string): string => `'${s.replaceAll("'", "''")}'`;

export async function readLakeTable(warehouse: string, database: string, table: string): Promise<LakeContent> {
  const catalog = new FileSystemCatalog(warehouse);
  const loaded = await catalog.loadTable(database, table);
  const plan = await planScan(loaded);
  // Files of an s3:// warehouse are downloaded (DuckDB reads local files here); a directory's are read in place.
  const copies = await localCopies(plan.dataFiles.flatMap((t) => [t.file.filePath, ...t.deletes.map((d) => d.filePath)]));
  const duck = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
  const conn = await duck.connect();
  try {
    const read = async (file: string) => {
      const reader = await conn.runAndReadAll(`SELECT * FROM read_parquet(${sqlString(copies.path(file)!)}, hive_partitioning = false)`);
      return reader.getRowObjects() as Record<string, unknown>[];
    };
    // An equality delete file holds the key columns only: a data row matching one of its rows on all of them is deleted.
    const deleteFiles = new Map<string, Record<string, unknown>[]>();
    const rows: Record<string, unknown>[] = [];
    for (const task of plan.dataFiles) {
      const deletes = [];
      for (const d of task.deletes) {
        if (d.content !== FileContent.EQUALITY_DELETES) throw new Error(`unexpected delete file content ${d.content}`);
        let keys = deleteFiles.get(d.filePath);
        if (!keys) {
          keys = await read(d.filePath);
          deleteFiles.set(d.filePath, keys);
        }
        deletes.push(keys);
      }
      for (const row of await read(task.file.filePath)) {
        const deleted = deletes.some((keys) => keys.some((k) => Object.keys(k).every((name) => k[name] === row[name])));
        if (!deleted) rows.push(row);
      }
    }
    return { metadata: loaded.metadata, rows, dataFiles: plan.dataFiles.length, deleteFiles: deleteFiles.size };
  } finally {
    copies.release();
    conn.closeSync();
    duck.closeSync();
  }
}
