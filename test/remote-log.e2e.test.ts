/**
 * The remote log on a real S3-protocol server (s3rver) with real server processes: a log table
 * with 4 KiB segments uploads its closed segments, keeps the newest two locally, and a scanner from
 * earliest reads every record once, in order, across the remote/local boundary, with a projection;
 * kill -9 of the server while it writes, uploads and deletes loses nothing, reads nothing twice,
 * and leaves no manifest naming a missing object; with the S3 server stopped appends go on and
 * uploads resume after it; a lake-enabled table keeps no remote copy of what the lake holds; on a
 * 3-server cluster followers delete below the remote end too, and a
 * new leader serves the remote part and continues the uploads.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Connection, type ScanRecord, type TablePath } from '../src/client/index.js';
import { startS3Server, type S3TestServer } from '../src/storage/fixtures/s3-server.js';
import { S3ObjectStore } from '../src/storage/s3-store.js';
import { decodeManifest, segmentObject, segmentObjects } from '../src/server/tablet/remote/remote-log-manifest.js';
import { startCluster } from './support/cluster.js';
import { waitTiered } from './support/tiering-rounds.js';
import { WriterChild } from './support/writer-child.js';

const COLUMNS = [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'payload', type: 'STRING' }] as const;

function remoteSettings(s3: S3TestServer): Record<string, string> {
  return {
    ...s3.options,
    'remote.data.dir': s3.location('remote'),
    'log.segment.file-size': '4kb',
    'remote.log.task-interval-duration': '200ms',
    'remote.log.upload.max-backoff': '1s',
    'remote.log.orphan-min-age': '0s',
  };
}

/** The `.log` files of the table's bucket 0 on local disk. */
function localSegments(dataDir: string, table: string): string[] {
  const db = path.join(dataDir, 'log', 'tributary');
  const dir = fs.readdirSync(db).find((d) => d.startsWith(`${table}-`))!;
  return fs.readdirSync(path.join(db, dir, 'log-0')).filter((f) => f.endsWith('.log'));
}

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`gave up waiting: ${what}`);
}

async function readFromEarliest(bootstrap: string, table: string, expected: number, project?: string[]): Promise<ScanRecord[]> {
  const conn = await Connection.create({ 'bootstrap.servers': bootstrap });
  try {
    const t = await conn.getTable({ database: 'tributary', table });
    const scan = t.newScan();
    const scanner = (project ? scan.project(project) : scan).createLogScanner();
    await scanner.subscribe(0, 'earliest');
    const out: ScanRecord[] = [];
    for (let i = 0; i < 300 && out.length < expected; i++) out.push(...(await scanner.poll(200)));
    // Nothing more comes: no offset is read twice.
    out.push(...(await scanner.poll(300)));
    scanner.close();
    return out;
  } finally {
    await conn.close();
  }
}

/**
 * Every manifest under the remote dir, and whether each object it names exists; returns the
 * segments they name and the objects no manifest names.
 */
async function checkManifests(s3: S3TestServer, check: (segment: { endOffset: bigint }) => void = () => {}): Promise<number> {
  return (await readManifests(s3, check)).segments;
}

async function readManifests(s3: S3TestServer, check: (segment: { endOffset: bigint }) => void = () => {}): Promise<{ segments: number; unnamed: string[]; bucketDirs: string[] }> {
  const store = new S3ObjectStore(s3.settings);
  const objects = await store.list(s3.location('remote/log'));
  const names = new Set(objects.map((o) => o.location));
  const named = new Set<string>();
  const bucketDirs = new Set<string>();
  let segments = 0;
  for (const m of objects.filter((o) => o.location.endsWith('.manifest'))) {
    // A manifest superseded since the listing is deleted: only one still there must be whole.
    const bytes = await store.get(m.location);
    if (bytes === undefined) continue;
    named.add(m.location);
    const manifest = decodeManifest(bytes, m.location);
    const bucketDir = m.location.slice(0, m.location.indexOf('/metadata/'));
    bucketDirs.add(bucketDir);
    for (const s of manifest.segments) {
      for (const object of segmentObjects(bucketDir, s)) {
        assert.ok(names.has(object), `${m.location} names ${object}, which exists`);
        named.add(object);
      }
      check(s);
      segments++;
    }
  }
  return { segments, unnamed: [...names].filter((n) => !named.has(n)), bucketDirs: [...bucketDirs] };
}

test('closed segments go to S3, two stay local, and a projected scan from earliest reads the whole log once', async (t) => {
  const s3 = await startS3Server();
  t.after(() => s3.stop());
  const cluster = await startCluster(t, { settings: remoteSettings(s3), args: ['--no-tiering'], sql: 'tributary' });
  await cluster.conn.getAdmin().createTable({ database: 'tributary', table: 'events' }, { columns: [...COLUMNS], properties: { 'bucket.num': '1' } });
  const table = await cluster.conn.getTable({ database: 'tributary', table: 'events' });
  const writer = await table.newAppend().createWriter();
  const total = 3000;
  for (let id = 0; id < total; id++) {
    await writer.append({ id: BigInt(id), payload: `payload-${id}-${'x'.repeat(40)}` });
    if (id % 100 === 99) await writer.flush();
  }
  await writer.close();

  await until('only the newest two segments are local', () => localSegments(cluster.server.dataDir, 'events').length === 2);
  assert.ok((await checkManifests(s3)) >= 5, 'the remote log holds the older segments');

  const records = await readFromEarliest(cluster.bootstrap, 'events', total, ['id']);
  assert.deepEqual(records.map((r) => Number(r.row.id)), Array.from({ length: total }, (_, i) => i), 'every id once, in order');
  assert.deepEqual(Object.keys(records[0].row), ['id'], 'the projection holds on the remote part');
  assert.equal(records[0].offset, 0n, 'the scan starts at the remote log start');

  const { result } = await cluster.sql.execute('SELECT count(*) AS n, count(DISTINCT id) AS ids, min(id) AS lo, max(id) AS hi FROM events');
  assert.deepEqual(result!.rows[0].map(Number), [total, total, 0, total - 1], 'SQL reads the remote part too');
});

test('kill -9 while writing, uploading and deleting: nothing lost, nothing read twice, every manifest names existing objects', async (t) => {
  const s3 = await startS3Server();
  t.after(() => s3.stop());
  const cluster = await startCluster(t, { settings: remoteSettings(s3), args: ['--no-tiering'] });
  await cluster.conn.getAdmin().createTable({ database: 'tributary', table: 'crash' }, { columns: [...COLUMNS], properties: { 'bucket.num': '1' } });
  await cluster.conn.close();

  const total = 6000;
  const writer = WriterChild.start('crash-writer-child.ts', [cluster.bootstrap, 'tributary.crash', String(total)]);
  for (let kill = 1; kill <= 3; kill++) {
    await writer.waitForAcks(kill * 1500, 60_000);
    await cluster.server.kill();
    await cluster.restart();
  }
  assert.equal(await writer.exit(), 0, `producer failed: ${writer.stderr}`);
  await until('only the newest two segments are local', () => localSegments(cluster.server.dataDir, 'crash').length === 2);

  const records = await readFromEarliest(cluster.bootstrap, 'crash', total);
  const ids = records.map((r) => Number(r.row.id));
  assert.equal(new Set(ids).size, ids.length, 'no row is read twice');
  assert.deepEqual(ids, Array.from({ length: total }, (_, i) => i), 'every acknowledged row, in order');
  const offsets = records.map((r) => r.offset);
  assert.equal(new Set(offsets).size, offsets.length, 'no offset is read twice');

  // What an interrupted round leaves (here made for certain: a segment's log object and nothing
  // else) goes when the bucket's next leadership starts, and nothing any manifest names goes.
  const [bucketDir] = (await readManifests(s3)).bucketDirs;
  const leftover = segmentObject(bucketDir, { id: crypto.randomUUID(), baseOffset: 0n }, '.log');
  await new S3ObjectStore(s3.settings).put(leftover, 'half of a segment');
  await cluster.server.kill();
  await cluster.restart();
  await until('the restarted leader deletes every object no manifest names', async () => (await readManifests(s3)).unnamed.length === 0);
  assert.deepEqual((await readFromEarliest(cluster.bootstrap, 'crash', total)).map((r) => Number(r.row.id)), ids, 'the log reads the same after the sweep');
});

test('a lake-enabled table keeps no remote copy of what the lake holds: local segments go once the lake has them, and the union read is whole', async (t) => {
  const s3 = await startS3Server();
  t.after(() => s3.stop());
  const cluster = await startCluster(t, { settings: remoteSettings(s3), sql: 'tributary' });
  const path = { database: 'tributary', table: 'laked' };
  await cluster.conn.getAdmin().createTable(path, { columns: [...COLUMNS], properties: { 'bucket.num': '1', 'table.datalake.enabled': 'true', 'table.datalake.freshness': '1s' } });
  const writer = await (await cluster.conn.getTable(path)).newAppend().createWriter();
  const total = 3000;
  for (let id = 0; id < total; id++) {
    await writer.append({ id: BigInt(id), payload: `payload-${id}-${'x'.repeat(40)}` });
    if (id % 100 === 99) await writer.flush();
  }
  await writer.close();
  await waitTiered(cluster.conn, path);
  const lakeEnd = (await cluster.conn.getAdmin().getLakeTieringStatus(path)).buckets[0].lakeEndOffset;
  assert.equal(lakeEnd, BigInt(total));

  await until('only the newest two segments are local', () => localSegments(cluster.server.dataDir, 'laked').length === 2);
  await until('the remote log holds nothing the lake holds', async () => {
    let held = 0;
    await checkManifests(s3, (s) => void (s.endOffset <= lakeEnd && held++));
    return held === 0;
  });
  const { result } = await cluster.sql.execute('SELECT count(*) AS n, count(DISTINCT id) AS ids, min(id) AS lo, max(id) AS hi FROM laked');
  assert.deepEqual(result!.rows[0].map(Number), [total, total, 0, total - 1], 'the union read holds every row once');
});

/** A counter of the server's /metrics. */
async function metric(http: string, name: string): Promise<number> {
  const text = await (await fetch(`http://${http.replace(/^https?:\/\//, '')}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : NaN;
}

test('with the S3 server stopped, appends go on, uploads back off, and resume once it is back', async (t) => {
  const s3 = await startS3Server();
  t.after(() => s3.stop());
  const cluster = await startCluster(t, { settings: remoteSettings(s3), args: ['--no-tiering'] });
  await cluster.conn.getAdmin().createTable({ database: 'tributary', table: 'outage' }, { columns: [...COLUMNS], properties: { 'bucket.num': '1' } });
  const table = await cluster.conn.getTable({ database: 'tributary', table: 'outage' });
  const writer = await table.newAppend().createWriter();
  const write = async (from: number, to: number): Promise<void> => {
    for (let id = from; id < to; id++) {
      await writer.append({ id: BigInt(id), payload: `payload-${id}-${'x'.repeat(40)}` });
      if (id % 100 === 99) await writer.flush();
    }
    await writer.flush();
  };
  await write(0, 1000);
  await until('the first segments are uploaded', () => localSegments(cluster.server.dataDir, 'outage').length === 2);

  await s3.pause();
  const failedBefore = await metric(cluster.server.http, 'tributary_remote_log_failed_rounds_total');
  await write(1000, 2500);
  assert.ok(localSegments(cluster.server.dataDir, 'outage').length > 2, 'segments not uploaded stay local');
  await until('upload rounds fail and back off', async () => (await metric(cluster.server.http, 'tributary_remote_log_failed_rounds_total')) > failedBefore);
  assert.ok(localSegments(cluster.server.dataDir, 'outage').length > 2, 'nothing is deleted locally while the store is down');

  await s3.resume();
  await until('uploads resume and local segments go', () => localSegments(cluster.server.dataDir, 'outage').length === 2);
  await writer.close();
  const records = await readFromEarliest(cluster.bootstrap, 'outage', 2500);
  assert.deepEqual(records.map((r) => Number(r.row.id)), Array.from({ length: 2500 }, (_, i) => i), 'every id once, in order');
  await checkManifests(s3);
});

async function leaderOf(conn: Connection, path: TablePath, not = -1): Promise<number> {
  let leader = -1;
  await until(`a leader of ${path.table} other than ${not}`, async () => {
    leader = (await conn.getAdmin().listBuckets(path)).find((b) => b.bucket === 0)?.leader ?? -1;
    return leader >= 0 && leader !== not;
  });
  return leader;
}

test('on a 3-server cluster followers delete below the remote end too, and a new leader serves the remote part and goes on uploading', async (t) => {
  const s3 = await startS3Server();
  t.after(() => s3.stop());
  const cluster = await startCluster(t, { zooKeeper: { tabletServers: 3 }, settings: { ...remoteSettings(s3), 'default.replication.factor': '3' } });
  const path = { database: 'tributary', table: 'replicated' };
  await cluster.conn.getAdmin().createTable(path, { columns: [...COLUMNS], properties: { 'bucket.num': '1' } });
  const table = await cluster.conn.getTable(path);
  const writer = await table.newAppend().createWriter();
  const write = async (from: number, to: number): Promise<void> => {
    for (let id = from; id < to; id++) {
      await writer.append({ id: BigInt(id), payload: `payload-${id}-${'x'.repeat(40)}` });
      if (id % 100 === 99) await writer.flush();
    }
    await writer.flush();
  };
  await write(0, 2000);
  const first = await leaderOf(cluster.conn, path);
  for (const id of [0, 1, 2]) {
    await until(`tablet server ${id} keeps only two local segments`, () => localSegments(cluster.tabletServer(id).dataDir, 'replicated').length === 2);
  }

  await cluster.tabletServer(first).kill();
  const second = await leaderOf(cluster.conn, path, first);
  const records = await readFromEarliest(cluster.bootstrap, 'replicated', 2000, ['id']);
  assert.deepEqual(records.map((r) => Number(r.row.id)), Array.from({ length: 2000 }, (_, i) => i), 'the new leader serves every id once, in order, from the remote log on');
  assert.equal(records[0].offset, 0n);

  const before = await checkManifests(s3);
  await write(2000, 3500);
  await writer.close();
  await until('the new leader uploads from the committed remote end', async () => (await checkManifests(s3)) > before && localSegments(cluster.tabletServer(second).dataDir, 'replicated').length === 2);
  const all = await readFromEarliest(cluster.bootstrap, 'replicated', 3500);
  assert.deepEqual(all.map((r) => Number(r.row.id)), Array.from({ length: 3500 }, (_, i) => i));
});

// The wiped follower restarts while its old ZooKeeper session still holds its registration: the
// coordinator may see it leave and join at once, and must take it out of the ISR all the same, or,
// elected with an empty log, it loses every offset above the log start it restarted at.
test('a follower whose disk is wiped starts again at the leader log start with the writer state of the remote log: leading, it knows a writer idle since', async (t) => {
  const s3 = await startS3Server();
  t.after(() => s3.stop());
  const cluster = await startCluster(t, { zooKeeper: { tabletServers: 3 }, settings: { ...remoteSettings(s3), 'default.replication.factor': '3' } });
  const writers = { database: 'tributary', table: 'writers' };
  const admin = cluster.conn.getAdmin();
  await admin.createTable(writers, { columns: [...COLUMNS], properties: { 'bucket.num': '1' } });
  const table = await cluster.conn.getTable(writers);
  const row = (id: number) => ({ id: BigInt(id), payload: `payload-${id}-${'x'.repeat(40)}` });
  // The idle writer's batches all end up below every replica's local log start.
  const idle = await table.newAppend().createWriter();
  for (let id = 0; id < 10; id++) await idle.append(row(id));
  await idle.flush();
  const busy = await table.newAppend().createWriter();
  for (let id = 10; id < 2010; id++) {
    await busy.append(row(id));
    if (id % 100 === 99) await busy.flush();
  }
  await busy.close();
  for (const id of [0, 1, 2]) {
    await until(`tablet server ${id} keeps only two local segments`, () => localSegments(cluster.tabletServer(id).dataDir, 'writers').length === 2);
  }

  const leader = await leaderOf(cluster.conn, writers);
  const [wiped, other] = [0, 1, 2].filter((id) => id !== leader);
  const follower = cluster.tabletServer(wiped);
  await follower.kill();
  fs.rmSync(follower.dataDir, { recursive: true, force: true });
  await cluster.restart(follower);
  // Its bucket exists once the coordinator saw it leave and join again (NotifyLeaderAndIsr): from
  // then on it is in the ISR only once caught up.
  const hasLog = (): boolean => {
    try {
      return localSegments(cluster.tabletServer(wiped).dataDir, 'writers').length > 0;
    } catch {
      return false; // not created yet
    }
  };
  await until('the wiped follower caught up and is back in the ISR', async () => hasLog() && (await admin.listBuckets(writers))[0].isr.includes(wiped));
  assert.ok(localSegments(cluster.tabletServer(wiped).dataDir, 'writers').length <= 2, 'it holds only what the leader holds locally');

  await cluster.tabletServer(leader).kill();
  await cluster.tabletServer(other).kill();
  await until('the wiped follower leads', async () => (await admin.listBuckets(writers))[0].leader === wiped);
  for (let id = 2010; id < 2020; id++) await idle.append(row(id));
  await idle.flush();
  await idle.close();
  const ids = (await readFromEarliest(cluster.bootstrap, 'writers', 2020, ['id'])).map((r) => Number(r.row.id));
  assert.deepEqual(ids, Array.from({ length: 2020 }, (_, i) => i), 'every row once, in order');
});
