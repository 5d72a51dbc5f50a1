import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import * as arrow from 'apache-arrow';
import { addColumns, buildSchema, projectionIn, type Schema } from '../common/schema.js';
import type { Row } from '../common/values.js';
import { arrowIpcStream, decodeArrowPayload, encodeArrowPayload, recordBatchRows } from './arrow-payload.js';
import { toArrowSchema } from './arrow-schema.js';
import { batchLayout, evolvedBatch } from './batch-evolution.js';
import { ColumnBatchBuilder } from './column-batch-builder.js';
import { initArrowCompression } from './compression.js';
import { sampleRows, sampleSchema } from './fixtures/sample.js';
import { projectArrowPayload } from './fixtures/projected.js';

const v0 = buildSchema([{ name: 'id', type: 'BIGINT' }, { name: 'name', type: 'STRING' }]);
/** Every type added later, so that each gets an all-null column. */
const v1 = addColumns(v0, sampleSchema.columns.map((c) => ({ name: `n_${c.name}`, type: c.type })));
const v0Rows: Row[] = [{ id: 1n, name: 'a' }, { id: 2n, name: null }, { id: 3n, name: 'c' }];

function payloadOf(schema: Schema, rows: Row[]): Uint8Array {
  const b = new ColumnBatchBuilder(schema);
  for (const r of rows) b.appendRow(r);
  return encodeArrowPayload(b.build(), 'ZSTD');
}

/** What a reader of `readerColumns` (indexes of `reader`) makes of a payload written with `writer`, projected by the server when `projected`. */
function read(writer: Schema, payload: Uint8Array, reader: Schema, readerColumns: number[] | undefined): arrow.RecordBatch {
  const wanted = readerColumns ? readerColumns.map((i) => reader.columns[i]) : reader.columns;
  const sent = readerColumns ? projectArrowPayload(payload, toArrowSchema(writer), projectionIn(writer, wanted)) : payload;
  const layout = batchLayout(writer, wanted, readerColumns !== undefined);
  const decoded = decodeArrowPayload(layout.decodeSchema, sent);
  return layout.sources ? evolvedBatch(decoded, toArrowSchema(reader, readerColumns), layout.sources) : decoded;
}

const nulls = (schema: Schema, names: string[]): Row => Object.fromEntries(schema.columns.filter((c) => !names.includes(c.name)).map((c) => [c.name, null]));

before(() => initArrowCompression());

describe('batches across schema versions', () => {
  it('reads an older batch in the newer schema, every added column null', () => {
    const batch = read(v0, payloadOf(v0, v0Rows), v1, undefined);
    assert.deepEqual(batch.schema.fields.map((f) => f.name), v1.columns.map((c) => c.name));
    assert.deepEqual(
      recordBatchRows(batch, v1),
      v0Rows.map((r) => ({ ...r, ...nulls(v1, ['id', 'name']) })),
    );
    // The null columns are real Arrow data: they encode, and apache-arrow reads them back.
    const again = encodeArrowPayload(batch, 'LZ4_FRAME');
    assert.deepEqual(recordBatchRows(decodeArrowPayload(toArrowSchema(v1), again), v1), recordBatchRows(batch, v1));
    const [viaArrow] = [...arrow.RecordBatchReader.from(arrowIpcStream(toArrowSchema(v1), [again]))];
    assert.deepEqual(recordBatchRows(viaArrow, v1), recordBatchRows(batch, v1));
  });

  it('maps a server-side projection of an older batch back to the projected columns', () => {
    const payload = payloadOf(v0, v0Rows);
    const s = v1.columns.findIndex((c) => c.name === 'n_s');
    const b = v1.columns.findIndex((c) => c.name === 'n_b');
    assert.deepEqual(recordBatchRows(read(v0, payload, v1, [s, 1, b]), v1), v0Rows.map((r) => ({ n_s: null, name: r.name, n_b: null })));
    // Only added columns: the server sends a batch of no column, whose row count still holds.
    const onlyNew = read(v0, payload, v1, [b, s]);
    assert.deepEqual([onlyNew.numRows, onlyNew.numCols], [3, 2]);
    assert.deepEqual(recordBatchRows(onlyNew, v1), v0Rows.map(() => ({ n_b: null, n_s: null })));
  });

  it('reads a newer batch in an older schema without the columns added since', () => {
    const rows: Row[] = sampleRows.map((r, i) => ({ id: BigInt(i), name: `r${i}`, ...Object.fromEntries(Object.entries(r).map(([k, v]) => [`n_${k}`, v])) }));
    const payload = payloadOf(v1, rows);
    assert.deepEqual(recordBatchRows(read(v1, payload, v0, undefined), v0), rows.map((r) => ({ id: r.id, name: r.name })));
    assert.deepEqual(recordBatchRows(read(v1, payload, v0, [1]), v0), rows.map((r) => ({ name: r.name })));
    // And in its own schema, a projection still gives every value.
    assert.deepEqual(recordBatchRows(read(v1, payload, v1, [3, 0]), v1), rows.map((r) => ({ n_i8: r.n_i8, id: r.id })));
  });

  it('leaves batches of the reader schema as decoded', () => {
    assert.equal(batchLayout(v1, v1.columns, false).sources, undefined);
    assert.equal(batchLayout(v1, [v1.columns[4], v1.columns[0]], true).sources, undefined);
    assert.deepEqual([...batchLayout(v0, [v1.columns[4], v1.columns[0]], true).sources!], [-1, 0]);
  });
});
