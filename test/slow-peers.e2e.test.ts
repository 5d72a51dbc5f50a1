/**
 * Peers that stall in the middle of requests (slowloris), against real server processes with a
 * small request memory: a client and the REST API are still served while stalled connections fill
 * it, the stalled and the idle connections are closed on their deadlines and counted (on the Kafka
 * listener too, under its own name), and
 * `GET /ready` says whether the RPC listener serves while `GET /health` stays the liveness check.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { Connection } from '../src/client/index.js';
import { startCluster, useCluster } from './support/cluster.js';

const FRAME_TIMEOUT_S = 8;
// No connection of the fixture's own: the tests count the connections the server closes.
const cluster = useCluster({
  args: ['--no-tiering', '--kafka-port', '0'],
  settings: { 'server.buffer.memory-size': '1mb', 'rpc.frame-timeout': `${FRAME_TIMEOUT_S}s`, 'netty.connection.max-idle-time': '3s' },
  client: false,
});

/** Fails with `what` unless `promise` settles within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** A raw TCP connection to a listener's port and a promise of its closing. */
async function rawSocket(port: number): Promise<{ socket: net.Socket; closed: Promise<void> }> {
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise((resolve) => socket.once('connect', resolve));
  return { socket, closed };
}

/** One sample of the node's metrics (of `node`, by default the shared server), by `name{labels}` as written. */
async function metric(key: string, node = cluster.server): Promise<number> {
  const text = await (await fetch(`http://${node.http}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${key} `));
  return line === undefined ? NaN : Number(line.slice(key.length + 1));
}

test('a client and the REST API are served while a dozen connections stall in big frames, and those are closed after rpc.frame-timeout', async () => {
  const header = Buffer.alloc(12);
  header.writeInt32BE(8 + (64 << 20), 0); // a 64 MiB DatabaseExists request (api key 1004), within rpc.max-frame-size
  header.writeInt16BE(1004, 4);
  const stalled = await Promise.all(Array.from({ length: 12 }, () => rawSocket(cluster.server.port)));
  for (const { socket } of stalled) socket.write(Buffer.concat([header, Buffer.alloc(256 * 1024)]));
  const startedAt = Date.now();
  while ((await metric('tributary_rpc_held_bytes')) < 1 << 20) {
    assert.ok(Date.now() - startedAt < 10_000, 'the stalled frames fill server.buffer.memory-size');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }

  const conn = await within(Connection.create({ 'bootstrap.servers': cluster.bootstrap, 'client.request-timeout': '5s' }), 6000, 'a client connects');
  try {
    assert.ok((await within(conn.getAdmin().listDatabases(), 6000, 'a client request')).includes('tributary'));
  } finally {
    await conn.close();
  }
  const rest = await within(fetch(`http://${cluster.server.http}/api/v1/databases`), 6000, 'a REST call');
  assert.equal(rest.status, 200);
  assert.ok(((await rest.json()) as { databases: string[] }).databases.includes('tributary'));
  assert.ok(Date.now() - startedAt < FRAME_TIMEOUT_S * 1000, 'served while the stalled connections were still open');

  await within(Promise.all(stalled.map((s) => s.closed)), (FRAME_TIMEOUT_S + 20) * 1000, 'the stalled connections are closed');
  assert.ok((await metric('tributary_rpc_connections_closed_total{deadline="frame-timeout"}')) >= 12);
  assert.ok((await metric('tributary_rpc_held_bytes')) < 1 << 20, 'their bytes are released');
});

test('a connection that sends nothing is closed after netty.connection.max-idle-time', async () => {
  const before = await metric('tributary_rpc_connections_closed_total{deadline="idle"}');
  const { closed } = await rawSocket(cluster.server.port);
  await within(closed, 20_000, 'the idle connection is closed');
  assert.ok((await metric('tributary_rpc_connections_closed_total{deadline="idle"}')) > before);
});

test('a Kafka connection that sends nothing is closed after netty.connection.max-idle-time and counted as the Kafka listener\'s', async () => {
  const rpcBefore = await metric('tributary_rpc_connections_closed_total{deadline="idle"}');
  const before = await metric('tributary_kafka_connections_closed_total{deadline="idle"}');
  assert.equal(await metric('tributary_kafka_connections_closed_total{deadline="frame-timeout"}'), 0);
  const { closed } = await rawSocket(Number(cluster.server.kafka.split(':').pop()));
  await within(closed, 20_000, 'the idle Kafka connection is closed');
  assert.equal(await metric('tributary_kafka_connections_closed_total{deadline="idle"}'), before + 1);
  assert.equal(await metric('tributary_rpc_connections_closed_total{deadline="idle"}'), rpcBefore);
});

test('GET /ready answers 200 while the RPC listener serves, and /health stays 200', async () => {
  const ready = await fetch(`http://${cluster.server.http}/ready`);
  assert.deepEqual([ready.status, ready.headers.get('content-type'), await ready.json()], [200, 'application/json', { status: 'ready' }]);
  const health = await fetch(`http://${cluster.server.http}/health`);
  assert.deepEqual([health.status, await health.json()], [200, { status: 'ok' }]);
});

test('GET /ready answers 503 with the reason while a running request holds all the request memory and others wait, and 200 again after', async (t) => {
  // 16 bytes of request memory: a long-polling fetch runs alone and every other request waits for it.
  const small = await startCluster(t, {
    args: ['--no-tiering'],
    settings: { 'server.buffer.memory-size': '16b', 'rpc.frame-timeout': '1s' },
    client: { 'client.scanner.log.fetch.min-bytes': '1mb', 'client.scanner.log.fetch.wait-max-time': '6s' },
  });
  const busy = small.server;
  const conn = small.conn;
  const path = { database: 'tributary', table: 'quiet' };
  await conn.getAdmin().createTable(path, { columns: [{ name: 'a', type: 'INT' }] });
  const scanner = (await conn.getTable(path)).newScan().createLogScanner();
  await scanner.subscribe(0, 'earliest');
  const polled = scanner.poll(6000); // the fetch waits for bytes that never come
  for (const startedAt = Date.now(); (await metric('tributary_rpc_held_bytes', busy)) === 0; ) {
    assert.ok(Date.now() - startedAt < 5000, 'the fetch is running');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  // Another client's handshake waits for the fetch's memory.
  const other = Connection.create({ 'bootstrap.servers': busy.bootstrap }).then(async (c) => {
    await c.close();
    return true;
  });
  const readiness = async (): Promise<{ status: number; body: { status: string; reason?: string } }> => {
    const res = await fetch(`http://${busy.http}/ready`);
    return { status: res.status, body: (await res.json()) as { status: string; reason?: string } };
  };
  let notReady = await readiness();
  for (const startedAt = Date.now(); notReady.status === 200 && Date.now() - startedAt < 5000; notReady = await readiness()) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.equal(notReady.status, 503);
  assert.equal(notReady.body.status, 'not ready');
  assert.match(notReady.body.reason ?? '', /requests have waited \d+ ms for the request memory held by running requests/);
  assert.deepEqual(await polled, []);
  assert.ok(await other);
  let ready = await readiness();
  for (const startedAt = Date.now(); ready.status !== 200 && Date.now() - startedAt < 10_000; ready = await readiness()) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.deepEqual(ready, { status: 200, body: { status: 'ready' } });
});
