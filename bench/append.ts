/**
 * Append throughput: how fast one Node client gets the workload durably into a log table of a
 * server running in another process, against the raw speed of the disk measured in the same run.
 *
 * The server runs as a child process with its defaults (log.flush.interval-messages = 1: every
 * acknowledged batch is fsynced). For each compression (NONE, ZSTD) a fresh one-bucket log table
 * receives the whole workload through:
 *   row      `await writer.append(row)` for every record, then `flush()`;
 *   columnar `await writer.appendColumns(chunk)` for chunks of typed arrays and string arrays,
 *            then `flush()`.
 * The timer covers appending and the final flush (everything acknowledged). Rows and chunks are
 * built before it starts.
 *
 * Baseline: `fs.writeSync` in 1 MiB chunks plus one `fdatasync` of (a) exactly as many bytes as
 * the case left in its log segments and (b) 48 B per record, the peers' payload. The headline
 * ratio is the bandwidth at which a case wrote its log bytes over the raw bandwidth for the same
 * bytes (target for columnar: ≥ 0.5).
 *
 *   npm run bench:append [-- --records 2000000 --chunk 32768]
 */
import { parseArgs } from 'node:util';
import type { AppendWriter } from '../src/client/index.js';
import {
  count,
  DATABASE,
  dirBytes,
  cores,
  columnChunks,
  generateWorkload,
  logSegmentBytes,
  measure,
  type Measured,
  PAYLOAD_BYTES_PER_RECORD,
  printHeader,
  printTable,
  rawWriteMBps,
  startServer,
  stopServer,
  tableLogDir,
  versusTarget,
  WORKLOAD_COLUMNS,
  workloadColumns,
  workloadRow,
} from './support.js';

const TARGET_COLUMNAR_VS_RAW = 0.5;

const { values: args } = parseArgs({
  options: {
    records: { type: 'string', default: '2000000' },
    chunk: { type: 'string', default: '32768' },
    cases: { type: 'string', default: 'row:NONE,row:ZSTD,columnar:NONE,columnar:ZSTD' },
  },
});
const records = Number(args.records);
const chunkRows = Number(args.chunk);
const cases = args.cases.split(',').map((c) => c.split(':') as [Api, Compression]);

type Api = 'row' | 'columnar';
type Compression = 'NONE' | 'ZSTD';

interface Result {
  api: Api;
  compression: Compression;
  m: Measured;
  logBytes: number;
  tableDir: string;
  rawMBps: number;
}

printHeader('append', [
  `workload: ${count(records)} records (id BIGINT, user_id BIGINT, item STRING(16 chars), price DOUBLE, ts TIMESTAMP(6)), ${PAYLOAD_BYTES_PER_RECORD} B payload each`,
  `server: child process, defaults (log.flush.interval-messages=1, fsync before every ack); one bucket per table`,
  `client: defaults (batch-size 2mb, acks all, idempotent); columnar chunks of ${chunkRows} rows`,
]);

const workload = generateWorkload(records);

const bench = await startServer();
const results: Result[] = [];
try {
  for (const [api, compression] of cases) {
      const table = `append_${api}_${compression.toLowerCase()}`;
      const tableId = await bench.conn.getAdmin().createTable(
        { database: DATABASE, table },
        { columns: WORKLOAD_COLUMNS, properties: { 'table.log.arrow.compression.type': compression } },
      );
      const writer = await (await bench.conn.getTable({ database: DATABASE, table })).newAppend().createWriter();
      const append = api === 'row' ? rowAppender() : columnarAppender();
      const m = await measure(bench.server.child.pid, () => append(writer));
      await writer.close();
      const tableDir = tableLogDir(bench.server.dataDir, table, tableId);
      const logBytes = logSegmentBytes(tableDir);
      const rawMBps = rawWriteMBps(logBytes, bench.server.dataDir);
      results.push({ api, compression, m, logBytes, tableDir, rawMBps });
      console.log(`${api} ${compression}: ${count(records / m.seconds)} rows/s in ${m.seconds.toFixed(2)} s`);
  }
  const payloadRawMBps = rawWriteMBps(records * PAYLOAD_BYTES_PER_RECORD, bench.server.dataDir);
  // Disk use is read after a graceful stop, once indexes and checkpoints are written.
  await stopServer(bench, true);
  report(payloadRawMBps);
} finally {
  await stopServer(bench).catch(() => undefined);
}

/** Builds the case's input (untimed) and returns the timed part; the input is garbage once it ran. */
function rowAppender(): (writer: AppendWriter) => Promise<void> {
  const rows = Array.from({ length: records }, (_, i) => workloadRow(workload, i));
  return async (writer) => {
    for (const row of rows) await writer.append(row);
    await writer.flush();
  };
}

function columnarAppender(): (writer: AppendWriter) => Promise<void> {
  const chunks = columnChunks(workloadColumns(workload), records, chunkRows);
  return async (writer) => {
    for (const chunk of chunks) await writer.appendColumns(chunk);
    await writer.flush();
  };
}

function report(payloadRawMBps: number): void {
  console.log(`\nraw write baseline (fs.writeSync 1 MiB + fdatasync) of ${PAYLOAD_BYTES_PER_RECORD} B × ${count(records)}: ${payloadRawMBps.toFixed(0)} MB/s = ${count((payloadRawMBps * 1e6) / PAYLOAD_BYTES_PER_RECORD)} records/s\n`);
  printTable(
    ['case', 'rows/s', 'payload MB/s', 'log B/rec', 'disk B/rec', 'log MB/s', 'raw MB/s same bytes', 'log vs raw', 'rows/s vs raw 48 B', 'client cores', 'server cores'],
    results.map((r) => {
      const logMBps = r.logBytes / 1e6 / r.m.seconds;
      const ratio = logMBps / r.rawMBps;
      return [
        `${r.api} ${r.compression}`,
        count(records / r.m.seconds),
        (((records / r.m.seconds) * PAYLOAD_BYTES_PER_RECORD) / 1e6).toFixed(1),
        (r.logBytes / records).toFixed(1),
        (dirBytes(r.tableDir) / records).toFixed(1),
        logMBps.toFixed(1),
        r.rawMBps.toFixed(0),
        r.api === 'columnar' ? versusTarget(ratio, TARGET_COLUMNAR_VS_RAW) : ratio.toFixed(2),
        (((records / r.m.seconds) * PAYLOAD_BYTES_PER_RECORD) / 1e6 / payloadRawMBps).toFixed(3),
        cores(r.m.clientCpu, r.m.seconds),
        cores(r.m.serverCpu, r.m.seconds),
      ];
    }),
  );
}
