import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { CHANGE_TYPE_BYTE } from '../common/change-type.js';
import { type Row, toInternal } from '../common/values.js';
import { decodeArrowPayload, encodeArrowPayload, recordBatchRows } from './arrow-payload.js';
import { toArrowSchema } from './arrow-schema.js';
import { type BatchCut, cutLogBatch } from './batch-projection.js';
import { encodeChangelogPayload } from './changelog.js';
import { ColumnBatchBuilder } from './column-batch-builder.js';
import { initArrowCompression } from './compression.js';
import { sampleRows, sampleSchema } from './fixtures/sample.js';
import { buildLogBatch, isCrcValid, logBatchPayload, readLogBatchHeader, sealLogBatch, stampLogBatch } from './log-batch.js';
import { applyCut, projectChangelogPayload } from './fixtures/projected.js';

const arrowSchema = toArrowSchema(sampleSchema);
const COLUMNS = [10, 0, 7];

function rowsBatch(rows: Row[]) {
  const b = new ColumnBatchBuilder(sampleSchema);
  for (const row of rows) b.appendInternalRow(sampleSchema.columns.map((c) => toInternal(c, row[c.name])));
  return b.build();
}

const many = (n: number): Row[] => Array.from({ length: n }, (_, i) => sampleRows[i % sampleRows.length]);

function stored(payload: Uint8Array, recordCount: number, appendOnly: boolean): Buffer {
  const batch = buildLogBatch({ schemaId: 1, appendOnly, recordCount, payload, writerId: 9n, batchSequence: 4 });
  stampLogBatch(batch, 0, 1000n, 1_700_000_000_123n, 3);
  return batch;
}

/** Cuts `batch` from heads as short as planning allows, growing them as asked; makes the copies from the whole batch. */
function cutFromHeads(batch: Buffer, columns: readonly number[]): { made: Buffer; asked: number[] } {
  const asked: number[] = [];
  let cut = cutLogBatch(batch.subarray(0, 1), () => ({ arrowSchema, columns }));
  while (typeof cut === 'number') {
    assert.ok(cut <= batch.length, `asks for ${cut} of ${batch.length} bytes`);
    asked.push(cut);
    cut = cutLogBatch(batch.subarray(0, cut), () => ({ arrowSchema, columns }));
  }
  const made = applyCut(cut, batch) as Buffer;
  assert.equal(made, (cut as BatchCut).out);
  sealLogBatch(made);
  return { made, asked };
}

before(() => initArrowCompression());

describe('cutLogBatch', () => {
  it('cuts an append-only batch to the kept columns, planned from its header and metadata alone', () => {
    const rows = many(300);
    const payload = encodeArrowPayload(rowsBatch(rows), 'NONE');
    const batch = stored(payload, rows.length, true);
    const { made, asked } = cutFromHeads(batch, COLUMNS);
    assert.equal(asked.length, 3, 'header, then the Arrow prefix, then the metadata');
    assert.ok(asked[2] < batch.length / 4, `planning read ${asked[2]} of ${batch.length} bytes`);
    assert.ok(isCrcValid(made));
    const before = readLogBatchHeader(batch);
    const after = readLogBatchHeader(made);
    assert.deepEqual({ ...after, sizeInBytes: 0, crc: 0 }, { ...before, sizeInBytes: 0, crc: 0, statisticsLength: 0 });
    assert.equal(made.length, after.sizeInBytes);
    const projected = recordBatchRows(decodeArrowPayload(toArrowSchema(sampleSchema, COLUMNS), logBatchPayload(made)), sampleSchema);
    const names = COLUMNS.map((c) => sampleSchema.columns[c].name);
    assert.deepEqual(projected, rows.map((r) => Object.fromEntries(names.map((n) => [n, r[n]]))));
  });

  it('cuts a changelog batch as projectChangelogPayload does, change types first', () => {
    const rows = many(200);
    const changes = Uint8Array.from(rows, (_, i) => CHANGE_TYPE_BYTE[(['+I', '-U', '+U', '-D'] as const)[i % 4]]);
    const payload = encodeChangelogPayload(changes, rowsBatch(rows), 'LZ4_FRAME');
    const batch = stored(payload, rows.length, false);
    const { made } = cutFromHeads(batch, COLUMNS);
    assert.ok(isCrcValid(made));
    assert.deepEqual(Buffer.from(logBatchPayload(made)), Buffer.from(projectChangelogPayload(payload, rows.length, arrowSchema, COLUMNS)));
  });

  it('keeps a batch whose projection is all of it, and an empty changelog batch, whole but for statistics', () => {
    const rows = many(20);
    const payload = encodeArrowPayload(rowsBatch(rows), 'NONE');
    const all = sampleSchema.columns.map((_, i) => i);
    const whole = stored(payload, rows.length, true);
    assert.deepEqual(cutFromHeads(whole, all).made, whole);
    const empty = stored(new Uint8Array(0), 0, false);
    assert.deepEqual(cutFromHeads(empty, COLUMNS).made, empty);
  });

  it('refuses corrupt stored metadata with CORRUPT_MESSAGE', () => {
    const rows = many(20);
    const batch = stored(encodeArrowPayload(rowsBatch(rows), 'NONE'), rows.length, true);
    batch.writeInt32LE(0x7fff, 56 + 4); // metadata size beyond the batch
    assert.throws(() => cutLogBatch(batch, () => ({ arrowSchema, columns: COLUMNS })), { errorName: 'CORRUPT_MESSAGE' });
  });
});
