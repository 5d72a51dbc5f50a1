/**
 * A lake writer process of its own: `<json>` names an Iceberg table of an s3:// (or directory)
 * warehouse, the `s3.*` options that reach it, and how many appends to commit, one data file each,
 * with keys from `firstKey`. Prints `committed <n>` and exits 0 once all are committed.
 */
import { FileContent } from '../../src/lake/iceberg/data-file.js';
import { FileSystemCatalog } from '../../src/lake/iceberg/catalog.js';
import { batchOf } from '../../src/lake/iceberg/fixtures/lake-files.js';
import { computeMetrics } from '../../src/lake/iceberg/metrics.js';
import { writeParquet } from '../../src/lake/iceberg/parquet.js';
import { commitAppend } from '../../src/lake/iceberg/snapshot-producer.js';
import type { IcebergSchema } from '../../src/lake/iceberg/types.js';
import { configureObjectStorageFrom, objectStoreFor, processCacheDir } from '../../src/storage/stores.js';

export interface LakeCommitJob {
  warehouse: string;
  s3: Record<string, string>;
  database: string;
  table: string;
  schema: IcebergSchema;
  writer: string;
  commits: number;
  firstKey: number;
}

const job = JSON.parse(process.argv[2]) as LakeCommitJob;
configureObjectStorageFrom(job.s3, processCacheDir());
const catalog = new FileSystemCatalog(job.warehouse);
for (let i = 0; i < job.commits; i++) {
  const batch = batchOf(job.schema, [[BigInt(job.firstKey + i)], [job.writer], [0]]);
  const bytes = writeParquet([batch]);
  const location = `${catalog.tableLocation(job.database, job.table)}/data/__bucket=0/${job.writer}-${i}.parquet`;
  await objectStoreFor(location).put(location, bytes);
  const m = computeMetrics([batch], job.schema);
  await commitAppend(catalog, job.database, job.table, {
    dataFiles: [{ content: FileContent.DATA, filePath: location, fileFormat: 'PARQUET', partition: [0], recordCount: m.recordCount, fileSizeInBytes: bytes.length, valueCounts: m.valueCounts, nullValueCounts: m.nullValueCounts, lowerBounds: m.lowerBounds, upperBounds: m.upperBounds }],
  });
}
process.stdout.write(`committed ${job.commits}\n`);
