/**
 * The connection against real servers: bootstrapping past dead addresses, what Admin says of the
 * one node of `tributary start`, and writers, scanners and reads carrying on, every row once,
 * while that node restarts under them; on a cluster of three tablet servers, a client that knows
 * one of them only finds the coordinator and sends each bucket's requests to its leader.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, test } from 'node:test';
import { startCluster, useCluster } from '../../test/support/cluster.js';
import { Connection, type ScanRecord, TributaryError } from './index.js';

/** An address nothing listens on: a port taken from the system, then let go. */
async function deadAddress(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `127.0.0.1:${port}`;
}

describe('Connection', () => {
  const cluster = useCluster({ client: false });

  test('bootstraps from the first bootstrap server that answers, past dead ones', async () => {
    const dead = await deadAddress();
    const conn = await Connection.create({ 'bootstrap.servers': `${dead}, ${cluster.bootstrap}` });
    try {
      await conn.getAdmin().createDatabase('bootstrapped');
      assert.ok((await conn.getAdmin().listDatabases()).includes('bootstrapped'));
      assert.deepEqual(
        (await conn.getAdmin().listTabletServers()).map((s) => `${s.nodeId}@${s.host}:${s.port}`),
        [`0@${cluster.server.bootstrap}`],
      );
    } finally {
      await conn.close();
    }
    await assert.rejects(
      Connection.create({ 'bootstrap.servers': dead, 'client.connect-timeout': '2s' }),
      (e: TributaryError) => e.errorName === 'NETWORK_EXCEPTION' && e.message.includes(`cannot reach any bootstrap server (${dead})`),
    );
  });

  test('listBuckets: one node leads every bucket at epoch 0, its high watermark counting the rows', async () => {
    const conn = await Connection.create({ 'bootstrap.servers': cluster.bootstrap });
    try {
      const path = { database: 'tributary', table: 'placed' };
      await conn.getAdmin().createTable(path, { columns: [{ name: 'id', type: 'INT' }], properties: { 'bucket.num': '3', 'bucket.key': 'id' } });
      const writer = await (await conn.getTable(path)).newAppend().createWriter();
      for (let id = 0; id < 30; id++) await writer.append({ id });
      await writer.close();
      const buckets = await conn.getAdmin().listBuckets(path);
      assert.deepEqual(
        buckets.map(({ bucket, leader, replicas, isr, leaderEpoch }) => ({ bucket, leader, replicas, isr, leaderEpoch })),
        [0, 1, 2].map((bucket) => ({ bucket, leader: 0, replicas: [0], isr: [0], leaderEpoch: 0 })),
      );
      const latest = await conn.getAdmin().listOffsets(path, [0, 1, 2], 'latest');
      assert.deepEqual(
        buckets.map((b) => b.highWatermark),
        [0, 1, 2].map((b) => latest.get(b)),
      );
      assert.equal(buckets.reduce((n, b) => n + b.highWatermark!, 0n), 30n);
      assert.deepEqual(buckets.map((b) => b.logEndOffset), buckets.map((b) => b.highWatermark), 'acknowledged writes end the log at the high watermark');
    } finally {
      await conn.close();
    }
  });
});

describe('a server restart', () => {
  test('writers, scanners and offset requests carry on through it without an error, and every row is read once', async (t) => {
    const cluster = await startCluster(t, { client: { 'client.writer.batch-timeout': '5ms' } });
    const path = { database: 'tributary', table: 'through_restart' };
    await cluster.conn.getAdmin().createTable(path, { columns: [{ name: 'id', type: 'INT' }], properties: { 'bucket.num': '2', 'bucket.key': 'id' } });
    const table = await cluster.conn.getTable(path);
    const writer = await table.newAppend().createWriter();
    const scanner = table.newScan().createLogScanner();
    await scanner.subscribe(0, 'earliest');
    await scanner.subscribe(1, 'earliest');
    const read: ScanRecord[] = [];
    const readUpTo = async (rows: number): Promise<void> => {
      while (read.length < rows) read.push(...(await scanner.poll(500)));
    };

    for (let id = 0; id < 200; id++) await writer.append({ id });
    await writer.flush();
    await readUpTo(100);

    // A crash while writes are in flight (the server may have stored some it did not acknowledge),
    // then rows written while the server is away wait in the writer.
    for (let id = 200; id < 300; id++) await writer.append({ id });
    const inFlight = writer.flush();
    await cluster.server.kill();
    for (let id = 300; id < 400; id++) await writer.append({ id });
    const flushed = Promise.all([inFlight, writer.flush()]);
    read.push(...(await scanner.poll(1000))); // resolves (with what was fetched before, if anything) while no server answers
    const latest = cluster.conn.getAdmin().listOffsets(path, [0, 1], 'latest'); // retried until the server is back
    await cluster.restart();
    await flushed;
    const acknowledged = [...(await latest).values()].reduce((a, b) => a + b, 0n);
    assert.ok(acknowledged >= 200n, `the rows acknowledged before the crash are there: ${acknowledged}`);
    await readUpTo(400);
    await writer.close();
    assert.deepEqual(await scanner.poll(1000), [], 'no row twice');
    scanner.close();

    assert.deepEqual(
      read.map((r) => r.row.id).sort((a, b) => Number(a) - Number(b)),
      Array.from({ length: 400 }, (_, id) => id),
    );
    const offsets = [0, 1].map((bucket) => read.filter((r) => r.bucket === bucket).map((r) => r.offset));
    for (const list of offsets) assert.deepEqual(list, list.map((_, i) => BigInt(i)), 'offsets in order, without a gap or a repeat');
  });
});

describe('a cluster of three tablet servers', () => {
  const cluster = useCluster({ zooKeeper: { tabletServers: 3 }, client: false });

  test('a client bootstrapped from one tablet server finds the coordinator and sends each bucket to its leader', async () => {
    const conn = await Connection.create({ 'bootstrap.servers': `${await deadAddress()},${cluster.tabletServer(2).bootstrap}` });
    try {
      const admin = conn.getAdmin();
      const path = { database: 'tributary', table: 'spread' };
      // One replica per bucket: a request to any server but the bucket's leader fails.
      await admin.createTable(path, { columns: [{ name: 'id', type: 'INT' }], properties: { 'bucket.num': '6', 'bucket.key': 'id', 'table.replication.factor': '1' } });
      const table = await conn.getTable(path);
      const writer = await table.newAppend().createWriter();
      for (let id = 0; id < 600; id++) await writer.append({ id });
      await writer.close();

      const buckets = await admin.listBuckets(path);
      assert.equal(buckets.length, 6);
      assert.ok(new Set(buckets.map((b) => b.leader)).size > 1, `the buckets are led by more than one server: ${buckets.map((b) => b.leader).join(', ')}`);
      for (const b of buckets) assert.deepEqual([b.replicas, b.isr, b.logEndOffset], [[b.leader], [b.leader], b.highWatermark]);
      assert.equal(buckets.reduce((n, b) => n + b.highWatermark!, 0n), 600n);
      const servers = await admin.listTabletServers();
      assert.deepEqual(
        servers.map((s) => [s.nodeId, `${s.host}:${s.port}`, s.alive, s.leaderCount]),
        [0, 1, 2].map((id) => [id, cluster.tabletServer(id).bootstrap, true, buckets.filter((b) => b.leader === id).length]),
      );

      const latest = await admin.listOffsets(path, [0, 1, 2, 3, 4, 5], 'latest');
      assert.deepEqual([...latest.values()], buckets.map((b) => b.highWatermark));
      assert.equal((await admin.getTableStats(path)).rowCount, 600n);
      const scanner = table.newScan().createLogScanner();
      for (let b = 0; b < 6; b++) await scanner.subscribe(b, 'earliest');
      const read: ScanRecord[] = [];
      while (read.length < 600) read.push(...(await scanner.poll(1000)));
      scanner.close();
      assert.deepEqual(
        read.map((r) => r.row.id).sort((a, b) => Number(a) - Number(b)),
        Array.from({ length: 600 }, (_, id) => id),
      );
    } finally {
      await conn.close();
    }
  });
});
