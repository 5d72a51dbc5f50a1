/**
 * Parquet data files from Arrow record batches, through parquet-wasm: the batches travel as an
 * Arrow IPC stream into WASM memory and come out as one Parquet file, ZSTD compressed, with
 * statistics, at most 1M rows per row group, and each column's Iceberg field id taken from its
 * Arrow field metadata `PARQUET:field_id` (spec Appendix A, "Parquet").
 *
 * parquet-wasm's node build compiles and instantiates its WASM module synchronously when loaded
 * (CommonJS), so there is nothing to await; it is loaded on first use, once per thread, so that
 * threads that only build IPC streams never pay for it.
 */
import { createRequire } from 'node:module';
import type * as arrow from 'apache-arrow';
import { compareSchemas } from 'apache-arrow/visitor/typecomparator';
import { TributaryError } from '../../common/errors.js';
import { arrowIpcStream, encodeArrowPayload } from '../../record/arrow-payload.js';

export const MAX_ROW_GROUP_ROWS = 1_000_000;

type ParquetWasm = typeof import('parquet-wasm');
let parquetWasm: ParquetWasm | undefined;

/**
 * The Arrow IPC stream of `batches`, which share one schema. Each column buffer is copied on its
 * own, so columns that share memory cannot corrupt the stream (as apache-arrow's writer would).
 */
export function ipcStreamOf(batches: readonly arrow.RecordBatch[]): Uint8Array {
  if (batches.length === 0) throw new TributaryError('INVALID_ARGUMENT', 'a data file needs at least one record batch');
  const schema = batches[0].schema;
  if (batches.some((b) => !compareSchemas(b.schema, schema))) throw new TributaryError('INVALID_ARGUMENT', 'the record batches of one data file must share their schema');
  return arrowIpcStream(schema, batches.map((b) => encodeArrowPayload(b, 'NONE')));
}

/** The Parquet file of the batches of an Arrow IPC stream. */
export function parquetOfIpcStream(ipc: Uint8Array): Uint8Array {
  parquetWasm ??= createRequire(import.meta.url)('parquet-wasm') as ParquetWasm;
  const { Compression, EnabledStatistics, Table, WriterPropertiesBuilder, writeParquet: writeWasmParquet } = parquetWasm;
  try {
    const table = Table.fromIPCStream(ipc);
    // Both the table and the properties are consumed by the write.
    const properties = new WriterPropertiesBuilder()
      .setCompression(Compression.ZSTD)
      .setMaxRowGroupSize(MAX_ROW_GROUP_ROWS)
      .setStatisticsEnabled(EnabledStatistics.Page)
      .build();
    return writeWasmParquet(table, properties);
  } catch (err) {
    throw new TributaryError('STORAGE_EXCEPTION', `cannot write Parquet: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

/** The Parquet file of `batches`, which share one schema. */
export function writeParquet(batches: readonly arrow.RecordBatch[]): Uint8Array {
  return parquetOfIpcStream(ipcStreamOf(batches));
}
