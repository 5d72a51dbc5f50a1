import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildSchema, type TableInfo } from '../common/schema.js';
import { KvEncoding } from './kv-encoding.js';
import type { MetadataCache } from './metadata-cache.js';

// Only rows of the table info's own schema are decoded here: no schema is ever fetched.
const metadata = { cachedSchema: () => undefined } as unknown as MetadataCache;

function tableOf(primaryKey: string[], bucketKeys: string[], properties: Record<string, string> = {}): TableInfo {
  const schema = buildSchema([{ name: 'a', type: 'BIGINT' }, { name: 'b', type: 'STRING' }, { name: 'c', type: 'INT' }], primaryKey);
  return { path: { database: 'db', table: 't' }, tableId: 1, schemaId: 0, schema, partitionKeys: [], bucketCount: 7, bucketKeys, properties, createdTime: 0, modifiedTime: 0 };
}

test('the bucket found from the encoded primary key is the bucket of the row, whichever bucketing the table has', () => {
  const tables = [
    tableOf(['a'], ['a']), // the primary key is the bucket key: its bytes are hashed as they are
    tableOf(['a', 'b'], ['a']), // a longer primary key: the bucket key is hashed on its own
    tableOf(['a', 'b'], ['b', 'a']),
    tableOf(['a'], ['a'], { 'table.datalake.enabled': 'true', 'table.datalake.format': 'iceberg' }), // Iceberg's bucket function
  ];
  for (const table of tables) {
    const encoding = new KvEncoding(table, metadata);
    const buckets = new Set<number>();
    for (let i = -500; i < 500; i++) {
      const values = encoding.internalRow({ a: BigInt(i * 7919), b: `k${i}`, c: i });
      const bucket = encoding.bucketOfKey(values, encoding.keyEncoder.encodeView(values));
      assert.equal(bucket, encoding.assigner.bucketOf(values));
      buckets.add(bucket);
    }
    assert.equal(buckets.size, 7);
  }
});
