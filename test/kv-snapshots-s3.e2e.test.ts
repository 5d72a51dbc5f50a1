/**
 * KV snapshots on S3 (remote.data.dir = s3://…, s3rver on loopback) with a real server process:
 * snapshots are uploaded in content-named chunks shared between snapshots; a server whose local KV
 * state is wiped comes back from the remote snapshot plus the changelog, row for row; a server
 * killed (kill -9) while a snapshot uploads leaves no registered handle naming a chunk that is not
 * stored, and the next commit removes the chunks the killed upload left.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import type { Connection } from '../src/client/index.js';
import { startCluster, type TestCluster } from './support/cluster.js';

const accounts = { database: 'tributary', table: 'accounts' };
const PAD = 'x'.repeat(400);

function s3Client(cluster: TestCluster): S3Client {
  const { settings } = cluster.s3;
  return new S3Client({ endpoint: settings.endpoint, region: settings.region, forcePathStyle: true, credentials: { accessKeyId: settings.accessKeyId!, secretAccessKey: settings.secretAccessKey! } });
}

/** Every key under `prefix` of the test bucket, with its size. */
async function listAll(s3: S3Client, bucket: string, prefix: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) out.set(o.Key!, o.Size!);
    token = page.NextContinuationToken;
  } while (token);
  return out;
}

async function getObject(s3: S3Client, bucket: string, key: string): Promise<Buffer> {
  return Buffer.from(await (await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }))).Body!.transformToByteArray());
}

async function metric(cluster: TestCluster, name: string): Promise<number> {
  const text = await (await fetch(`http://${cluster.server.http}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  assert.ok(line, `metric ${name}`);
  return Number(line.split(' ')[1]);
}

async function write(conn: Connection, model: Map<bigint, string>, rows: [bigint, string | null][]): Promise<void> {
  const writer = await (await conn.getTable(accounts)).newUpsert().createWriter();
  for (const [id, name] of rows) {
    if (name === null) await writer.delete({ id });
    else await writer.upsert({ id, name: `${name}-${PAD}` });
    if (name === null) model.delete(id);
    else model.set(id, `${name}-${PAD}`);
  }
  await writer.close();
}

async function assertRows(conn: Connection, model: Map<bigint, string>, keys: bigint): Promise<void> {
  const lookuper = (await conn.getTable(accounts)).newLookup().createLookuper();
  const found = await Promise.all(Array.from({ length: Number(keys) }, (_, i) => lookuper.lookup({ id: BigInt(i) })));
  const expected = Array.from({ length: Number(keys) }, (_, i) => (model.has(BigInt(i)) ? { id: BigInt(i), name: model.get(BigInt(i)) } : null));
  assert.deepEqual(found, expected);
}

/** The local KV state of every bucket of the table, deleted. */
function wipeKvState(cluster: TestCluster): void {
  const dbDir = path.join(cluster.server.dataDir, 'log', 'tributary');
  const tableDir = path.join(dbDir, fs.readdirSync(dbDir).find((d) => d.startsWith('accounts-'))!);
  for (const d of fs.readdirSync(tableDir).filter((d) => d.startsWith('kv-'))) fs.rmSync(path.join(tableDir, d), { recursive: true });
}

/** Every chunk that the bucket's registered snapshots name is stored whole; returns the chunks of all of them. */
async function assertRegisteredComplete(s3: S3Client, bucket: string, conn: Connection, stored: Map<string, number>): Promise<Set<string>> {
  const [latest] = await conn.getAdmin().getLatestKvSnapshots(accounts);
  const metadataKeys = [...stored.keys()].filter((k) => k.endsWith('/_METADATA'));
  const registered = metadataKeys.find((k) => k.includes(`/snap-${latest.snapshotId}/`));
  assert.ok(registered, `the registered snapshot ${latest.snapshotId} has its _METADATA on S3`);
  const held = new Set<string>();
  const shared = registered.replace(/snap-\d+\/_METADATA$/, 'shared/');
  for (const key of metadataKeys) {
    const meta = JSON.parse((await getObject(s3, bucket, key)).toString()) as { chunks: string[] };
    for (const hash of meta.chunks) {
      held.add(hash);
      const bytes = await getObject(s3, bucket, shared + hash);
      assert.equal(crypto.createHash('sha256').update(bytes).digest('hex'), hash, `chunk ${hash} of ${key} is stored whole`);
    }
  }
  return held;
}

test('KV snapshots on S3: incremental chunks, recovery of a wiped local state, kill -9 during an upload', async (t) => {
  const cluster = await startCluster(t, {
    objectStorage: { remoteData: true },
    settings: { 'kv.snapshot.chunk-size': '64kb', 'kv.snapshot.interval': '1h' },
    client: { 'client.writer.batch-timeout': '2ms' },
  });
  const { bucket } = cluster.s3;
  const s3 = s3Client(cluster);
  t.after(() => s3.destroy());
  const admin = cluster.conn.getAdmin();
  await admin.createTable(accounts, { columns: [{ name: 'id', type: 'BIGINT' }, { name: 'name', type: 'STRING' }], primaryKey: ['id'], properties: { 'bucket.num': '1' } });
  const model = new Map<bigint, string>();
  await write(cluster.conn, model, Array.from({ length: 3000 }, (_, i) => [BigInt(i), `a${i}`]));

  const [first] = await admin.triggerKvSnapshot(accounts);
  let stored = await listAll(s3, bucket, 'remote/kv/tributary/');
  const firstMeta = [...stored.keys()].find((k) => k.endsWith(`/snap-${first.snapshotId}/_METADATA`));
  assert.ok(firstMeta, 'the snapshot is on S3');
  assert.ok(!fs.existsSync(path.join(cluster.server.dataDir, 'remote')), 'nothing of it on the local disk');
  const chunksOf = async (key: string): Promise<string[]> => (JSON.parse((await getObject(s3, bucket, key)).toString()) as { chunks: string[] }).chunks;
  const firstChunks = await chunksOf(firstMeta);
  assert.ok(firstChunks.length > 10, `the copy is cut into chunks (${firstChunks.length})`);

  // A few changes: the next snapshot uploads only the chunks they touched.
  await write(cluster.conn, model, [[1n, 'b1'], [2n, null], [2999n, 'b2999']]);
  const uploadedBefore = await metric(cluster, 'tributary_kv_snapshot_uploaded_chunks_total');
  const [second] = await admin.triggerKvSnapshot(accounts);
  const secondChunks = await chunksOf(firstMeta.replace(/snap-\d+/, `snap-${second.snapshotId}`));
  const uploaded = (await metric(cluster, 'tributary_kv_snapshot_uploaded_chunks_total')) - uploadedBefore;
  const shared = secondChunks.filter((c) => firstChunks.includes(c)).length;
  assert.ok(shared > 0 && uploaded < secondChunks.length, `snapshot ${second.snapshotId} shares ${shared} of ${secondChunks.length} chunks with the first and uploaded ${uploaded}`);
  assert.equal(uploaded, new Set(secondChunks.filter((c) => !firstChunks.includes(c))).size);

  // Changes after the snapshot come back through the changelog.
  await write(cluster.conn, model, [[3n, 'c3'], [4n, null], [3000n, 'c3000']]);
  await cluster.conn.close();
  assert.equal(await cluster.server.stop(), 0);
  wipeKvState(cluster);
  await cluster.restart();
  let conn = await cluster.reconnect();
  await assertRows(conn, model, 3001n);
  assert.equal(await metric(cluster, 'tributary_kv_restores_total{source="snapshot"}'), 1, 'the state came from the remote snapshot');

  // Many new keys, so that the next snapshot has many chunks to upload; kill -9 while it does.
  await write(conn, model, Array.from({ length: 6000 }, (_, i) => [BigInt(4000 + i), `d${i}`]));
  const before = await listAll(s3, bucket, 'remote/kv/tributary/');
  const running = conn.getAdmin().triggerKvSnapshot(accounts).catch(() => undefined);
  for (let i = 0; i < 2000; i++) {
    const now = await listAll(s3, bucket, 'remote/kv/tributary/');
    if ([...now.keys()].some((k) => !before.has(k))) break;
    await sleep(5);
  }
  await cluster.server.kill();
  await conn.close().catch(() => undefined);
  await running;
  stored = await listAll(s3, bucket, 'remote/kv/tributary/');
  const newKeys = [...stored.keys()].filter((k) => !before.has(k));
  t.diagnostic(`killed with ${newKeys.filter((k) => k.includes('/shared/')).length} new chunks stored and ${newKeys.filter((k) => k.endsWith('/_METADATA')).length} new _METADATA`);

  await cluster.restart();
  conn = await cluster.reconnect();
  await assertRegisteredComplete(s3, bucket, conn, stored);
  await assertRows(conn, model, 10000n);
  // The next commit removes every chunk no retained snapshot holds: the killed upload's leftovers too.
  await conn.getAdmin().triggerKvSnapshot(accounts);
  stored = await listAll(s3, bucket, 'remote/kv/tributary/');
  const held = await assertRegisteredComplete(s3, bucket, conn, stored);
  const chunks = [...stored.keys()].filter((k) => k.includes('/shared/')).map((k) => k.slice(k.lastIndexOf('/') + 1));
  assert.deepEqual(chunks.sort(), [...held].sort());
  assert.equal([...stored.keys()].filter((k) => k.endsWith('/_METADATA')).length, 2, 'kv.snapshot.num-retained snapshots');
  // And the newest of them restores exactly.
  await conn.close();
  assert.equal(await cluster.server.stop(), 0);
  wipeKvState(cluster);
  await cluster.restart();
  await assertRows(await cluster.reconnect(), model, 10000n);
});
