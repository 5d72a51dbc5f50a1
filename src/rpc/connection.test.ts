import { test } from 'node:test';
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { create, toBinary } from '@bufbuild/protobuf';
import type { TributaryError } from '../common/errors.js';
import { ApiKeys } from './api-keys.js';
import { RpcConnection } from './connection.js';
import { FrameDecoder, REQUEST_HEADER_SIZE, ResponseType, parseRequestFrame, responseHeader } from './frame.js';
import { RpcServer } from './server.js';
import { SOFTWARE_VERSION } from './version.js';

const isError = (name: string) => (err: TributaryError) => {
  assert.equal(err.errorName, name, err.message);
  return true;
};

/** A server whose ListTables handler answers only when the test releases it. */
async function holdingServer(t: TestContext, closeTimeoutMs = 1000) {
  const releases: (() => void)[] = [];
  let onEnter: (() => void) | undefined;
  const server = new RpcServer({ host: '127.0.0.1', port: 0, maxFrameBytes: 1 << 20, maxInflightBytes: 1 << 20, frameTimeoutMs: 30_000, idleTimeoutMs: 600_000, closeTimeoutMs });
  server.register(ApiKeys.ListTables, async ({ databaseName }) => {
    await new Promise<void>((resolve) => {
      releases.push(resolve);
      onEnter?.();
    });
    return { tableNames: [databaseName] };
  });
  const { port } = await server.listen();
  t.after(() => {
    releases.forEach((release) => release());
    return server.close();
  });
  const entered = async (count: number): Promise<void> => {
    while (releases.length < count) await new Promise<void>((resolve) => (onEnter = resolve));
  };
  return { server, port, releases, entered };
}

async function connect(t: TestContext, port: number, requestTimeoutMs = 10_000): Promise<RpcConnection> {
  const conn = await RpcConnection.connect('127.0.0.1', port, { requestTimeoutMs, clientName: 'test' });
  t.after(() => conn.close());
  return conn;
}

test('connect exchanges ApiVersions and refuses APIs the server does not serve', async (t) => {
  const { port } = await holdingServer(t);
  const conn = await connect(t, port);
  assert.equal(conn.serverVersion, SOFTWARE_VERSION);
  assert.equal(conn.isClosed, false);
  await assert.rejects(conn.request(ApiKeys.ProduceLog, { tableId: 1n }), (err: TributaryError) => {
    assert.equal(err.errorName, 'UNSUPPORTED_VERSION');
    assert.match(err.message, /ProduceLog \(1014\) at 127\.0\.0\.1:\d+: .* the server does not serve it/);
    return true;
  });
  assert.equal(conn.isClosed, false);
});

test('a request without an answer in time fails with REQUEST_TIME_OUT and its late answer is ignored', async (t) => {
  const { port, releases, entered } = await holdingServer(t);
  const conn = await connect(t, port);
  const late = conn.request(ApiKeys.ListTables, { databaseName: 'late' }, { timeoutMs: 20 });
  await assert.rejects(late, isError('REQUEST_TIME_OUT'));
  await entered(1);
  releases[0]();
  const next = conn.request(ApiKeys.ListTables, { databaseName: 'next' });
  await entered(2);
  releases[1]();
  assert.deepEqual((await next).tableNames, ['next']);
  assert.equal(conn.isClosed, false);
});

test('server close fails pending requests with CONNECTION_CLOSED and the connection stays closed', async (t) => {
  const { server, port, entered } = await holdingServer(t, 50);
  const conn = await connect(t, port);
  const pending = [conn.request(ApiKeys.ListTables, { databaseName: 'a' }), conn.request(ApiKeys.ListTables, { databaseName: 'b' })];
  await entered(2);
  await server.close(); // the handlers never answer; close gives up on them after 50 ms
  for (const request of pending) {
    await assert.rejects(request, (err: TributaryError) => err.errorName === 'CONNECTION_CLOSED' && err.retriable);
  }
  assert.equal(conn.isClosed, true);
  await assert.rejects(conn.request(ApiKeys.ListTables, { databaseName: 'c' }), isError('CONNECTION_CLOSED'));
});

test('client close fails pending requests with CONNECTION_CLOSED', async (t) => {
  const { port, entered } = await holdingServer(t);
  const conn = await connect(t, port);
  const pending = conn.request(ApiKeys.ListTables, { databaseName: 'a' });
  await entered(1);
  const rejected = assert.rejects(pending, isError('CONNECTION_CLOSED'));
  await conn.close();
  await rejected;
  assert.equal(conn.isClosed, true);
});

test('connecting to a port nobody listens on fails with NETWORK_EXCEPTION', async () => {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  await assert.rejects(RpcConnection.connect('127.0.0.1', port), isError('NETWORK_EXCEPTION'));
});

test('a corrupt response frame closes the connection and fails what is pending', async (t) => {
  // A peer that answers the handshake properly, then sends a negative frame length.
  const peer = net.createServer((socket) => {
    const decoder = new FrameDecoder(REQUEST_HEADER_SIZE, 1 << 20);
    socket.on('data', (chunk: Buffer) =>
      decoder.push(chunk, (frame) => {
        const { apiKey, requestId } = parseRequestFrame(frame);
        if (apiKey !== ApiKeys.ApiVersions.key) {
          socket.write(Buffer.from('ffffffff', 'hex'));
          return;
        }
        const body = toBinary(
          ApiKeys.ApiVersions.response,
          create(ApiKeys.ApiVersions.response, { apiVersions: [{ apiKey: ApiKeys.ListTables.key }], serverVersion: 'peer' }),
        );
        socket.write(Buffer.concat([responseHeader(ResponseType.OK, requestId, body.length), body]));
      }),
    );
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => peer.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => peer.close(resolve)));
  const conn = await connect(t, (peer.address() as net.AddressInfo).port);
  assert.equal(conn.serverVersion, 'peer');
  await assert.rejects(conn.request(ApiKeys.ListTables, { databaseName: 'x' }), (err: TributaryError) => {
    assert.equal(err.errorName, 'CONNECTION_CLOSED');
    assert.match(err.message, /corrupt response frame \(length -1\)/);
    return true;
  });
  assert.equal(conn.isClosed, true);
});
