/**
 * Child process of log-crash.test.ts:
 *   node --import tsx log-crash-child.ts <dir> <mode> <LogConfig as JSON>
 *
 * - `loop`: four concurrent loops append batches of one idempotent writer (batch sequence = id,
 *   the id also in the first 4 payload bytes) and print `<id> <baseOffset>` for each acknowledged
 *   batch, until the test kills the process.
 * - `disk-full`: run under a file size limit; appends 1 KiB batches the same way until an append
 *   fails, then prints `error <errorName> <highWatermark>` and closes the log.
 * - `replicated`: a replicated log; the loops append as in `loop` (waiting for 'durable') and move
 *   the high watermark to the start of the batch just acknowledged (a follower one batch behind),
 *   while a fifth loop checkpoints and prints `hw <offset>` once a checkpoint taken at that high
 *   watermark or later is written.
 */
import { TributaryError } from '../../../common/errors.js';
import { buildLogBatch } from '../../../record/log-batch.js';
import { LogTablet } from './log-tablet.js';

const [dir, mode, configJson] = process.argv.slice(2);
const WRITER_ID = 42n;

function batch(id: number, payloadBytes: number): Buffer {
  const payload = Buffer.alloc(payloadBytes, 0x5a);
  payload.writeUInt32LE(id, 0);
  return buildLogBatch({ schemaId: 1, appendOnly: true, recordCount: 1, payload, writerId: WRITER_ID, batchSequence: id });
}

const log = await LogTablet.open(dir, JSON.parse(configJson), undefined, { replicated: mode === 'replicated' });
if (mode === 'disk-full') {
  // Past the file size limit a write fails with EFBIG instead of the signal killing the process.
  process.on('SIGXFSZ', () => {});
  for (let id = 0; ; id++) {
    try {
      const [r] = await log.append([batch(id, 1000)], 0);
      process.stdout.write(`${id} ${r.baseOffset}\n`);
    } catch (err) {
      process.stdout.write(`error ${err instanceof TributaryError ? err.errorName : String(err)} ${log.highWatermark}\n`);
      break;
    }
  }
  await log.close();
} else {
  const replicated = mode === 'replicated';
  let next = 0;
  const loop = async (): Promise<void> => {
    for (;;) {
      const id = next++;
      const [r] = await log.append([batch(id, 100 + (id % 13) * 50)], 0, replicated ? 'durable' : 'high-watermark');
      if (replicated) log.advanceHighWatermark(r.baseOffset);
      process.stdout.write(`${id} ${r.baseOffset}\n`);
    }
  };
  const checkpoints = async (): Promise<void> => {
    for (;;) {
      const hw = log.highWatermark;
      await log.checkpoint();
      process.stdout.write(`hw ${hw}\n`);
    }
  };
  await Promise.all([loop(), loop(), loop(), loop(), ...(replicated ? [checkpoints()] : [])]);
}
