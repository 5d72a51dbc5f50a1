/**
 * Kafka record batches decoded into objects, to compare what tests wrote with what they read: the
 * listener itself reads records with the batch's cursor and makes no object per record.
 */
import { type KafkaBatchHeader, type KafkaHeader, openBatch } from '../../src/kafka/records/record-batch.js';

export interface KafkaRecord {
  offsetDelta: number;
  /** ms since epoch. */
  timestamp: bigint;
  key: Buffer | null;
  value: Buffer | null;
  headers: KafkaHeader[];
}

export interface KafkaBatch extends KafkaBatchHeader {
  records: KafkaRecord[];
}

/** Decodes one batch, its records as objects (views into the records section); `maxBytes` bounds what they may decompress to. */
export function decodeBatch(batch: Buffer, maxBytes: number): KafkaBatch {
  const { records: cursor, ...header } = openBatch(batch, maxBytes);
  const records: KafkaRecord[] = [];
  while (cursor.next()) {
    const key = cursor.keyLength < 0 ? null : cursor.body.subarray(cursor.keyAt, cursor.keyAt + cursor.keyLength);
    records.push({ offsetDelta: records.length, timestamp: cursor.timestamp, key, value: cursor.value(), headers: cursor.headers() });
  }
  return { ...header, records };
}
