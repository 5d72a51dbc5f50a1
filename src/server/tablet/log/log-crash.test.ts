import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { buildLogBatch, logBatchPayload, readLogBatchHeader } from '../../../record/log-batch.js';
import { type LogConfig, LogTablet, type LogTabletLogger } from './log-tablet.js';
import { testTempDir } from '../../../common/fixtures/temp-dirs.js';

const CHILD = fileURLToPath(new URL('./log-crash-child.ts', import.meta.url));
const CONFIG: LogConfig = {
  segmentBytes: 16 * 1024,
  indexIntervalBytes: 1024,
  recentBytes: 4096,
  // Crashes leave zeros written ahead of the active segment's end, which recovery must cut quietly.
  preallocateBytes: 16384,
  flushIntervalMessages: 1,
  flushIntervalMs: 1000,
  ttlMs: 0,
  writerIdExpirationMs: 86_400_000,
};

interface Ack {
  id: number;
  offset: bigint;
}

/** Runs the child; `onLine` sees each stdout line and may kill it. Resolves with all lines when it exits. */
function runChild(command: string, args: string[], onLine: (line: string, child: ChildProcess) => void): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const lines: string[] = [];
    let pending = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      const parts = (pending + chunk.toString('utf8')).split('\n');
      pending = parts.pop()!;
      for (const line of parts) {
        lines.push(line);
        onLine(line, child);
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code !== 0 && signal !== 'SIGKILL') reject(new Error(`child exited with ${code ?? signal}: ${stderr}`));
      else resolve(lines);
    });
  });
}

function parseAcks(lines: string[]): Ack[] {
  return lines.filter((l) => /^\d+ \d+$/.test(l)).map((l) => ({ id: Number(l.split(' ')[0]), offset: BigInt(l.split(' ')[1]) }));
}

async function readIds(log: LogTablet): Promise<{ ids: number[]; offsets: bigint[]; writerId: bigint }> {
  const ids: number[] = [];
  const offsets: bigint[] = [];
  let writerId = -1n;
  let offset = log.logStartOffset;
  while (offset < log.highWatermark) {
    const { records } = await log.read(offset, 1 << 20);
    for (let pos = 0; pos < records.length; ) {
      const h = readLogBatchHeader(records, pos);
      ids.push(logBatchPayload(records.subarray(pos, pos + h.sizeInBytes)).readUInt32LE(0));
      offsets.push(h.baseOffset);
      writerId = h.writerId;
      offset = h.baseOffset + BigInt(h.lastOffsetDelta) + 1n;
      pos += h.sizeInBytes;
    }
  }
  return { ids, offsets, writerId };
}

function warningsLogger(): LogTabletLogger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, info() {}, warn: (_obj, msg) => warnings.push(msg), error() {} };
}

describe('LogTablet crash safety', () => {
  it('keeps every acknowledged batch exactly once and in order after SIGKILL', async () => {
    const dir = testTempDir('log-crash');
    const lines = await runChild(process.execPath, ['--import', 'tsx', CHILD, dir, 'loop', JSON.stringify(CONFIG)], (line, child) => {
      if (line.startsWith('600 ')) child.kill('SIGKILL');
    });
    const acks = parseAcks(lines);
    assert.ok(acks.length >= 600, `only ${acks.length} acknowledgements before the kill`);

    const log = await LogTablet.open(dir, CONFIG, warningsLogger());
    const { ids, offsets, writerId } = await readIds(log);
    // Appends are written in call order, so the log holds ids 0..n-1: no gap, no duplicate.
    assert.deepEqual(
      ids,
      ids.map((_, i) => i),
    );
    assert.ok(fs.readdirSync(dir).filter((f) => f.endsWith('.log')).length > 3, 'the run should span several segments');
    for (const ack of acks) {
      assert.ok(ack.id < ids.length, `acknowledged batch ${ack.id} is missing`);
      assert.equal(offsets[ack.id], ack.offset, `batch ${ack.id} moved`);
    }
    // The writer state was rebuilt: the last batch is a duplicate, the next one appends.
    const last = ids.length - 1;
    const resend = (id: number) =>
      buildLogBatch({ schemaId: 1, appendOnly: true, recordCount: 1, payload: Buffer.alloc(8), writerId, batchSequence: id });
    const [dup] = await log.append([resend(last)], 0);
    assert.deepEqual([dup.baseOffset, dup.duplicate], [offsets[last], true]);
    const [next] = await log.append([resend(last + 1)], 0);
    assert.deepEqual([next.baseOffset, next.duplicate], [log.logEndOffset - 1n, false]);
    await log.close();
  });

  it('restores a replicated high watermark at least as checkpointed and at most the recovered log end after SIGKILL', async () => {
    const dir = testTempDir('log-crash');
    const lines = await runChild(process.execPath, ['--import', 'tsx', CHILD, dir, 'replicated', JSON.stringify(CONFIG)], (line, child) => {
      if (line.startsWith('600 ')) child.kill('SIGKILL');
    });
    const acks = parseAcks(lines);
    const checkpointed = lines.filter((l) => l.startsWith('hw ')).map((l) => BigInt(l.slice(3)));
    assert.ok(checkpointed.length > 0 && checkpointed.at(-1)! > 0n, `no high watermark checkpoint before the kill: ${checkpointed.join(', ')}`);

    const log = await LogTablet.open(dir, CONFIG, warningsLogger(), { replicated: true });
    assert.ok(log.highWatermark >= checkpointed.at(-1)!, `high watermark ${log.highWatermark} is below the checkpointed ${checkpointed.at(-1)}`);
    assert.ok(log.highWatermark <= log.logEndOffset);
    assert.equal(log.durableEndOffset, log.logEndOffset);
    // Below the high watermark: whole batches, ids 0..n-1, each acknowledged one where it was.
    const { ids, offsets } = await readIds(log);
    assert.deepEqual(
      ids,
      ids.map((_, i) => i),
    );
    for (const ack of acks) if (ack.offset < log.highWatermark) assert.equal(offsets[ack.id], ack.offset, `batch ${ack.id} moved`);
    // Every acknowledged batch is durable, so a follower-read reaches all of them.
    log.advanceHighWatermark(log.durableEndOffset);
    const all = await readIds(log);
    for (const ack of acks) assert.equal(all.offsets[ack.id], ack.offset, `acknowledged batch ${ack.id} is missing or moved`);
    await log.close();
  });

  it('cuts a failed write off the file when the disk is full, keeping acknowledged batches', async () => {
    const dir = testTempDir('log-full');
    const child = `ulimit -f 64 && exec "$0" --import tsx "$@"`; // 64 KiB per file
    const lines = await runChild('bash', ['-c', child, process.execPath, CHILD, dir, 'disk-full', JSON.stringify({ ...CONFIG, segmentBytes: 1 << 20 })], () => {});
    const acks = parseAcks(lines);
    const failure = lines.find((l) => l.startsWith('error '))?.split(' ');
    assert.ok(failure, lines.join('\n'));
    assert.equal(failure[1], 'LOG_STORAGE_EXCEPTION');
    assert.ok(acks.length > 30, `only ${acks.length} batches fit under the limit`);
    assert.equal(BigInt(failure[2]), BigInt(acks.length), 'the failed batch must not be visible');

    const segment = path.join(dir, '00000000000000000000.log');
    assert.equal(fs.statSync(segment).size % (1000 + 56), 0, 'a partial batch was left in the file');
    const logger = warningsLogger();
    const log = await LogTablet.open(dir, CONFIG, logger);
    assert.deepEqual(logger.warnings, []);
    const { ids } = await readIds(log);
    assert.deepEqual(
      ids,
      acks.map((a) => a.id),
    );
    await log.close();
  });
});
