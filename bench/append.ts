/**
 * Append throughput: how fast one Node client gets the workload (support.ts) durably into a log
 * table of a server in another process, against the raw speed of the disk in the same run.
 *
 * The server runs as a child process with its defaults, so every acknowledged batch is fsynced
 * (log.flush.interval-messages = 1). The client uses its defaults (2 MB batches, acks = all,
 * idempotent writer). Each case appends all records to a fresh one-bucket log table:
 *   row       `await writer.append(row)` per record, then `flush()`;
 *   columnar  `await writer.appendColumns(chunk)` per chunk of typed arrays (BIGINT, DOUBLE,
 *             TIMESTAMP) and string arrays (STRING), then `flush()`;
 *   arrow     the same with each chunk already an Arrow RecordBatch of the table's schema: no
 *             value conversion is left (JS strings to UTF-8 is the costly one), so this case
 *             measures the write path itself;
 * row and columnar with compression NONE and ZSTD, arrow with NONE. The timer covers appending and the final flush, i.e. until
 * every record is acknowledged; rows and chunks are built before it starts.
 *
 * A run during which other work on the machine took more than 0.25 cores is repeated (support.ts).
 *
 * Baseline, in the same run and on the same file system: `fs.writeSync` in 1 MiB chunks plus one
 * `fdatasync` of (a) as many bytes as the case left in its log segments, right after each case
 * (the median of 3 writes: one alone spread over 4× on a virtual disk), and (b) 48 B per record,
 * the peers' payload. Raw files are kept until the end, as the log's segments are (support.ts,
 * `rawWriteMBps`). "log vs raw" is the bandwidth at which a case wrote
 * its log over the raw bandwidth for the same bytes: 1.0 would mean the server stores data as fast
 * as the disk takes a plain file. Target for columnar NONE: ≥ 0.5.
 *
 *   npm run bench:append [-- --records 2000000 --chunk 32768 --runs 3 --cases columnar:NONE,row:ZSTD
 *                         --client client.writer.batch-size=4mb]
 */
import { parseArgs } from 'node:util';
import type { AppendWriter, Schema } from '../src/client/index.js';
import { ColumnBatchBuilder } from '../src/record/column-batch-builder.js';
import {
  BenchServer,
  clientOptionArgs,
  columnChunks,
  count,
  dirBytes,
  generateWorkload,
  logSegmentBytes,
  measure,
  otherCores,
  type Measured,
  median,
  medianCores,
  PAYLOAD_BYTES_PER_RECORD,
  printHeader,
  printTable,
  rawWriteMBps,
  removeRawFiles,
  spread,
  untilQuiet,
  verdict,
  WORKLOAD_COLUMNS,
  workloadColumns,
  workloadRow,
} from './support.js';

const TARGET_LOG_VS_RAW = 0.5;

type Api = 'row' | 'columnar' | 'arrow';
type Compression = 'NONE' | 'ZSTD' | 'LZ4_FRAME';

const { values: args } = parseArgs({
  options: {
    records: { type: 'string', default: '2000000' },
    chunk: { type: 'string', default: '32768' },
    runs: { type: 'string', default: '3' },
    cases: { type: 'string', default: 'row:NONE,row:ZSTD,columnar:NONE,columnar:ZSTD,arrow:NONE' },
    client: { type: 'string', multiple: true },
  },
});
const clientOptions = clientOptionArgs(args.client);
const records = Number(args.records);
const chunkRows = Number(args.chunk);
const runs = Number(args.runs);
const cases = args.cases.split(',').map((c) => c.split(':') as [Api, Compression]);

interface Run {
  m: Measured;
  logBytes: number;
  tableDir: string;
  /** Raw write bandwidth for `logBytes`, measured right after the run (median of 3). */
  rawMBps: number;
}

printHeader('append', [
  `workload: ${count(records)} records (id BIGINT, user_id BIGINT, item STRING 16 chars, price DOUBLE, ts TIMESTAMP(6)), ${PAYLOAD_BYTES_PER_RECORD} B payload each`,
  'server: child process, defaults (fsync before every ack); one bucket per table',
  `client: ${JSON.stringify(clientOptions)} over the defaults (batch-size 2mb, acks all, idempotent); columnar chunks of ${chunkRows} rows; ${runs} run(s) per case`,
]);

const workload = generateWorkload(records);
const bench = await BenchServer.start({}, clientOptions);
try {
  const results = new Map<string, Run[]>();
  for (let run = 0; run < runs; run++) {
    for (const [api, compression] of cases) {
      const name = `${api} ${compression}`;
      const r = await untilQuiet((tryNumber) => appendCase(api, compression, `append_${api}_${compression.toLowerCase()}_${run}_${tryNumber}`));
      const logMBps = r.logBytes / 1e6 / r.m.seconds;
      console.log(
        `${name} run ${run + 1}: ${count(records / r.m.seconds)} rows/s in ${r.m.seconds.toFixed(2)} s, log ${logMBps.toFixed(0)} MB/s vs raw ${r.rawMBps.toFixed(0)} MB/s = ${(logMBps / r.rawMBps).toFixed(3)}, outside load ${otherCores(r.m).toFixed(2)} cores`,
      );
      results.set(name, [...(results.get(name) ?? []), r]);
    }
  }
  const payloadRawMBps = await rawWriteMBps(records * PAYLOAD_BYTES_PER_RECORD, bench.dataDir);
  await bench.stop(); // disk use is read once indexes and checkpoints are written
  report(results, payloadRawMBps);
} finally {
  removeRawFiles();
  await bench.dispose();
}

async function appendCase(api: Api, compression: Compression, table: string): Promise<Run> {
  const tableDir = await bench.createTable(table, WORKLOAD_COLUMNS, { 'table.log.arrow.compression.type': compression });
  const handle = await bench.table(table);
  const writer = await handle.newAppend().createWriter();
  const append = api === 'row' ? rowAppender() : columnarAppender(api === 'arrow' ? handle.info.schema : undefined);
  const m = await measure(bench.pid, () => append(writer));
  await writer.close();
  const logBytes = logSegmentBytes(tableDir);
  return { m, logBytes, tableDir, rawMBps: await rawWriteMBps(logBytes, bench.dataDir) };
}

/** Builds the input of a row case (untimed) and returns the timed part. */
function rowAppender(): (writer: AppendWriter) => Promise<void> {
  const rows = Array.from({ length: records }, (_, i) => workloadRow(workload, i));
  return async (writer) => {
    for (const row of rows) await writer.append(row);
    await writer.flush();
  };
}

/** Chunks of columns, or with `arrowSchema` the same chunks as Arrow RecordBatches. */
function columnarAppender(arrowSchema?: Schema): (writer: AppendWriter) => Promise<void> {
  const columns = columnChunks(workloadColumns(workload), records, chunkRows);
  const chunks = arrowSchema
    ? columns.map((chunk) => {
        const builder = new ColumnBatchBuilder(arrowSchema);
        builder.appendColumns(chunk);
        return builder.build();
      })
    : columns;
  return async (writer) => {
    for (const chunk of chunks) await writer.appendColumns(chunk);
    await writer.flush();
  };
}

function report(results: Map<string, Run[]>, payloadRawMBps: number): void {
  console.log(`\nraw write (fs.writeSync 1 MiB + fdatasync) of ${PAYLOAD_BYTES_PER_RECORD} B × ${count(records)}: ${payloadRawMBps.toFixed(0)} MB/s = ${count((payloadRawMBps * 1e6) / PAYLOAD_BYTES_PER_RECORD)} records/s`);
  console.log(`rows/s and log vs raw: median (min–max) of ${runs} run(s); other columns: medians\n`);
  const mb = (n: number): string => n.toFixed(1);
  printTable(
    ['case', 'rows/s', 'payload MB/s', 'disk B/rec', 'log MB/s', 'raw MB/s same bytes', 'log vs raw', 'target', 'payload vs raw 48 B', 'client cores', 'server cores', 'other cores'],
    [...results].map(([name, rs]) => {
      const rowsPerSecond = rs.map((r) => records / r.m.seconds);
      const logMBps = rs.map((r) => r.logBytes / 1e6 / r.m.seconds);
      const ratio = rs.map((r, i) => logMBps[i] / r.rawMBps);
      return [
        name,
        spread(rowsPerSecond),
        mb((median(rowsPerSecond) * PAYLOAD_BYTES_PER_RECORD) / 1e6),
        (median(rs.map((r) => dirBytes(r.tableDir))) / records).toFixed(1),
        mb(median(logMBps)),
        median(rs.map((r) => r.rawMBps)).toFixed(0),
        spread(ratio, (n) => n.toFixed(3)),
        name === 'columnar NONE' || name === 'arrow NONE' ? verdict(median(ratio), TARGET_LOG_VS_RAW) : '',
        ((median(rowsPerSecond) * PAYLOAD_BYTES_PER_RECORD) / 1e6 / payloadRawMBps).toFixed(3),
        medianCores(rs.map((r) => r.m), 'client'),
        medianCores(rs.map((r) => r.m), 'server'),
        medianCores(rs.map((r) => r.m), 'other'),
      ];
    }),
  );
}
