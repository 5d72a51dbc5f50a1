/**
 * A primary-key table used for a while without a lake, whose changelog retention has already
 * dropped (the KV snapshots hold those changes), is then made lake-enabled: the first round must
 * start from the bucket's state, not from the log start, or the keys last changed before it would
 * never reach the lake.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import type { TablePath } from '../src/client/index.js';
import { lakeFormat } from '../src/lake/formats/index.js';
import { startCluster } from './support/cluster.js';
import { readLakeTable } from './support/lake-content.js';
import { tierOnce } from './support/tiering-rounds.js';

const ACCOUNTS: TablePath = { database: 'tributary', table: 'accounts' };
const BUCKETS = [0, 1];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a primary-key table made lake-enabled after its changelog expired: the first round tiers its state, later rounds the changelog', { timeout: 240_000 }, async (t) => {
  const { server, conn } = await startCluster(t, {
    settings: { 'log.segment.file-size': '2kb', 'log.retention.check-interval': '200ms', 'kv.snapshot.interval': '500ms' },
    args: ['--no-tiering'],
  });
  const admin = conn.getAdmin();
  const format = lakeFormat('iceberg', { writerThreads: 1 });
  try {
    await admin.createTable(ACCOUNTS, { columns: [{ name: 'k', type: 'INT' }, { name: 'v', type: 'STRING' }], primaryKey: ['k'], bucketCount: 2, properties: { 'table.log.ttl': '1s' } });
    const writer = await (await conn.getTable(ACCOUNTS)).newUpsert().createWriter();
    const state = new Map<number, string>();
    const upsert = async (k: number, v: string) => {
      await writer.upsert({ k, v });
      state.set(k, v);
    };
    // Keys 0..299 written once, so that only the KV state will hold them; then keys 1000..1149
    // upserted and deleted in turn until retention has dropped changelog in every bucket.
    for (let k = 0; k < 300; k++) await upsert(k, `first${k}`);
    const deadline = Date.now() + 120_000;
    for (let step = 0; ; step++) {
      const k = 1000 + ((step * 37) % 150);
      if (step % 7 === 6) {
        await writer.delete({ k });
        state.delete(k);
      } else await upsert(k, `v${step}-${'x'.repeat(20)}`);
      if (step % 200 === 199) {
        await writer.flush();
        if ([...(await admin.listOffsets(ACCOUNTS, BUCKETS, 'earliest')).values()].every((o) => o > 0n)) break;
        assert.ok(Date.now() < deadline, `retention drops changelog the KV snapshots hold: ${server.stderr}`);
        await sleep(100);
      }
    }
    await writer.flush();

    await admin.alterTable(ACCOUNTS, { set: { 'table.datalake.enabled': 'true', 'table.datalake.freshness': '1s' } });
    await upsert(5000, 'after enabling');
    await writer.flush();
    await tierOnce(conn, ACCOUNTS, format);
    const { warehouse, lakeFormat } = await admin.getLakeTieringStatus(ACCOUNTS);
    assert.equal(lakeFormat, 'iceberg', 'the server names its lake format with the warehouse');
    const lakeState = async () => {
      const lake = await readLakeTable(path.resolve(warehouse), ACCOUNTS.database, ACCOUNTS.table);
      return new Map(lake.rows.map((r) => [Number(r.k), String(r.v)]));
    };
    assert.deepEqual(await lakeState(), state, 'the first round brings the whole state');
    const status = await admin.getLakeTieringStatus(ACCOUNTS);
    assert.ok(status.buckets.every((b) => b.recordsBehind === 0n), 'the lake ends at the high watermark');

    // The next round continues with the changelog: updates of keys the first round wrote, and deletes.
    for (let k = 0; k < 30; k++) {
      await writer.delete({ k });
      state.delete(k);
      await upsert(k + 30, `last${k}`);
    }
    await writer.flush();
    await tierOnce(conn, ACCOUNTS, format);
    assert.deepEqual(await lakeState(), state, 'later rounds fold the changelog onto it');
  } finally {
    await format.close();
  }
});
