/**
 * Primary-key tables under crashes and contention, with real processes:
 * - kill -9 during upserts, several times: afterwards every acknowledged upsert is reflected exactly
 *   once in lookups, in the state scan and in the changelog;
 * - many writers on the same keys: the final state equals the changelog folded in offset order.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Connection } from '../src/client/index.js';
import type { ScanRecord, Row } from '../src/client/index.js';
import { startCluster } from './support/cluster.js';
import { WriterChild } from './support/writer-child.js';

async function readChangelog(conn: Connection, table: string, buckets: number): Promise<ScanRecord[]> {
  const t = await conn.getTable({ database: 'tributary', table });
  const end = await conn.getAdmin().listOffsets(t.info.path, [...Array(buckets).keys()], 'latest');
  const scanner = t.newScan().createLogScanner();
  for (let b = 0; b < buckets; b++) await scanner.subscribe(b, 'earliest');
  const out: ScanRecord[] = [];
  for (let i = 0; i < 200; i++) {
    out.push(...(await scanner.poll(200)));
    const pos = scanner.positions();
    if ([...Array(buckets).keys()].every((b) => pos.get(String(b))! >= end.get(b)!)) break;
  }
  scanner.close();
  return out;
}

/** Folds a changelog into key → row, applying changes in offset order per bucket. */
function fold(records: ScanRecord[], key: (r: Row) => string): Map<string, Row> {
  const state = new Map<string, Row>();
  for (const r of records) {
    if (r.changeType === '+I' || r.changeType === '+U') state.set(key(r.row), r.row);
    else if (r.changeType === '-D') state.delete(key(r.row));
  }
  return state;
}

test('acknowledged upserts survive repeated kill -9 exactly once', async (t) => {
  const cluster = await startCluster(t);
  await cluster.conn.getAdmin().createTable({ database: 'tributary', table: 'kv_crash' }, {
    columns: [{ name: 'k', type: 'BIGINT' }, { name: 'v', type: 'INT' }],
    primaryKey: ['k'],
    properties: { 'bucket.num': '2' },
  });
  await cluster.conn.close();

  const keys = 200;
  const rounds = 40;
  const writer = WriterChild.start('pk-writer-child.ts', [cluster.bootstrap, 'tributary.kv_crash', String(keys), String(rounds)]);
  for (let kill = 1; kill <= 3; kill++) {
    await writer.waitForAcks(kill * 8, 30_000);
    await cluster.server.kill();
    await cluster.restart();
  }
  assert.equal(await writer.exit(), 0, `writer failed: ${writer.stderr}`);
  assert.equal(writer.acked, rounds - 1);

  const conn = await cluster.reconnect();
  const table = await conn.getTable({ database: 'tributary', table: 'kv_crash' });
  const lookuper = table.newLookup().createLookuper();
  const looked = await Promise.all([...Array(keys).keys()].map((k) => lookuper.lookup({ k: BigInt(k) })));
  assert.ok(looked.every((r) => r?.v === rounds - 1), 'every key holds the last acknowledged value');
  const scanned = await table.newScan().createBatchScanner().readAll();
  assert.equal(scanned.length, keys);
  assert.ok(scanned.every((r) => r.v === rounds - 1));

  const changelog = await readChangelog(conn, 'kv_crash', 2);
  for (let k = 0; k < keys; k++) {
    const changes = changelog.filter((r) => r.row.k === BigInt(k));
    const after = changes.filter((r) => r.changeType !== '-U').map((r) => r.row.v);
    assert.deepEqual(after, [...Array(rounds).keys()], `key ${k}: one +I then one +U per round, none twice`);
    assert.equal(changes[0].changeType, '+I');
  }
  assert.equal((await conn.getAdmin().getTableStats(table.info.path)).rowCount, BigInt(keys));
  await conn.close();
  assert.equal(await cluster.server.stop(), 0);
});

test('many writers on the same keys: the state equals the changelog folded in offset order', async (t) => {
  const cluster = await startCluster(t);
  const admin = cluster.conn;
  const path_ = { database: 'tributary', table: 'contended' };
  await admin.getAdmin().createTable(path_, {
    columns: [{ name: 'k', type: 'INT' }, { name: 'writer', type: 'INT' }, { name: 'n', type: 'INT' }],
    primaryKey: ['k'],
    properties: { 'bucket.num': '3' },
  });
  const writers = await Promise.all(
    [0, 1, 2, 3].map(async (w) => {
      const conn = await Connection.create({ 'bootstrap.servers': cluster.bootstrap, 'client.writer.batch-timeout': '1ms' });
      return { conn, writer: await (await conn.getTable(path_)).newUpsert().createWriter() };
    }),
  );
  await Promise.all(
    writers.map(async ({ writer }, w) => {
      for (let n = 0; n < 400; n++) {
        const k = (n * 7 + w) % 30;
        if (n % 11 === 5) await writer.delete({ k });
        else await writer.upsert({ k, writer: w, n });
        if (n % 50 === 0) await writer.flush();
      }
      await writer.close();
    }),
  );
  for (const { conn } of writers) await conn.close();

  const table = await admin.getTable(path_);
  const folded = fold(await readChangelog(admin, 'contended', 3), (r) => String(r.k));
  const state = await table.newScan().createBatchScanner().readAll();
  assert.deepEqual(new Map(state.map((r) => [String(r.k), r])), folded);
  const lookuper = table.newLookup().createLookuper();
  for (let k = 0; k < 30; k++) assert.deepEqual(await lookuper.lookup({ k }), folded.get(String(k)) ?? null);
});
