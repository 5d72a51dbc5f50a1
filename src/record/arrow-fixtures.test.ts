/**
 * Byte fixtures of log batches with ARROW payloads, checked both ways: decoding each file gives
 * the sample rows, and encoding the sample rows gives the file byte for byte. Run with
 * UPDATE_FIXTURES=1 to write the files anew (then review the diff: a change means the format moved).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, describe, it } from 'node:test';
import { type Row } from '../common/values.js';
import { decodeArrowPayload, encodeArrowPayload, recordBatchRows } from './arrow-payload.js';
import { toArrowSchema } from './arrow-schema.js';
import { ColumnBatchBuilder } from './column-batch-builder.js';
import { type ArrowCompression, initArrowCompression } from './compression.js';
import { sampleRows, sampleSchema, FIXTURE_HEADER, FIXTURE_PROJECTION } from './fixtures/sample.js';
import { buildLogBatch, logBatchPayload, readLogBatchHeader, splitLogBatches, stampLogBatch } from './log-batch.js';
import { projectArrowPayload } from './fixtures/projected.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const UPDATE = process.env.UPDATE_FIXTURES === '1';

const { schemaId: SCHEMA_ID, writerId: WRITER_ID, baseOffset: BASE_OFFSET, commitTimestamp: COMMIT_TIMESTAMP, leaderEpoch: LEADER_EPOCH } = FIXTURE_HEADER;
const PROJECTION = FIXTURE_PROJECTION;

interface Fixture {
  file: string;
  compression: ArrowCompression;
  columns?: number[];
}

const fixtures: Fixture[] = [
  { file: 'sample-zstd.batch', compression: 'ZSTD' },
  { file: 'sample-lz4-frame.batch', compression: 'LZ4_FRAME' },
  { file: 'sample-none.batch', compression: 'NONE' },
  { file: 'sample-zstd-projected.batch', compression: 'ZSTD', columns: PROJECTION },
];

/** The log batch of the sample rows, as a writer builds it and the server stamps it. */
function encodeFixture({ compression, columns }: Fixture): Buffer {
  const b = new ColumnBatchBuilder(sampleSchema);
  for (const row of sampleRows) b.appendRow(row);
  const full = encodeArrowPayload(b.build(), compression);
  const payload = columns ? projectArrowPayload(full, toArrowSchema(sampleSchema), columns) : full;
  const batch = buildLogBatch({ schemaId: SCHEMA_ID, appendOnly: true, recordCount: sampleRows.length, payload, writerId: WRITER_ID, batchSequence: 0 });
  stampLogBatch(batch, 0, BASE_OFFSET, COMMIT_TIMESTAMP, LEADER_EPOCH);
  return batch;
}

function expectedRows(columns?: number[]): Row[] {
  if (!columns) return sampleRows;
  const names = columns.map((c) => sampleSchema.columns[c].name);
  return sampleRows.map((r) => Object.fromEntries(names.map((n) => [n, r[n]])));
}

before(() => initArrowCompression());

describe('ARROW log batch fixtures', () => {
  for (const fixture of fixtures) {
    const file = path.join(FIXTURES, fixture.file);

    it(`${fixture.file}: encoding the sample rows gives the file`, () => {
      const encoded = encodeFixture(fixture);
      if (UPDATE) fs.writeFileSync(file, encoded);
      assert.equal(encoded.toString('hex'), fs.readFileSync(file).toString('hex'));
    });

    it(`${fixture.file}: decoding the file gives the sample rows`, () => {
      const [batch, ...rest] = splitLogBatches(fs.readFileSync(file));
      assert.equal(rest.length, 0);
      const header = readLogBatchHeader(batch);
      assert.deepEqual(
        [header.baseOffset, header.commitTimestamp, header.leaderEpoch, header.schemaId, header.writerId, header.recordCount],
        [BASE_OFFSET, COMMIT_TIMESTAMP, LEADER_EPOCH, SCHEMA_ID, WRITER_ID, sampleRows.length],
      );
      const decoded = decodeArrowPayload(toArrowSchema(sampleSchema, fixture.columns), logBatchPayload(batch));
      assert.deepEqual(recordBatchRows(decoded, sampleSchema), expectedRows(fixture.columns));
    });
  }
});
