/**
 * Changelog payloads, and their byte fixtures checked both ways: decoding each file gives the
 * sample rows and change types, and encoding them gives the file byte for byte. Run with
 * UPDATE_FIXTURES=1 to write the files anew (then review the diff: a change means the format moved).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, describe, it } from 'node:test';
import * as arrow from 'apache-arrow';
import { CHANGE_TYPE_BYTE } from '../common/change-type.js';
import { TributaryError } from '../common/errors.js';
import { buildSchema } from '../common/schema.js';
import { type Row, toInternal } from '../common/values.js';
import { arrowIpcStream, decodeArrowPayload, encodeArrowPayload, recordBatchRows } from './arrow-payload.js';
import { toArrowSchema } from './arrow-schema.js';
import { encodeChangelogPayload, splitChangelogPayload } from './changelog.js';
import { projectChangelogPayload } from './fixtures/projected.js';
import { ColumnBatchBuilder } from './column-batch-builder.js';
import { type ArrowCompression, initArrowCompression } from './compression.js';
import { sampleRows, sampleSchema, FIXTURE_HEADER, FIXTURE_PROJECTION } from './fixtures/sample.js';
import { buildLogBatch, logBatchPayload, readLogBatchHeader, splitLogBatches, stampLogBatch } from './log-batch.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const UPDATE = process.env.UPDATE_FIXTURES === '1';

const arrowSchema = toArrowSchema(sampleSchema);
const CHANGES = Uint8Array.from(['+I', '-U', '+U', '-D'] as const, (c) => CHANGE_TYPE_BYTE[c]);
const COMPRESSIONS: ArrowCompression[] = ['ZSTD', 'LZ4_FRAME', 'NONE'];
const corrupt = (message: RegExp) => (e: unknown): boolean => e instanceof TributaryError && e.errorName === 'CORRUPT_MESSAGE' && message.test(e.message);

/** The rows as the KV tablet builds them: internal values appended in column order. */
function batchOf(rows: Row[], schema = sampleSchema): arrow.RecordBatch {
  const b = new ColumnBatchBuilder(schema);
  for (const row of rows) b.appendInternalRow(schema.columns.map((c) => toInternal(c, row[c.name])));
  return b.build();
}

function select(rows: Row[], columns: readonly number[]): Row[] {
  const names = columns.map((c) => sampleSchema.columns[c].name);
  return rows.map((r) => Object.fromEntries(names.map((n) => [n, r[n]])));
}

/** Decodes an Arrow message with apache-arrow's own stream reader. */
function readWithApacheArrow(schema: arrow.Schema, message: Uint8Array): arrow.RecordBatch {
  const batches = [...arrow.RecordBatchReader.from(arrowIpcStream(schema, [message]))];
  assert.equal(batches.length, 1);
  return batches[0];
}

before(() => initArrowCompression());

describe('changelog payload', () => {
  for (const compression of COMPRESSIONS) {
    it(`${compression}: change types, then an Arrow message apache-arrow reads back to every value`, () => {
      const payload = encodeChangelogPayload(CHANGES, batchOf(sampleRows), compression);
      assert.deepEqual([...payload.subarray(0, 4)], [1, 2, 3, 4]);
      const { changeTypes, arrow: message } = splitChangelogPayload(payload, sampleRows.length);
      assert.deepEqual(changeTypes, CHANGES);
      assert.equal(message.buffer, payload.buffer);
      assert.deepEqual(recordBatchRows(readWithApacheArrow(arrowSchema, message), sampleSchema), sampleRows);
      assert.deepEqual(recordBatchRows(decodeArrowPayload(arrowSchema, message), sampleSchema), sampleRows);
    });

    it(`${compression}: projection gives the bytes of encoding only the projected columns`, () => {
      const many = Array.from({ length: 200 }, (_, i) => sampleRows[i % sampleRows.length]);
      const changes = Uint8Array.from(many, (_, i) => CHANGES[i % CHANGES.length]);
      const payload = encodeChangelogPayload(changes, batchOf(many), compression);
      for (const columns of [[10], [16, 0, 7], [4, 3, 2, 1], [12, 11, 9, 8, 14, 13, 5, 6, 15]]) {
        const projectedSchema = toArrowSchema(sampleSchema, columns);
        const direct = encodeChangelogPayload(changes, batchOf(select(many, columns), buildSchema(columns.map((c) => sampleSchema.columns[c]))), compression);
        const projected = projectChangelogPayload(payload, 200, arrowSchema, columns);
        assert.equal(Buffer.from(projected).toString('hex'), Buffer.from(direct).toString('hex'), String(columns));
        const split = splitChangelogPayload(projected, 200);
        assert.deepEqual(split.changeTypes, changes);
        assert.deepEqual(recordBatchRows(readWithApacheArrow(projectedSchema, split.arrow), sampleSchema), select(many, columns));
      }
      const all = sampleSchema.columns.map((_, i) => i);
      assert.equal(projectChangelogPayload(payload, 200, arrowSchema, all), payload);
    });
  }

  it('is empty for a batch that changed nothing, through encode, split and projection', () => {
    for (const compression of COMPRESSIONS) {
      const payload = encodeChangelogPayload(new Uint8Array(0), batchOf([]), compression);
      assert.equal(payload.length, 0);
      const { changeTypes, arrow: message } = splitChangelogPayload(payload, 0);
      assert.deepEqual([changeTypes.length, message.length], [0, 0]);
      assert.equal(projectChangelogPayload(payload, 0, arrowSchema, [10, 4]), payload);
    }
    const invalidProjection = (e: unknown): boolean => e instanceof TributaryError && e.errorName === 'INVALID_COLUMN_PROJECTION';
    assert.throws(() => projectChangelogPayload(new Uint8Array(0), 0, arrowSchema, [99]), invalidProjection);
    assert.throws(() => projectChangelogPayload(new Uint8Array(0), 0, arrowSchema, [3, 3]), invalidProjection);
    // A batch of no records with bytes in it: an Arrow message of no rows is not the form.
    const zeroRowMessage = encodeArrowPayload(batchOf([]), 'NONE');
    assert.throws(() => splitChangelogPayload(Uint8Array.of(1), 0), corrupt(/1 bytes in a batch of no records/));
    assert.throws(() => projectChangelogPayload(zeroRowMessage, 0, arrowSchema, [0]), corrupt(/in a batch of no records/));
  });

  it('refuses to encode change types that do not match the rows', () => {
    const named = (e: unknown): boolean => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT';
    assert.throws(() => encodeChangelogPayload(CHANGES.subarray(1), batchOf(sampleRows)), named);
    assert.throws(() => encodeChangelogPayload(Uint8Array.of(1, 2, 3, CHANGE_TYPE_BYTE['+A']), batchOf(sampleRows)), named);
    assert.throws(() => encodeChangelogPayload(Uint8Array.of(1, 2, 3, 5), batchOf(sampleRows)), named);
  });

  it('rejects unknown change types, wrong record counts and short payloads as CORRUPT_MESSAGE', () => {
    const payload = encodeChangelogPayload(CHANGES, batchOf(sampleRows), 'NONE');
    for (const bad of [0, 5, 0xff]) {
      const changed = Uint8Array.from(payload);
      changed[2] = bad;
      assert.throws(() => splitChangelogPayload(changed, 4), corrupt(new RegExp(`byte ${bad} of record 2 is not a change type`)));
      assert.throws(() => projectChangelogPayload(changed, 4, arrowSchema, [0]), corrupt(/of record 2 is not a change type/));
    }
    // One record too many: the Arrow message's first byte (0xFF) is taken for a change type.
    assert.throws(() => splitChangelogPayload(payload, 5), corrupt(/byte 255 of record 4/));
    // One too few: the Arrow message would start at the last change type.
    assert.throws(() => splitChangelogPayload(payload, 3), corrupt(/no continuation marker/));
    for (const count of [-1, 1.5, payload.length]) assert.throws(() => splitChangelogPayload(payload, count), corrupt(/cannot hold/), String(count));
    assert.throws(() => splitChangelogPayload(new Uint8Array(0), 1), corrupt(/0 bytes cannot hold 1 change types/));
    // Change types for 3 records before a message of 4 rows.
    const mismatched = Buffer.concat([CHANGES.subarray(0, 3), payload.subarray(4)]);
    assert.throws(() => splitChangelogPayload(mismatched, 3), corrupt(/3 change types but 4 rows/));
  });
});

const { schemaId: SCHEMA_ID, writerId: WRITER_ID, baseOffset: BASE_OFFSET, commitTimestamp: COMMIT_TIMESTAMP, leaderEpoch: LEADER_EPOCH } = FIXTURE_HEADER;
const PROJECTION = FIXTURE_PROJECTION;

interface Fixture {
  file: string;
  rows: Row[];
  changeTypes: Uint8Array;
  columns?: number[];
}

const fixtures: Fixture[] = [
  { file: 'changelog-zstd.batch', rows: sampleRows, changeTypes: CHANGES },
  { file: 'changelog-zstd-projected.batch', rows: sampleRows, changeTypes: CHANGES, columns: PROJECTION },
  { file: 'changelog-empty.batch', rows: [], changeTypes: new Uint8Array(0) },
];

/** The changelog batch as the server appends it (and, projected, as it serves it). */
function encodeFixture({ rows, changeTypes, columns }: Fixture): Buffer {
  const full = encodeChangelogPayload(changeTypes, batchOf(rows), 'ZSTD');
  const payload = columns ? projectChangelogPayload(full, rows.length, arrowSchema, columns) : full;
  const batch = buildLogBatch({ schemaId: SCHEMA_ID, appendOnly: false, recordCount: rows.length, payload, writerId: WRITER_ID, batchSequence: 0 });
  stampLogBatch(batch, 0, BASE_OFFSET, COMMIT_TIMESTAMP, LEADER_EPOCH);
  return batch;
}

describe('changelog batch fixtures', () => {
  for (const fixture of fixtures) {
    const file = path.join(FIXTURES, fixture.file);

    it(`${fixture.file}: encoding the rows and change types gives the file`, () => {
      const encoded = encodeFixture(fixture);
      if (UPDATE) fs.writeFileSync(file, encoded);
      assert.equal(encoded.toString('hex'), fs.readFileSync(file).toString('hex'));
    });

    it(`${fixture.file}: decoding the file gives the rows and change types`, () => {
      const [batch, ...rest] = splitLogBatches(fs.readFileSync(file));
      assert.equal(rest.length, 0);
      const header = readLogBatchHeader(batch);
      assert.deepEqual(
        [header.appendOnly, header.baseOffset, header.lastOffsetDelta, header.schemaId, header.writerId, header.recordCount],
        [false, BASE_OFFSET, Math.max(0, fixture.rows.length - 1), SCHEMA_ID, WRITER_ID, fixture.rows.length],
      );
      const { changeTypes, arrow: message } = splitChangelogPayload(logBatchPayload(batch), header.recordCount);
      assert.deepEqual([...changeTypes], [...fixture.changeTypes]);
      if (header.recordCount === 0) {
        assert.equal(message.length, 0); // nothing to decode
        return;
      }
      const rows = recordBatchRows(readWithApacheArrow(toArrowSchema(sampleSchema, fixture.columns), message), sampleSchema);
      assert.deepEqual(rows, fixture.columns ? select(fixture.rows, fixture.columns) : fixture.rows);
    });
  }
});
