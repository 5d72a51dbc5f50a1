/**
 * Parquet data files from Arrow record batches, through parquet-wasm: the batches travel as Arrow
 * IPC streams into WASM memory and come out as one Parquet file with each column's Iceberg field
 * id taken from its Arrow field metadata `PARQUET:field_id` (spec Appendix A, "Parquet").
 *
 * Writer settings, chosen by measurement (parquet-wasm 0.8.0, whose ZSTD level is fixed):
 *   - at most 1M rows per row group, column chunk and page statistics (readers prune row groups
 *     and pages of a file by them; Iceberg's metrics only prune whole files);
 *   - integer columns (int, long, date, time, timestamps) DELTA_BINARY_PACKED, no dictionary,
 *     not compressed: offsets, ids and times shrink to almost nothing, which halves the encoding
 *     time and cuts a third of the file against PLAIN. What the deltas leave is bit-packed: ZSTD
 *     takes a few percent more off ordered columns and nothing off spread ones, where it costs
 *     an eighth of the whole encoding time. DuckDB, Trino, parquet-mr and Spark's own reader read
 *     it; Iceberg's vectorized Spark reader only in recent releases (older ones need the table
 *     property read.parquet.vectorization.enabled=false);
 *   - a dictionary and ZSTD for the other columns (strings, binary, decimals, floats), where
 *     values repeat; the writer falls back to PLAIN once the dictionary page is full;
 *   - format 1.0 data pages, which every reader takes.
 *
 * `writeParquet` makes a whole file in memory; `ParquetStreamWriter` makes one from successive IPC
 * streams, handing out the bytes as row groups fill, so memory holds one row group, not the file.
 *
 * parquet-wasm's node build compiles and instantiates its WASM module synchronously when loaded
 * (CommonJS), so there is nothing to await; it is loaded on first use, once per thread, so that
 * threads that only build IPC streams never pay for it.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import * as arrow from 'apache-arrow';
import { compareSchemas } from 'apache-arrow/visitor/typecomparator';
import type { WriterProperties } from 'parquet-wasm';
import { TributaryError } from '../../common/errors.js';
import { arrowIpcStream, encodeArrowPayload } from '../../record/arrow-payload.js';

export const MAX_ROW_GROUP_ROWS = 1_000_000;

/** The lake table property that caps the rows of a row group (the name Iceberg's writers are taking up). */
export const ROW_GROUP_ROW_LIMIT = 'write.parquet.row-group-row-limit';

/**
 * The rows per row group the properties of lake table `table` ask for; undefined when unset (the
 * writer's own default). INVALID_CONFIG_EXCEPTION names a malformed value.
 */
export function rowGroupRowLimit(properties: Readonly<Record<string, string>>, table: string): number | undefined {
  const text = properties[ROW_GROUP_ROW_LIMIT];
  if (text === undefined) return undefined;
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `table property ${ROW_GROUP_ROW_LIMIT} of lake table ${table} must be an integer >= 1, got '${text}'`);
  return value;
}

type ParquetWasm = typeof import('parquet-wasm');
let parquetWasm: ParquetWasm | undefined;

function wasm(): ParquetWasm {
  parquetWasm ??= createRequire(import.meta.url)('parquet-wasm') as ParquetWasm;
  return parquetWasm;
}

const END_OF_STREAM_SIZE = 8;
/** Room for a payload's message metadata, when guessing the size of a stream. */
const METADATA_ROOM = 1024;

/**
 * The Arrow IPC stream of `batches`, which share one schema, written into `memory` when it is
 * large enough (else into new memory). Each column buffer is copied on its own, so columns that
 * share memory cannot corrupt the stream (as apache-arrow's writer would).
 */
export function ipcStreamOf(batches: readonly arrow.RecordBatch[], memory?: ArrayBuffer): Uint8Array {
  if (batches.length === 0) throw new TributaryError('INVALID_ARGUMENT', 'a data file needs at least one record batch');
  const schema = batches[0].schema;
  if (batches.some((b) => !compareSchemas(b.schema, schema))) throw new TributaryError('INVALID_ARGUMENT', 'the record batches of one data file must share their schema');
  // The stream of no batches: the schema message, then the end-of-stream marker.
  const empty = arrowIpcStream(schema, []);
  const head = empty.subarray(0, empty.length - END_OF_STREAM_SIZE);
  const guess = batches.reduce((n, b) => n + b.data.byteLength + METADATA_ROOM, empty.length);
  let out = memory ? new Uint8Array(memory) : new Uint8Array(guess);
  let used = 0;
  const take = (size: number): Uint8Array => {
    if (used + size > out.length) {
      const larger = new Uint8Array(Math.max(2 * out.length, used + size + END_OF_STREAM_SIZE));
      larger.set(out.subarray(0, used));
      out = larger;
    }
    used += size;
    return out.subarray(used - size, used);
  };
  take(head.length).set(head);
  for (const batch of batches) encodeArrowPayload(batch, 'NONE', undefined, 0, take);
  take(END_OF_STREAM_SIZE).set(empty.subarray(head.length));
  return out.subarray(0, used);
}

/** Integer physical types in Parquet: delta encoded. */
function isIntegerColumn(type: arrow.DataType): boolean {
  return arrow.DataType.isInt(type) || arrow.DataType.isDate(type) || arrow.DataType.isTime(type) || arrow.DataType.isTimestamp(type);
}

/** The writer settings for batches of `schema` (see the header), row groups of at most `maxRowGroupRows`; consumed by the write. */
function writerProperties(schema: arrow.Schema, maxRowGroupRows = MAX_ROW_GROUP_ROWS): WriterProperties {
  const { Compression, Encoding, EnabledStatistics, WriterPropertiesBuilder } = wasm();
  let builder = new WriterPropertiesBuilder()
    .setCompression(Compression.ZSTD)
    .setMaxRowGroupSize(maxRowGroupRows)
    .setStatisticsEnabled(EnabledStatistics.Page)
    .setDictionaryEnabled(false);
  for (const field of schema.fields) {
    builder = isIntegerColumn(field.type)
      ? builder.setColumnEncoding(field.name, Encoding.DELTA_BINARY_PACKED).setColumnCompression(field.name, Compression.UNCOMPRESSED)
      : builder.setColumnDictionaryEnabled(field.name, true);
  }
  return builder.build();
}

function writeFailed(err: unknown): TributaryError {
  if (err instanceof TributaryError) return err;
  return new TributaryError('STORAGE_EXCEPTION', `cannot write Parquet: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}

/** The Parquet file of `batches`, which share one schema; row groups of MAX_ROW_GROUP_ROWS unless `maxRowGroupRows` says fewer. */
export function writeParquet(batches: readonly arrow.RecordBatch[], options: { maxRowGroupRows?: number } = {}): Uint8Array {
  const ipc = ipcStreamOf(batches);
  const { Table, writeParquet: writeWasmParquet } = wasm();
  try {
    // Both the table and the properties are consumed by the write.
    return writeWasmParquet(Table.fromIPCStream(ipc), writerProperties(batches[0].schema, options.maxRowGroupRows));
  } catch (err) {
    throw writeFailed(err);
  }
}

type WasmRecordBatch = import('parquet-wasm').RecordBatch;

function closedFile(): TributaryError {
  return new TributaryError('STORAGE_EXCEPTION', 'the Parquet file is closed');
}

/** The row count in the footer of the Parquet file at `file`. */
export async function parquetRowCount(file: string): Promise<number> {
  try {
    const parquet = await wasm().ParquetFile.fromFile(await fs.openAsBlob(file));
    try {
      return parquet.metadata().fileMetadata().numRows();
    } finally {
      parquet.free();
    }
  } catch (err) {
    throw new TributaryError('STORAGE_EXCEPTION', `cannot read the footer of ${file}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

/**
 * One Parquet file written from successive Arrow IPC streams of one schema, one `write` at a time.
 * Each `write` resolves once the encoder has taken in all of its batches; the file's bytes go to
 * `sink` in order, as row groups fill and at `close`, which resolves once the last byte went out.
 * A sink that fails ends the file: the rest of the bytes are dropped and `close` (or the next
 * `write`) throws its error.
 *
 * parquet-wasm encodes in a task of its own that reads batches from a stream and drops any error
 * a batch meets. So each batch is handed over only when the task asks for the next one (which it
 * does once the previous one is encoded), batches must match the first one's schema (checked
 * here), and whoever keeps the file checks that its footer holds the rows `close` reports
 * (`parquetRowCount`).
 */
export class ParquetStreamWriter {
  private schema?: arrow.Schema;
  private input?: ReadableStreamDefaultController<WasmRecordBatch>;
  /** The encoder is waiting for a batch. */
  private asked = false;
  private onAsk?: () => void;
  /** Writes the encoder's output to the sink; settles when the output ends. */
  private output?: Promise<void>;
  private ended = false;
  private failure?: TributaryError;
  private rows = 0;
  private closed = false;

  /** `maxRowGroupRows`: rows per row group, MAX_ROW_GROUP_ROWS when absent. */
  constructor(
    private readonly sink: (bytes: Uint8Array) => Promise<void>,
    private readonly maxRowGroupRows?: number,
  ) {}

  /** Encodes the batches of `ipc`, an Arrow IPC stream of `schema`. */
  async write(ipc: Uint8Array, schema: arrow.Schema): Promise<void> {
    if (this.closed) throw closedFile();
    this.throwIfFailed();
    if (!this.schema) this.start(schema);
    else if (!compareSchemas(schema, this.schema)) throw new TributaryError('INVALID_ARGUMENT', 'the record batches of one data file must share their schema');
    let batches: WasmRecordBatch[];
    try {
      const table = wasm().Table.fromIPCStream(ipc);
      batches = table.recordBatches();
      table.free();
    } catch (err) {
      throw new TributaryError('INVALID_ARGUMENT', `not an Arrow IPC stream: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    for (let i = 0; i < batches.length; i++) {
      try {
        await this.untilAsked();
      } catch (err) {
        for (const unsent of batches.slice(i)) unsent.free();
        throw err;
      }
      this.rows += batches[i].numRows;
      this.asked = false;
      this.input!.enqueue(batches[i]);
    }
    // Asked again: the last batch is encoded.
    await this.untilAsked();
  }

  /** Ends the file: the footer goes to the sink. Returns the number of rows written. */
  async close(): Promise<number> {
    if (this.closed) throw closedFile();
    this.closed = true;
    if (!this.output) throw new TributaryError('INVALID_ARGUMENT', 'a data file needs at least one record batch');
    this.input!.close();
    await this.output;
    this.throwIfFailed();
    return this.rows;
  }

  /** Stops the file, which stays incomplete; the encoder's state is freed in the background. */
  abort(): void {
    if (this.closed) return;
    this.closed = true;
    this.failure ??= new TributaryError('STORAGE_EXCEPTION', 'the Parquet file was abandoned');
    this.input?.close();
  }

  private start(schema: arrow.Schema): void {
    this.schema = schema;
    const input = new ReadableStream<WasmRecordBatch>(
      {
        start: (controller) => {
          this.input = controller;
        },
        pull: () => {
          this.asked = true;
          this.onAsk?.();
        },
      },
      { highWaterMark: 0 },
    );
    // The returned stream comes once the encoder has the first batch.
    const encoded = wasm().transformParquetStream(input, writerProperties(schema, this.maxRowGroupRows));
    this.output = this.drain(encoded as Promise<ReadableStream<Uint8Array>>);
  }

  private async drain(encoded: Promise<ReadableStream<Uint8Array>>): Promise<void> {
    try {
      const reader = (await encoded).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        // After a failure the output is still read to its end, so that the encoder finishes.
        if (!this.failure) await this.sink(value).catch((err: unknown) => this.fail(err));
      }
    } catch (err) {
      this.fail(err);
    } finally {
      this.ended = true;
      this.onAsk?.();
    }
  }

  private fail(err: unknown): void {
    this.failure ??= writeFailed(err);
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }

  /** Resolves once the encoder waits for a batch; rejects if it stopped. */
  private untilAsked(): Promise<void> {
    const stopped = () => this.failure ?? new TributaryError('STORAGE_EXCEPTION', 'the Parquet encoder stopped early');
    if (this.asked) return Promise.resolve();
    if (this.ended) return Promise.reject(stopped());
    return new Promise((resolve, reject) => {
      this.onAsk = () => {
        this.onAsk = undefined;
        if (this.asked) resolve();
        else reject(stopped());
      };
    });
  }
}
