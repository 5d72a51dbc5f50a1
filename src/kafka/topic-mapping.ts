/**
 * Topics are tables. A topic `name` is the log table `name` of database `kafka.database`; its
 * partitions are the table's buckets, and a record's Kafka offset is its log offset, exactly (one
 * Kafka batch becomes one log batch of as many records).
 *
 * Two mappings, chosen by the table option `kafka.value.format`:
 *
 *   raw   the table CreateTopics makes:
 *           key BYTES, value BYTES, headers BYTES, timestamp TIMESTAMP_LTZ(3)
 *         `headers` holds the record's headers in the record format's own encoding (count varint,
 *         then per header key length varint, key, value length varint (-1 null), value), or null
 *         when there are none; `timestamp` is the record's timestamp (CreateTime). The fields go
 *         from the records section straight into the columns as the records are read.
 *   json  any log table: a record value is a JSON object of the table's columns, checked and
 *         converted as every write is (values.ts; BYTES as base64, timestamps as text or epoch
 *         ms); a record that does not fit refuses its whole batch with INVALID_RECORD. On fetch
 *         the row is written back as JSON, the key is the JSON object of `kafka.key.fields`
 *         (null when unset), and the timestamp is the batch's commit time.
 */
import type * as arrow from 'apache-arrow';
import { TributaryError } from '../common/errors.js';
import { columnIndex, type ColumnSpec, type Schema, type TableInfo } from '../common/schema.js';
import { toExternal, toInternal, Timestamp } from '../common/values.js';
import { internalRowReader } from '../record/arrow-payload.js';
import { ColumnBatchBuilder } from '../record/column-batch-builder.js';
import { Reader, Writer } from './protocol/primitives.js';
import type { KafkaHeader, RecordCursor } from './records/record-batch.js';

export const RAW_TOPIC_COLUMNS: ColumnSpec[] = [
  { name: 'key', type: 'BYTES', nullable: true },
  { name: 'value', type: 'BYTES', nullable: true },
  { name: 'headers', type: 'BYTES', nullable: true },
  { name: 'timestamp', type: 'TIMESTAMP_LTZ(3)', nullable: true },
];

/** A fetched record before it is framed: its offset is the batch's base offset plus its index. */
export interface OutgoingRecord {
  timestamp: bigint;
  key: Uint8Array | null;
  value: Uint8Array | null;
  headers: KafkaHeader[];
}

export interface TopicMapping {
  readonly format: 'raw' | 'json';
  /**
   * Appends the records of one Kafka batch, read to the end from `records`, to `builder`: all of
   * them or, on a bad record, none (the cursor's error, or INVALID_ROW).
   */
  append(builder: ColumnBatchBuilder, records: RecordCursor): void;
  /** The Kafka records of one decoded log batch. */
  records(batch: arrow.RecordBatch, schema: Schema, commitTimestamp: bigint): OutgoingRecord[];
}

/** The mapping of a table, or a named error when the table cannot be a topic. */
export function topicMapping(table: TableInfo): TopicMapping {
  if (table.schema.primaryKey) throw new TributaryError('INVALID_TABLE_EXCEPTION', `table '${table.path.table}' has a primary key: only log tables are topics`);
  if (table.partitionKeys.length > 0) throw new TributaryError('INVALID_TABLE_EXCEPTION', `table '${table.path.table}' is partitioned: only tables without partitions are topics`);
  const format = table.properties['kafka.value.format'];
  if (format === 'json') return jsonMapping(table);
  if (format === 'raw' || isRawShape(table.schema)) return RAW;
  throw new TributaryError('INVALID_TABLE_EXCEPTION', `table '${table.path.table}' is not a topic: set kafka.value.format to json (or raw, for a table of the raw topic columns)`);
}

function isRawShape(schema: Schema): boolean {
  return schema.columns.length === RAW_TOPIC_COLUMNS.length && RAW_TOPIC_COLUMNS.every((c, i) => schema.columns[i].name === c.name);
}

const [KEY, VALUE, HEADERS, TIMESTAMP] = [0, 1, 2, 3];

const RAW: TopicMapping = {
  format: 'raw',
  /** Fields go from the records' bytes into the columns as they are read: no record objects. */
  append(builder, records) {
    const first = builder.rowCount;
    const body = records.body;
    // The records of a batch mostly share a timestamp: its microseconds are made once.
    let ms = -1n;
    let micros = -1000n;
    try {
      while (records.next()) {
        appendNullableBytes(builder, KEY, body, records.keyAt, records.keyLength);
        appendNullableBytes(builder, VALUE, body, records.valueAt, records.valueLength);
        if (records.headerCount === 0) builder.appendValue(HEADERS, null);
        else if (records.headersCanonical) builder.appendBytes(HEADERS, body, records.headersAt, records.end);
        else builder.appendValue(HEADERS, encodeHeaders(records.headers()));
        if (records.timestamp !== ms) [ms, micros] = [records.timestamp, records.timestamp * 1000n];
        builder.appendValue(TIMESTAMP, micros);
        builder.endRow();
      }
    } catch (err) {
      builder.truncate(first);
      throw err;
    }
  },
  records(batch, schema) {
    const read = internalRowReader(batch, schema);
    const out: OutgoingRecord[] = new Array(batch.numRows);
    const row: unknown[] = [];
    for (let i = 0; i < batch.numRows; i++) {
      read(i, row);
      const headers = row[2] as Uint8Array | null;
      const micros = row[3] as bigint | null;
      out[i] = { key: row[0] as Uint8Array | null, value: row[1] as Uint8Array | null, headers: headers ? decodeHeaders(headers) : [], timestamp: micros === null ? -1n : micros / 1000n };
    }
    return out;
  },
};

function appendNullableBytes(builder: ColumnBatchBuilder, column: number, body: Buffer, at: number, length: number): void {
  if (length < 0) builder.appendValue(column, null);
  else builder.appendBytes(column, body, at, at + length);
}

/** The stored form of a record's headers: the record format's own, so a record's canonical header bytes (RecordCursor) are stored as they are. */
export function encodeHeaders(headers: readonly KafkaHeader[]): Uint8Array {
  const w = new Writer(64);
  w.varint(headers.length);
  for (const h of headers) {
    const key = Buffer.from(h.key, 'utf8');
    w.varint(key.length).raw(key);
    if (h.value === null) w.varint(-1);
    else w.varint(h.value.length).raw(h.value);
  }
  return Buffer.from(w.finish());
}

export function decodeHeaders(bytes: Uint8Array): KafkaHeader[] {
  const r = new Reader(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  const n = r.varint();
  const out: KafkaHeader[] = [];
  for (let i = 0; i < n; i++) {
    const key = r.raw(r.varint()).toString('utf8');
    const len = r.varint();
    out.push({ key, value: len === -1 ? null : r.raw(len) });
  }
  return out;
}

function jsonMapping(table: TableInfo): TopicMapping {
  const schema = table.schema;
  const keyFields = (table.properties['kafka.key.fields'] ?? '').split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  for (const k of keyFields) columnIndex(schema, k);
  return {
    format: 'json',
    append(builder, records) {
      // Every record read before any is converted: a batch that does not decode fails as that.
      const values: (Buffer | null)[] = [];
      while (records.next()) values.push(records.value());
      const rows = values.map((value, i) => {
        try {
          return jsonRow(schema, value);
        } catch (err) {
          const why = err instanceof Error ? err.message : String(err);
          throw new TributaryError('INVALID_ROW', `record ${i} of the batch: ${why}`);
        }
      });
      for (const row of rows) builder.appendInternalRow(row);
    },
    records(batch, readSchema, commitTimestamp) {
      const read = internalRowReader(batch, readSchema);
      const out: OutgoingRecord[] = new Array(batch.numRows);
      const row: unknown[] = [];
      for (let i = 0; i < batch.numRows; i++) {
        read(i, row);
        const object: Record<string, unknown> = {};
        readSchema.columns.forEach((c, j) => (object[c.name] = jsonValue(toExternal(c.type, row[j]))));
        const key = keyFields.length === 0 ? null : Buffer.from(JSON.stringify(Object.fromEntries(keyFields.map((k) => [k, object[k]]))));
        out[i] = { key, value: Buffer.from(JSON.stringify(object)), headers: [], timestamp: commitTimestamp };
      }
      return out;
    },
  };
}

/** The internal values of a JSON record value, in column order; throws naming what does not fit. */
function jsonRow(schema: Schema, value: Buffer | null): unknown[] {
  if (value === null) throw new Error('the value is null, a JSON object is needed');
  let parsed: unknown;
  try {
    parsed = JSON.parse(value.toString('utf8'));
  } catch (err) {
    throw new Error(`the value is not JSON: ${(err as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('the value is not a JSON object');
  const object = parsed as Record<string, unknown>;
  for (const name of Object.keys(object)) columnIndex(schema, name);
  return schema.columns.map((c) => {
    let v = object[c.name];
    if ((c.type.kind === 'BYTES' || c.type.kind === 'BINARY') && typeof v === 'string') v = Buffer.from(v, 'base64');
    if ((c.type.kind === 'TIMESTAMP' || c.type.kind === 'TIMESTAMP_LTZ') && typeof v === 'number') v = new Date(v);
    return toInternal(c, v);
  });
}

function jsonValue(v: unknown): unknown {
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
  if (v instanceof Timestamp) return new Date(Number(v.epochMicros / 1000n)).toISOString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString('base64');
  return v;
}
