import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import * as arrow from 'apache-arrow';
import { buildSchema } from '../common/schema.js';
import { type Row } from '../common/values.js';
import { arrowIpcStream, decodeArrowPayload, encodeArrowPayload, readPayloadMessage, recordBatchRows } from './arrow-payload.js';
import { toArrowSchema } from './arrow-schema.js';
import { ColumnBatchBuilder } from './column-batch-builder.js';
import { type ArrowCompression, initArrowCompression } from './compression.js';
import { sampleRows, sampleSchema } from './fixtures/sample.js';
import { projectArrowPayload } from './fixtures/projected.js';

const arrowSchema = toArrowSchema(sampleSchema);

/** Many rows, so that buffers are large enough to compress. */
function payloadOf(compression: ArrowCompression): Uint8Array {
  const b = new ColumnBatchBuilder(sampleSchema);
  for (let i = 0; i < 200; i++) b.appendRow(sampleRows[i % sampleRows.length]);
  return encodeArrowPayload(b.build(), compression);
}

function select(rows: Row[], columns: number[]): Row[] {
  return rows.map((r) => Object.fromEntries(columns.map((c) => [sampleSchema.columns[c].name, r[sampleSchema.columns[c].name]])));
}

/** Stored bytes of each body buffer. */
function buffersOf(payload: Uint8Array, schema: arrow.Schema): Buffer[] {
  const { header, body } = readPayloadMessage(payload, schema);
  return header.buffers.map((r) => Buffer.from(body.subarray(r.offset, r.offset + r.length)));
}

before(() => initArrowCompression());

describe('projectArrowPayload', () => {
  const projections = [[10], [16, 0, 7], [4, 3, 2, 1], [12, 11, 9, 8, 14, 13, 5, 6, 15]];
  for (const compression of ['NONE', 'ZSTD', 'LZ4_FRAME'] as const) {
    it(`${compression}: gives the chosen columns, in order, to apache-arrow's reader and ours`, () => {
      const payload = payloadOf(compression);
      const all = recordBatchRows(decodeArrowPayload(arrowSchema, payload), sampleSchema);
      for (const columns of projections) {
        const projected = projectArrowPayload(payload, arrowSchema, columns);
        const projectedSchema = toArrowSchema(sampleSchema, columns);
        const expected = select(all, columns);
        assert.deepEqual(recordBatchRows(decodeArrowPayload(projectedSchema, projected), sampleSchema), expected, String(columns));
        const [read] = [...arrow.RecordBatchReader.from(arrowIpcStream(projectedSchema, [projected]))];
        assert.deepEqual(recordBatchRows(read, sampleSchema), expected, `apache-arrow ${columns}`);
        assert.ok(projected.length < payload.length);
      }
    });

    it(`${compression}: copies the stored buffers unchanged and keeps the compression`, () => {
      const payload = payloadOf(compression);
      const stored = buffersOf(payload, arrowSchema);
      // Nine fixed-width columns of 2 buffers each, CHAR 'c' with 3, then STRING 's' (column 10) at 21-23.
      const projected = projectArrowPayload(payload, arrowSchema, [10, 0]);
      const projectedSchema = toArrowSchema(sampleSchema, [10, 0]);
      assert.deepEqual(buffersOf(projected, projectedSchema), [stored[21], stored[22], stored[23], stored[0], stored[1]]);
      const { header } = readPayloadMessage(projected, projectedSchema);
      assert.equal(header.compression?.type, readPayloadMessage(payload, arrowSchema).header.compression?.type);
      assert.equal(header.length, 200);
    });
  }

  for (const compression of ['NONE', 'ZSTD', 'LZ4_FRAME'] as const) {
    it(`${compression}: gives the bytes of encoding the projected columns directly`, () => {
      const columns = [10, 4, 0, 7];
      const projectedSchema = buildSchema(columns.map((c) => sampleSchema.columns[c]));
      const b = new ColumnBatchBuilder(projectedSchema);
      for (let i = 0; i < 200; i++) b.appendRow(select([sampleRows[i % sampleRows.length]], columns)[0]);
      const direct = Buffer.from(encodeArrowPayload(b.build(), compression));
      assert.equal(Buffer.from(projectArrowPayload(payloadOf(compression), arrowSchema, columns)).toString('hex'), direct.toString('hex'));
    });
  }

  it('projects empty batches', () => {
    const payload = encodeArrowPayload(new ColumnBatchBuilder(sampleSchema).build(), 'ZSTD');
    const projected = projectArrowPayload(payload, arrowSchema, [3, 10]);
    assert.equal(decodeArrowPayload(toArrowSchema(sampleSchema, [3, 10]), projected).numRows, 0);
  });

  it('returns the payload itself for all columns in schema order', () => {
    const payload = payloadOf('ZSTD');
    assert.equal(projectArrowPayload(payload, arrowSchema, sampleSchema.columns.map((_, i) => i)), payload);
  });

  it('keeps only the row count for a projection on no column', () => {
    for (const compression of ['NONE', 'ZSTD'] as const) {
      const projected = projectArrowPayload(payloadOf(compression), arrowSchema, []);
      const batch = decodeArrowPayload(toArrowSchema(sampleSchema, []), projected);
      assert.deepEqual([batch.numRows, batch.numCols], [200, 0]);
      const [read] = [...arrow.RecordBatchReader.from(arrowIpcStream(toArrowSchema(sampleSchema, []), [projected]))];
      assert.equal(read.numRows, 200);
    }
  });

  it('rejects out-of-range and repeated projections', () => {
    const payload = payloadOf('NONE');
    for (const columns of [[17], [-1], [2, 2]]) {
      assert.throws(() => projectArrowPayload(payload, arrowSchema, columns), { errorName: 'INVALID_COLUMN_PROJECTION' }, String(columns));
    }
  });

  it('rejects payloads of another schema and malformed payloads', () => {
    const payload = payloadOf('LZ4_FRAME');
    const narrower = toArrowSchema(sampleSchema, [0, 1]);
    assert.throws(() => projectArrowPayload(payload, narrower, [0]), { errorName: 'CORRUPT_MESSAGE' });
    assert.throws(() => projectArrowPayload(payload.subarray(0, payload.length - 8), arrowSchema, [0]), { errorName: 'CORRUPT_MESSAGE' });
  });
});
