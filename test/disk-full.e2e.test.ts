/**
 * A full data disk, for real: the data dir sits on a small tmpfs filled up with a file until
 * writes fail with ENOSPC. The server refuses writes with DISK_WRITE_LOCKED, serves reads and
 * stays up; freeing space lets writes resume without a restart; a kill -9 and a restart on the full
 * disk starts read-only and resumes once space is freed; no acknowledged row is lost. And the
 * write limit ratio on a normal disk.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Connection, TributaryError } from '../src/client/index.js';
import { startCluster } from './support/cluster.js';
import type { ServerProcess } from './support/server-process.js';
import { SmallDisk } from './support/small-disk.js';

const disk = SmallDisk.mount('disk-full', '16m');
const mountPoint = disk.mountPoint;
const mountRefused = disk.refused;
after(() => disk.unmount());

const EVENTS = { database: 'tributary', table: 'events' };
const STATE = { database: 'tributary', table: 'state' };
const FAST = { 'server.data-disk.check-interval': '100ms' };
const QUICK_GIVE_UP = { 'client.writer.delivery-timeout': '1s', 'client.request-timeout': '5s' };

async function metric(server: ServerProcess, name: string): Promise<number> {
  const text = await (await fetch(`http://${server.http}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  assert.ok(m, `metric ${name} missing`);
  return Number(m[1]);
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`timed out waiting for ${what}`);
}

const writeLocked = async (server: ServerProcess, locked: boolean): Promise<void> =>
  until(`write lock ${locked}`, async () => (await metric(server, 'tributary_data_disk_write_locked')) === (locked ? 1 : 0));

/** Appends rows [from, to) to the log table and upserts the same keys into the state table, acks=all. */
async function write(bootstrap: string, from: number, to: number, options: Record<string, string> = {}): Promise<void> {
  const conn = await Connection.create({ 'bootstrap.servers': bootstrap, ...options });
  try {
    const events = await (await conn.getTable(EVENTS)).newAppend().createWriter();
    const state = await (await conn.getTable(STATE)).newUpsert().createWriter();
    try {
      for (let id = from; id < to; id++) {
        await events.append({ id: BigInt(id), payload: `row-${id}` });
        await state.upsert({ k: BigInt(id % 50), v: id });
      }
      await events.flush();
      await state.flush();
    } finally {
      await events.close().catch(() => undefined);
      await state.close().catch(() => undefined);
    }
  } finally {
    await conn.close();
  }
}

async function refusedWithDiskWriteLocked(promise: Promise<unknown>): Promise<void> {
  await assert.rejects(promise, (err: unknown) => err instanceof TributaryError && err.errorName === 'DISK_WRITE_LOCKED');
}

/** Every id in the log table, through a log scan. */
async function scanIds(bootstrap: string, expected: number): Promise<number[]> {
  const conn = await Connection.create({ 'bootstrap.servers': bootstrap });
  try {
    const scanner = (await conn.getTable(EVENTS)).newScan().createLogScanner();
    await scanner.subscribe(0, 'earliest');
    const ids: number[] = [];
    for (let i = 0; i < 200; i++) {
      const got = await scanner.poll(100);
      ids.push(...got.map((r) => Number(r.row.id)));
      if (got.length === 0 && ids.length >= expected) break;
    }
    scanner.close();
    return ids;
  } finally {
    await conn.close();
  }
}

/** Checks the reads a full disk still serves: log scan, lookup, SQL; `total` rows were acknowledged. */
async function readsServed(server: ServerProcess, total: number): Promise<void> {
  const ids = await scanIds(server.bootstrap, total);
  assert.deepEqual(ids, Array.from({ length: total }, (_, i) => i), 'every acknowledged row, once, in order');
  const conn = await Connection.create({ 'bootstrap.servers': server.bootstrap });
  try {
    const lookuper = (await conn.getTable(STATE)).newLookup().createLookuper();
    const last = total - 1;
    assert.deepEqual(await lookuper.lookup({ k: BigInt(last % 50) }), { k: BigInt(last % 50), v: last });
  } finally {
    await conn.close();
  }
  const res = await fetch(`http://${server.http}/api/v1/sql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ sql: 'SELECT count(*) AS n FROM events' }),
  });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { rows: unknown[][] | Record<string, unknown>[] };
  assert.equal(Number(Object.values(body.rows[0])[0]), total);
  assert.equal((await fetch(`http://${server.http}/health`)).status, 200);
}

/** Writes the server must refuse while the disk is full: client writers, REST rows, CREATE TABLE. */
async function writesRefused(server: ServerProcess): Promise<void> {
  const conn = await Connection.create({ 'bootstrap.servers': server.bootstrap, ...QUICK_GIVE_UP });
  try {
    // A writer may be refused its id already (a new block of writer ids needs a metadata write), or its rows.
    const refused = async (createWriter: () => Promise<{ flush(): Promise<void>; close(): Promise<void> }>, write: (w: never) => Promise<void>): Promise<void> => {
      await refusedWithDiskWriteLocked(
        (async () => {
          const w = await createWriter();
          try {
            await write(w as never);
            await w.flush();
          } finally {
            await w.close().catch(() => undefined);
          }
        })(),
      );
    };
    const events = await conn.getTable(EVENTS);
    await refused(() => events.newAppend().createWriter(), (w: { append(r: object): Promise<void> }) => w.append({ id: -1n, payload: 'refused' }));
    const state = await conn.getTable(STATE);
    await refused(() => state.newUpsert().createWriter(), (w: { upsert(r: object): Promise<void> }) => w.upsert({ k: 999n, v: -1 }));
    await refusedWithDiskWriteLocked(conn.getAdmin().createTable({ database: 'tributary', table: 'more' }, { columns: [{ name: 'x', type: 'INT' }] }));
  } finally {
    await conn.close();
  }
  const res = await fetch(`http://${server.http}/api/v1/databases/tributary/tables/events/rows`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify([{ id: -2, payload: 'refused' }]),
  });
  assert.equal(res.status, 503);
  assert.equal(((await res.json()) as { error: { name: string } }).error.name, 'DISK_WRITE_LOCKED');
}

test('a full disk: writes refused, reads served, writes resume when space returns, also across kill -9', { timeout: 600_000 }, async (t) => {
  if (mountRefused) return t.skip(mountRefused);
  const cluster = await startCluster(t, { dataRoot: mountPoint, settings: FAST, args: ['--no-tiering'] });
  await cluster.conn.getAdmin().createTable(EVENTS, { columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'payload', type: 'STRING' }] });
  await cluster.conn.getAdmin().createTable(STATE, { columns: [{ name: 'k', type: 'BIGINT' }, { name: 'v', type: 'INT' }], primaryKey: ['k'] });
  await cluster.conn.close();
  let total = 500;
  await write(cluster.bootstrap, 0, total);

  disk.fill();
  await writeLocked(cluster.server, true);
  await writesRefused(cluster.server);
  await readsServed(cluster.server, total);

  disk.free();
  await writeLocked(cluster.server, false);
  await write(cluster.bootstrap, total, total + 300);
  total += 300;
  await readsServed(cluster.server, total);

  // A crash, then a restart on a full disk: the server starts, read-only.
  await cluster.server.kill();
  disk.fill();
  await cluster.restart();
  assert.equal(await metric(cluster.server, 'tributary_data_disk_write_locked'), 1);
  await readsServed(cluster.server, total);
  await writesRefused(cluster.server);

  disk.free();
  await writeLocked(cluster.server, false);
  await write(cluster.bootstrap, total, total + 200);
  total += 200;
  await readsServed(cluster.server, total);
});

test('above server.data-disk.write-limit-ratio writes are refused and reads served', { timeout: 300_000 }, async (t) => {
  const cluster = await startCluster(t, { settings: FAST, args: ['--no-tiering'] });
  await cluster.conn.getAdmin().createTable(EVENTS, { columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'payload', type: 'STRING' }] });
  await cluster.conn.getAdmin().createTable(STATE, { columns: [{ name: 'k', type: 'BIGINT' }, { name: 'v', type: 'INT' }], primaryKey: ['k'] });
  await cluster.conn.close();
  await write(cluster.bootstrap, 0, 100);
  assert.equal(await cluster.server.stop(), 0);
  // Any disk in use is above a limit of 0.0001 of it.
  const server = await cluster.restart(0, { 'server.data-disk.write-limit-ratio': '0.0001', 'server.data-disk.write-recover-ratio': '0' });
  assert.equal(await metric(server, 'tributary_data_disk_write_locked'), 1);
  assert.ok((await metric(server, 'tributary_data_disk_used_ratio')) > 0.0001);
  await writesRefused(server);
  await readsServed(server, 100);
  assert.match(server.stderr, /data disk full: writes are refused until space returns/);
});
