/**
 * Primary-key tables end to end on a real server: upserts, deletes, partial updates, point and
 * prefix lookups, the changelog with its change types, row counts, KV snapshots and recovery from a
 * snapshot after the local state is deleted.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { TributaryError } from '../src/client/index.js';
import type { ScanRecord } from '../src/client/index.js';
import type { LogScanner } from '../src/client/log-scanner.js';
import { ApiKeys } from '../src/rpc/api-keys.js';
import { useCluster } from './support/cluster.js';

const users = { database: 'tributary', table: 'users' };
const cluster = useCluster({ client: { 'client.writer.batch-timeout': '2ms' } });

async function drain(scanner: LogScanner, expected: number): Promise<ScanRecord[]> {
  const out: ScanRecord[] = [];
  for (let i = 0; i < 100 && out.length < expected; i++) out.push(...(await scanner.poll(200)));
  return out;
}

async function changelog(buckets: number, expected: number): Promise<ScanRecord[]> {
  const scanner = (await cluster.conn.getTable(users)).newScan().createLogScanner();
  for (let b = 0; b < buckets; b++) await scanner.subscribe(b, 'earliest');
  const out = await drain(scanner, expected);
  scanner.close();
  return out;
}

describe('primary-key tables', () => {
  test('upserts, deletes and lookups; the changelog has the exact change types', async () => {
    const admin = cluster.conn.getAdmin();
    await admin.createTable(users, {
      columns: [{ name: 'id', type: 'BIGINT' }, { name: 'name', type: 'STRING' }, { name: 'score', type: 'INT' }],
      primaryKey: ['id'],
      properties: { 'bucket.num': '2' },
    });
    const info = await admin.getTableInfo(users);
    assert.deepEqual(info.bucketKeys, ['id'], 'the bucket key defaults to the primary key');
    assert.equal(info.schema.columns[0].nullable, false, 'primary key columns are NOT NULL');

    const table = await cluster.conn.getTable(users);
    await assert.rejects(table.newAppend().createWriter(), (e: TributaryError) => e.errorName === 'INVALID_TABLE_EXCEPTION');
    const writer = await table.newUpsert().createWriter();
    await writer.upsert({ id: 1n, name: 'ann', score: 10 });
    await writer.upsert({ id: 2n, name: 'bob', score: 20 });
    await writer.flush();
    await writer.upsert({ id: 1n, name: 'ann', score: 11 });
    await writer.delete({ id: 2n });
    await writer.delete({ id: 3n }); // a missing key: no change
    await writer.flush();
    await writer.close();

    const lookuper = table.newLookup().createLookuper();
    assert.deepEqual(await lookuper.lookup({ id: 1n }), { id: 1n, name: 'ann', score: 11 });
    assert.equal(await lookuper.lookup({ id: 2n }), null);
    assert.equal(await lookuper.lookup({ id: 99n }), null);

    const records = await changelog(2, 5);
    const byKey = (id: bigint) => records.filter((r) => r.row.id === id).map((r) => `${r.changeType} ${r.row.score}`);
    assert.deepEqual(byKey(1n), ['+I 10', '-U 10', '+U 11']);
    assert.deepEqual(byKey(2n), ['+I 20', '-D 20']);

    const state = await table.newScan().createBatchScanner().readAll();
    assert.deepEqual(state, [{ id: 1n, name: 'ann', score: 11 }]);
    const projected = await table.newScan().project(['score']).createBatchScanner().readAll();
    assert.deepEqual(projected, [{ score: 11 }]);
    // Bucket by bucket: together the whole state, each with its own changelog offset only.
    const perBucket = await Promise.all(
      Array.from({ length: info.bucketCount }, async (_, b) => {
        const scanner = table.newScan().createBatchScanner([b]);
        return { rows: await scanner.readAll(), offsets: [...scanner.offsets().keys()] };
      }),
    );
    assert.deepEqual(perBucket.flatMap((p) => p.rows), state);
    assert.deepEqual(perBucket.map((p) => p.offsets), Array.from({ length: info.bucketCount }, (_, b) => [String(b)]));
    await assert.rejects(table.newScan().createBatchScanner([info.bucketCount]).readAll(), { errorName: 'UNKNOWN_TABLE_OR_BUCKET_EXCEPTION' });

    assert.equal((await admin.getTableStats(users)).rowCount, 1n);
    const rpc = await cluster.conn.tabletServer(0);
    const limited = await Promise.all([0, 1].map((bucketId) => rpc.request(ApiKeys.LimitScan, { tableId: BigInt(info.tableId), bucketId, limit: 5 })));
    assert.equal(limited.reduce((n, r) => n + r.values.length, 0), 1, 'LimitScan on a primary-key table returns rows of its state');
  });

  test('partial updates keep the other columns', async () => {
    const table = await cluster.conn.getTable(users);
    const partial = await table.newUpsert().partialUpdate(['id', 'score']).createWriter();
    await partial.upsert({ id: 1n, score: 12 });
    await partial.upsert({ id: 5n, score: 50 });
    await partial.close();
    const lookuper = table.newLookup().createLookuper();
    assert.deepEqual(await lookuper.lookup({ id: 1n }), { id: 1n, name: 'ann', score: 12 });
    assert.deepEqual(await lookuper.lookup({ id: 5n }), { id: 5n, name: null, score: 50 });
    await assert.rejects(table.newUpsert().partialUpdate(['score']).createWriter(), (e: TributaryError) => e.errorName === 'INVALID_TARGET_COLUMN');
  });

  test('prefix lookups by the bucket key', async () => {
    const orders = { database: 'tributary', table: 'orders_by_user' };
    await cluster.conn.getAdmin().createTable(orders, {
      columns: [{ name: 'user_id', type: 'BIGINT' }, { name: 'order_id', type: 'STRING' }, { name: 'amount', type: 'DECIMAL(10, 2)' }],
      primaryKey: ['user_id', 'order_id'],
      properties: { 'bucket.num': '3', 'bucket.key': 'user_id' },
    });
    const table = await cluster.conn.getTable(orders);
    const writer = await table.newUpsert().createWriter();
    for (let u = 0; u < 5; u++) for (let o = 0; o < 4; o++) await writer.upsert({ user_id: BigInt(u), order_id: `o-${u}-${o}`, amount: `${u}.${o}0` });
    await writer.close();
    const byUser = table.newLookup().lookupBy(['user_id']).createLookuper();
    const rows = await byUser.lookupAll({ user_id: 3n });
    assert.deepEqual(rows.map((r) => r.order_id).sort(), ['o-3-0', 'o-3-1', 'o-3-2', 'o-3-3']);
    assert.equal(rows[0].amount, '3.00');
    assert.deepEqual(await byUser.lookupAll({ user_id: 42n }), []);
    const point = table.newLookup().createLookuper();
    const found = await Promise.all([point.lookup({ user_id: 1n, order_id: 'o-1-2' }), point.lookup({ user_id: 4n, order_id: 'nope' })]);
    assert.deepEqual(found, [{ user_id: 1n, order_id: 'o-1-2', amount: '1.20' }, null]);
  });

  test('a KV snapshot restores the state after the local state is deleted', async () => {
    const admin = cluster.conn.getAdmin();
    const taken = await admin.triggerKvSnapshot(users);
    assert.equal(taken.length, 2);
    const latest = await admin.getLatestKvSnapshots(users);
    assert.deepEqual(latest.map((s) => s.snapshotId), [1, 1]);
    assert.equal(latest.reduce((n, s) => n + s.rowCount!, 0), 2, 'ann and the partially written id 5');
    // A change after the snapshot must come back through changelog replay.
    const table = await cluster.conn.getTable(users);
    const writer = await table.newUpsert().createWriter();
    await writer.upsert({ id: 7n, name: 'gus', score: 70 });
    await writer.close();

    await cluster.conn.close();
    assert.equal(await cluster.server.stop(), 0);
    const tableDir = path.join(cluster.server.dataDir, 'log', 'tributary', fs.readdirSync(path.join(cluster.server.dataDir, 'log', 'tributary')).find((d) => d.startsWith('users-'))!);
    for (const d of fs.readdirSync(tableDir).filter((d) => d.startsWith('kv-'))) fs.rmSync(path.join(tableDir, d), { recursive: true });
    await cluster.restart();
    const conn = await cluster.reconnect();
    const lookuper = (await conn.getTable(users)).newLookup().createLookuper();
    assert.deepEqual(await lookuper.lookup({ id: 1n }), { id: 1n, name: 'ann', score: 12 });
    assert.deepEqual(await lookuper.lookup({ id: 7n }), { id: 7n, name: 'gus', score: 70 });
    assert.equal(await lookuper.lookup({ id: 2n }), null);
  });
});
