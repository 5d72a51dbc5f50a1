import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import * as arrow from 'apache-arrow';
import { buildSchema } from '../common/schema.js';
import { BodyCompression, FieldNode, Message, RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';
import {
  arrowIpcStream,
  arrowPayloadRecordCount,
  checkArrowPayload,
  decodeArrowPayload,
  encodeArrowPayload,
  frameMessage,
  readPayloadMessage,
  recordBatchRows,
} from './arrow-payload.js';
import { toArrowSchema } from './arrow-schema.js';
import { ColumnBatchBuilder } from './column-batch-builder.js';
import { type ArrowCompression, initArrowCompression } from './compression.js';
import { sampleRows, sampleSchema } from './fixtures/sample.js';

const COMPRESSIONS: ArrowCompression[] = ['NONE', 'ZSTD', 'LZ4_FRAME'];
const arrowSchema = toArrowSchema(sampleSchema);

function sampleBatch(): arrow.RecordBatch {
  const b = new ColumnBatchBuilder(sampleSchema);
  for (const row of sampleRows) b.appendRow(row);
  return b.build();
}

/** The single encapsulated message of an apache-arrow stream holding one record batch. */
function messageOfArrowStream(stream: Uint8Array): Uint8Array {
  const schemaEnd = 8 + Buffer.from(stream.buffer, stream.byteOffset).readInt32LE(4);
  return stream.subarray(schemaEnd, stream.length - 8);
}

before(() => initArrowCompression());

describe('ARROW payloads', () => {
  for (const compression of COMPRESSIONS) {
    it(`${compression}: apache-arrow's stream reader reads schema + payloads + end of stream`, () => {
      const batch = sampleBatch();
      const payload = encodeArrowPayload(batch, compression);
      const reader = arrow.RecordBatchReader.from(arrowIpcStream(arrowSchema, [payload, payload]));
      const batches = [...reader];
      assert.equal(batches.length, 2);
      for (const read of batches) {
        assert.deepEqual(recordBatchRows(read, sampleSchema), sampleRows);
        assert.equal(read.getChild('s')!.get(1), sampleRows[1].s);
        assert.equal(read.getChild('i64')!.get(0), -(2n ** 63n));
        assert.equal(read.getChild('f64')!.get(2), null);
      }
      assert.equal(arrow.tableFromIPC(arrowIpcStream(arrowSchema, [payload])).numRows, sampleRows.length);
    });

    it(`${compression}: decodes with the table's Arrow schema`, () => {
      const payload = encodeArrowPayload(sampleBatch(), compression);
      assert.equal(arrowPayloadRecordCount(payload), sampleRows.length);
      assert.deepEqual(recordBatchRows(decodeArrowPayload(arrowSchema, payload), sampleSchema), sampleRows);
    });
  }

  it('starts its body 8-byte aligned and is a multiple of 8 bytes long', () => {
    for (const compression of COMPRESSIONS) {
      const payload = Buffer.from(encodeArrowPayload(sampleBatch(), compression));
      assert.equal(payload.readInt32LE(0), -1);
      assert.equal((8 + payload.readInt32LE(4)) % 8, 0);
      assert.equal(payload.length % 8, 0);
    }
  });

  it('reads the record batch messages apache-arrow writes', () => {
    const batch = sampleBatch();
    const message = messageOfArrowStream(arrow.tableToIPC(new arrow.Table(batch), 'stream'));
    assert.deepEqual(recordBatchRows(decodeArrowPayload(arrowSchema, message), sampleSchema), sampleRows);
  });

  it("encodes columns that share memory (which apache-arrow 21.2.0's own writer corrupts)", () => {
    const shared = new BigInt64Array([1n, 2n, 3n, 4n]);
    const fields = [new arrow.Field('a', new arrow.Int64(), false), new arrow.Field('b', new arrow.Int64(), false)];
    const schema = new arrow.Schema(fields);
    const children = fields.map((f) => arrow.makeData({ type: f.type, length: 4, data: shared }));
    const batch = new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(fields), length: 4, children }));
    for (const compression of COMPRESSIONS) {
      const table = arrow.tableFromIPC(arrowIpcStream(schema, [encodeArrowPayload(batch, compression)]));
      assert.deepEqual([...table.getChild('b')!], [1n, 2n, 3n, 4n], compression);
    }
  });

  it('encodes into memory from an allocator whatever that memory held, headroom left as it was', () => {
    for (const compression of COMPRESSIONS) {
      const expected = encodeArrowPayload(sampleBatch(), compression);
      const sizes: number[] = [];
      const dirty = (size: number): Uint8Array => {
        sizes.push(size);
        return new Uint8Array(size).fill(0xa5);
      };
      const payload = encodeArrowPayload(sampleBatch(), compression, 3, 16, dirty);
      assert.deepEqual(sizes, [16 + expected.length], compression);
      assert.deepEqual(Buffer.from(payload), Buffer.from(expected), compression);
      assert.equal(payload.byteOffset, 16);
      assert.ok(new Uint8Array(payload.buffer, 0, 16).every((b) => b === 0xa5), 'the headroom is not written');
    }
  });

  it('decodes payloads lying at any offset of a larger buffer', () => {
    const payload = encodeArrowPayload(sampleBatch(), 'NONE');
    const frame = Buffer.alloc(payload.length + 3);
    frame.set(payload, 3);
    assert.deepEqual(recordBatchRows(decodeArrowPayload(arrowSchema, frame.subarray(3)), sampleSchema), sampleRows);
  });

  it('gives rows of projected batches by column name', () => {
    const batch = decodeArrowPayload(arrowSchema, encodeArrowPayload(sampleBatch(), 'NONE'));
    const projected = new arrow.RecordBatch({ ltz: batch.getChild('ltz')!.data[0], c: batch.getChild('c')!.data[0] });
    assert.deepEqual(recordBatchRows(projected, sampleSchema), sampleRows.map((r) => ({ ltz: r.ltz, c: r.c })));
    const other = new arrow.RecordBatch({ nope: batch.getChild('c')!.data[0] });
    assert.throws(() => recordBatchRows(other, sampleSchema), { errorName: 'INVALID_ARGUMENT' });
  });

  it('rejects malformed payloads with CORRUPT_MESSAGE', () => {
    const good = Buffer.from(encodeArrowPayload(sampleBatch(), 'ZSTD'));
    const metadataSize = good.readInt32LE(4);
    const mutated = (change: (b: Buffer) => void): Buffer => {
      const b = Buffer.from(good);
      change(b);
      return b;
    };
    const bad: [string, Uint8Array][] = [
      ['empty', new Uint8Array(0)],
      ['no continuation marker', mutated((b) => b.writeInt32LE(0, 0))],
      ['metadata beyond the end', mutated((b) => b.writeInt32LE(good.length, 4))],
      ['negative metadata size', mutated((b) => b.writeInt32LE(-8, 4))],
      ['garbage metadata', mutated((b) => b.fill(0xff, 8, 8 + metadataSize))],
      ['truncated body', good.subarray(0, good.length - 8)],
      ['bytes after the body', Buffer.concat([good, Buffer.alloc(8)])],
      ['corrupt compressed buffer', mutated((b) => b.fill(0x33, good.length - 40, good.length - 8))],
    ];
    for (const [why, payload] of bad) {
      assert.throws(() => decodeArrowPayload(arrowSchema, payload), { errorName: 'CORRUPT_MESSAGE' }, why);
    }
    assert.throws(() => arrowPayloadRecordCount(good.subarray(0, 4)), { errorName: 'CORRUPT_MESSAGE' });
  });

  it('rejects payloads that do not fit the schema', () => {
    const ints = buildSchema([{ name: 'v', type: 'INT' }]);
    const b = new ColumnBatchBuilder(ints);
    for (let i = 0; i < 10; i++) b.appendRow({ v: i });
    const payload = encodeArrowPayload(b.build(), 'NONE');
    assert.throws(() => decodeArrowPayload(arrowSchema, payload), { errorName: 'CORRUPT_MESSAGE' }, 'column count');
    const wider = toArrowSchema(buildSchema([{ name: 'v', type: 'BIGINT' }]));
    assert.throws(() => decodeArrowPayload(wider, payload), /column 'v': values too short for 10 values/);
  });
});

describe('checkArrowPayload', () => {
  /** The payload with its metadata rewritten by `change`, body kept. */
  function withHeader(payload: Uint8Array, change: (h: RecordBatchHeader) => RecordBatchHeader): Uint8Array {
    const { header, body } = readPayloadMessage(payload, arrowSchema);
    const { out, bodyStart } = frameMessage(Message.encode(Message.from(change(header), body.length)), body.length);
    out.set(body, bodyStart);
    return out;
  }

  it('accepts well-formed payloads of the schema with the record count of their batch', () => {
    for (const compression of COMPRESSIONS) checkArrowPayload(encodeArrowPayload(sampleBatch(), compression), arrowSchema, sampleRows.length);
    const same = withHeader(encodeArrowPayload(sampleBatch(), 'NONE'), (h) => h);
    checkArrowPayload(same, arrowSchema, sampleRows.length);
    assert.deepEqual(recordBatchRows(decodeArrowPayload(arrowSchema, same), sampleSchema), sampleRows);
  });

  it('rejects payloads that disagree with the schema or their batch header', () => {
    const payload = encodeArrowPayload(sampleBatch(), 'ZSTD');
    const n = sampleRows.length;
    const bad: [string, Uint8Array, arrow.Schema, number][] = [
      ['record count', payload, arrowSchema, n + 1],
      ['schema', payload, toArrowSchema(sampleSchema, [0, 1, 2]), n],
      ['column length', withHeader(payload, (h) => new RecordBatchHeader(h.length, h.nodes.map((x, i) => (i === 3 ? new FieldNode(n - 1, 0) : x)), h.buffers, h.compression)), arrowSchema, n],
      ['null count', withHeader(payload, (h) => new RecordBatchHeader(h.length, h.nodes.map((x) => new FieldNode(x.length, n + 1)), h.buffers, h.compression)), arrowSchema, n],
      ['codec', withHeader(payload, (h) => new RecordBatchHeader(h.length, h.nodes, h.buffers, new BodyCompression(7 as arrow.CompressionType))), arrowSchema, n],
    ];
    for (const [why, p, schema, count] of bad) assert.throws(() => checkArrowPayload(p, schema, count), { errorName: 'CORRUPT_MESSAGE' }, why);
  });
});

describe('recordBatchRows', () => {
  const rows = Array.from({ length: 40 }, (_, i) => sampleRows[i % sampleRows.length]);
  const asciiRows = rows.map((r) => ({ ...r, c: r.c === null ? null : 'abcd', s: r.s === null ? null : `row ${String(r.i64)}` }));
  const batchOf = (rs: typeof rows) => {
    const b = new ColumnBatchBuilder(sampleSchema);
    for (const r of rs) b.appendRow(r);
    return decodeArrowPayload(arrowSchema, encodeArrowPayload(b.build(), 'NONE'));
  };

  for (const [name, rs] of [['UTF-8 text', rows], ['ASCII text', asciiRows]] as const) {
    it(`${name}: reads any range of rows, of a batch and of a slice of it, with nulls`, () => {
      const batch = batchOf(rs);
      assert.deepEqual(recordBatchRows(batch, sampleSchema), rs);
      assert.deepEqual(recordBatchRows(batch, sampleSchema, 7, 19), rs.slice(7, 19));
      assert.deepEqual(recordBatchRows(batch, sampleSchema, 5, 5), []);
      const slice = batch.slice(9);
      assert.deepEqual(recordBatchRows(slice, sampleSchema), rs.slice(9));
      assert.deepEqual(recordBatchRows(slice, sampleSchema, 3, 8), rs.slice(12, 17));
    });
  }

  it('gives rows of a projection only its columns, and refuses a column the schema lacks', () => {
    const projected = toArrowSchema(sampleSchema, [10, 4]);
    const b = new ColumnBatchBuilder({ columns: [sampleSchema.columns[10], sampleSchema.columns[4]], highestFieldId: sampleSchema.highestFieldId });
    for (const r of rows) b.appendRow({ s: r.s, i64: r.i64 });
    const batch = decodeArrowPayload(projected, encodeArrowPayload(b.build(), 'NONE'));
    assert.deepEqual(recordBatchRows(batch, sampleSchema), rows.map((r) => ({ s: r.s, i64: r.i64 })));
    const other = buildSchema([{ name: 'x', type: 'INT' }]);
    assert.throws(() => recordBatchRows(batch, other), { errorName: 'INVALID_ARGUMENT' });
  });
});
