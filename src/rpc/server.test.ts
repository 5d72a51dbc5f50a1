import { test } from 'node:test';
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { pino } from 'pino';
import { ErrorCodes, TributaryError } from '../common/errors.js';
import { ApiKeys } from './api-keys.js';
import { encodeFetchLogResponse } from './fetch-log-response.js';
import type { Api, RequestInit } from './api-keys.js';
import { RpcConnection } from './connection.js';
import { FrameDecoder, MAX_INT32, RESPONSE_HEADER_SIZE, ResponseType, parseResponseFrame, requestHeader } from './frame.js';
import type { ResponseFrame } from './frame.js';
import { ErrorResponseSchema } from './gen/tributary_pb.js';
import type { ErrorResponse } from './gen/tributary_pb.js';
import { EncodedResponse, RpcServer } from './server.js';
import type { RpcServerOptions } from './server.js';

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

async function startServer(
  t: TestContext,
  options: Partial<RpcServerOptions>,
  setup: (server: RpcServer) => void,
): Promise<{ server: RpcServer; port: number }> {
  const server = new RpcServer({ host: '127.0.0.1', port: 0, maxFrameBytes: 1 << 20, maxInflightBytes: 1 << 24, frameTimeoutMs: 30_000, idleTimeoutMs: 600_000, closeTimeoutMs: 1000, ...options });
  setup(server);
  const { port } = await server.listen();
  t.after(() => server.close());
  return { server, port };
}

async function connect(t: TestContext, port: number): Promise<RpcConnection> {
  const conn = await RpcConnection.connect('127.0.0.1', port, { requestTimeoutMs: 10_000 });
  t.after(() => conn.close());
  return conn;
}

/** DatabaseExists: 'missing' → DATABASE_NOT_EXIST, 'boom' → plain Error, anything else exists. */
function registerDatabaseExists(server: RpcServer): void {
  server.register(ApiKeys.DatabaseExists, async ({ databaseName }) => {
    if (databaseName === 'missing') throw new TributaryError('DATABASE_NOT_EXIST', `database '${databaseName}' does not exist`);
    if (databaseName === 'boom') throw new Error('handler exploded');
    return { exists: true };
  });
}

function encodeRequest<A extends Api>(api: A, requestId: number, init: RequestInit<A>, apiVersion = 0): Buffer {
  const body = toBinary(api.request, create(api.request, init as Record<string, unknown>));
  return Buffer.concat([requestHeader(api.key, apiVersion, requestId, body.length), body]);
}

/** A peer speaking raw bytes, to send what RpcConnection never would. */
class RawPeer {
  private readonly frames: ResponseFrame[] = [];
  private waiter: (() => void) | undefined;
  readonly closed: Promise<void>;

  private constructor(readonly socket: net.Socket) {
    const decoder = new FrameDecoder(RESPONSE_HEADER_SIZE, MAX_INT32);
    socket.on('data', (chunk: Buffer) => {
      decoder.push(chunk, (frame) => this.frames.push(parseResponseFrame(Buffer.from(frame))));
      this.waiter?.();
    });
    socket.on('error', () => {});
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
  }

  static async open(t: TestContext, port: number): Promise<RawPeer> {
    const socket = net.connect({ host: '127.0.0.1', port });
    await new Promise((resolve) => socket.once('connect', resolve));
    t.after(() => socket.destroy());
    return new RawPeer(socket);
  }

  async next(): Promise<ResponseFrame> {
    while (this.frames.length === 0) {
      const arrived = new Promise<void>((resolve) => (this.waiter = resolve));
      await Promise.race([arrived, this.closed]);
      if (this.frames.length === 0 && this.socket.destroyed) throw new Error('connection closed without a response');
    }
    return this.frames.shift()!;
  }

  async nextError(): Promise<{ type: number; requestId: number; error: ErrorResponse }> {
    const { type, requestId, body } = await this.next();
    return { type, requestId, error: fromBinary(ErrorResponseSchema, body) };
  }
}

test('a request travels to its handler and back, record bytes arriving as a view of the frame', async (t) => {
  let seen: { records: Uint8Array; connectionId: number; remoteAddress: string } | undefined;
  const { port } = await startServer(t, {}, (server) =>
    server.register(ApiKeys.ProduceLog, async (request, ctx) => {
      const records = request.bucketsReq[0].records;
      seen = { records, connectionId: ctx.connectionId, remoteAddress: ctx.remoteAddress };
      return { bucketsResp: request.bucketsReq.map((b) => ({ bucketId: b.bucketId, partitionId: b.partitionId, baseOffset: BigInt(b.records.length) })) };
    }),
  );
  const conn = await connect(t, port);
  const records = Buffer.alloc(5000, 7);
  const response = await conn.request(ApiKeys.ProduceLog, {
    acks: -1,
    tableId: 12n,
    bucketsReq: [{ bucketId: 3, partitionId: 9n, records }],
  });
  assert.deepEqual(
    response.bucketsResp.map((b) => [b.bucketId, b.partitionId, b.baseOffset, b.errorCode]),
    [[3, 9n, 5000n, undefined]],
  );
  assert.ok(seen);
  assert.deepEqual(Buffer.from(seen.records), records);
  assert.ok(seen.records.byteOffset > 0, 'the bytes field is a subarray of the received frame, not a copy');
  assert.ok(seen.connectionId > 0);
  assert.match(seen.remoteAddress, /^127\.0\.0\.1:\d+$/);

  // Compile-time checks (npm test type-checks first): responses are typed, request fields are checked.
  const baseOffset: bigint = response.bucketsResp[0].baseOffset;
  assert.equal(baseOffset, 5000n);
  // @ts-expect-error ProduceLogRequest has no field "tableName"
  const misspelt = (): unknown => conn.request(ApiKeys.ProduceLog, { tableName: 'x' });
  void misspelt;
});

test('a request frame over socket chunks is joined into reused memory only for handlers that release their body', async (t) => {
  const produced: Uint8Array[] = [];
  const kept: Uint8Array[] = [];
  const { port } = await startServer(t, {}, (server) => {
    server.register(
      ApiKeys.ProduceLog,
      async (request) => {
        produced.push(request.bucketsReq[0].records);
        return { bucketsResp: [] };
      },
      { releasesBody: true },
    );
    server.register(ApiKeys.PutKv, async (request) => {
      kept.push(request.bucketsReq[0].records);
      return { bucketsResp: [] };
    });
  });
  const conn = await connect(t, port);
  // 200 kB does not fit in one socket chunk (64 KiB), so each frame is joined from several.
  const records = (fill: number): Buffer => Buffer.alloc(200_000, fill);
  const produce = (fill: number) => conn.request(ApiKeys.ProduceLog, { acks: -1, tableId: 1n, bucketsReq: [{ bucketId: 0, records: records(fill) }] });
  const putKv = (fill: number) => conn.request(ApiKeys.PutKv, { acks: -1, tableId: 1n, bucketsReq: [{ bucketId: 0, records: records(fill) }] });

  await produce(1);
  await produce(2);
  assert.equal(produced[1].buffer, produced[0].buffer, 'the second ProduceLog reuses the memory the first gave back');
  await putKv(3); // may take that memory, and never gives it back
  await putKv(4);
  await produce(5);
  await produce(6);
  assert.deepEqual([...new Set(kept[0])], [3]);
  assert.deepEqual([...new Set(kept[1])], [4], 'a body kept by a handler that does not release it is never overwritten');
  assert.ok(!kept.some((k) => k.buffer === produced[3].buffer));
  assert.deepEqual([...new Set(produced[3])], [6]);
});

test('ApiVersions lists the registered APIs and the package version', async (t) => {
  const { port } = await startServer(t, {}, registerDatabaseExists);
  const peer = await RawPeer.open(t, port);
  peer.socket.write(encodeRequest(ApiKeys.ApiVersions, 1, { clientSoftwareName: 'raw' }));
  const { type, requestId, body } = await peer.next();
  assert.deepEqual([type, requestId], [ResponseType.OK, 1]);
  const response = fromBinary(ApiKeys.ApiVersions.response, body);
  const version = (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  assert.equal(response.serverVersion, version);
  assert.deepEqual(
    response.apiVersions.map((v) => [v.apiKey, v.minVersion, v.maxVersion]).sort((a, b) => a[0] - b[0]),
    [[1000, 0, 0], [1004, 0, 0]],
  );
});

test('pipelined requests are answered as they complete, out of order', async (t) => {
  const gates = new Map<string, { resolve: () => void }>();
  const allEntered = deferred();
  const { port } = await startServer(t, {}, (server) =>
    server.register(ApiKeys.ListTables, async ({ databaseName }) => {
      const gate = deferred();
      gates.set(databaseName, gate);
      if (gates.size === 3) allEntered.resolve();
      await gate.promise;
      return { tableNames: [databaseName] };
    }),
  );
  const conn = await connect(t, port);
  const order: string[] = [];
  const requests = ['a', 'b', 'c'].map((db) =>
    conn.request(ApiKeys.ListTables, { databaseName: db }).then((r) => order.push(r.tableNames[0])),
  );
  await allEntered.promise;
  for (const db of ['c', 'a', 'b']) gates.get(db)!.resolve();
  await Promise.all(requests);
  assert.deepEqual(order, ['c', 'a', 'b']);
});

test('handler failures become error responses and the server keeps serving', async (t) => {
  const logs: { level: number; msg: string; err?: { message: string } }[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  const { port } = await startServer(t, { logger }, registerDatabaseExists);
  const conn = await connect(t, port);

  await assert.rejects(conn.request(ApiKeys.DatabaseExists, { databaseName: 'missing' }), (err: TributaryError) => {
    assert.equal(err.errorName, 'DATABASE_NOT_EXIST');
    assert.equal(err.message, "database 'missing' does not exist");
    return true;
  });
  await assert.rejects(conn.request(ApiKeys.DatabaseExists, { databaseName: 'boom' }), (err: TributaryError) => {
    assert.equal(err.errorName, 'UNKNOWN_SERVER_ERROR');
    assert.match(err.message, /handler exploded/);
    return true;
  });
  const failure = logs.find((l) => l.msg === 'rpc handler failed');
  assert.equal(failure?.level, 50);
  assert.equal(failure?.err?.message, 'handler exploded');
  assert.ok(!logs.some((l) => l.msg === 'rpc handler failed' && l !== failure), 'a TributaryError is an answer, not a logged failure');

  assert.equal((await conn.request(ApiKeys.DatabaseExists, { databaseName: 'db' })).exists, true);
  const other = await connect(t, port);
  assert.equal((await other.request(ApiKeys.DatabaseExists, { databaseName: 'db' })).exists, true);
});

test('a server failure is response type 2 and still carries the request id', async (t) => {
  const { port } = await startServer(t, {}, registerDatabaseExists);
  const peer = await RawPeer.open(t, port);
  peer.socket.write(encodeRequest(ApiKeys.DatabaseExists, 77, { databaseName: 'boom' }));
  const { type, requestId, error } = await peer.nextError();
  assert.deepEqual([type, requestId, error.errorCode], [ResponseType.SERVER_FAILURE, 77, ErrorCodes.UNKNOWN_SERVER_ERROR]);
});

test('a body that is not a valid message gets CORRUPT_MESSAGE and its connection is closed', async (t) => {
  const { port } = await startServer(t, {}, registerDatabaseExists);
  const bystander = await connect(t, port);
  for (const body of [Buffer.from([0x0f]), Buffer.from([0x0a, 0x05, 0x61]), Buffer.from([0x0a, 0x02, 0xff, 0xfe])]) {
    const peer = await RawPeer.open(t, port);
    peer.socket.write(Buffer.concat([requestHeader(ApiKeys.DatabaseExists.key, 0, 5, body.length), body]));
    const { type, requestId, error } = await peer.nextError();
    assert.deepEqual([type, requestId, error.errorCode], [ResponseType.ERROR, 5, ErrorCodes.CORRUPT_MESSAGE]);
    assert.match(error.errorMessage, /DatabaseExists \(1004\) request 5/);
    await peer.closed;
  }
  assert.equal((await bystander.request(ApiKeys.DatabaseExists, { databaseName: 'db' })).exists, true);
});

test('a handler may read its request body itself and answer with bytes it encoded; a body its reader rejects is corrupt', async (t) => {
  // DatabaseExists read by hand: the body is the database name, and the answer is `exists` = 1.
  const { port } = await startServer(t, {}, (server) =>
    server.register(
      ApiKeys.DatabaseExists,
      async (name: string) => new EncodedResponse(name === 'yes' ? [Uint8Array.of(0x08), Uint8Array.of(0x01)] : []),
      {
        decode: (body) => {
          if (body[0] === 0xff) throw new Error('not a name');
          return body.toString('latin1');
        },
      },
    ),
  );
  const conn = await connect(t, port);
  const raw = await conn.requestRaw(ApiKeys.DatabaseExists, () => Buffer.from('yes'));
  assert.equal(Buffer.from(raw).toString('hex'), '0801');
  assert.equal((await conn.requestEncoded(ApiKeys.DatabaseExists, () => [Buffer.from('y'), Buffer.from('es')])).exists, true);
  assert.equal((await conn.requestEncoded(ApiKeys.DatabaseExists, () => Buffer.from('no'))).exists, false);
  const peer = await RawPeer.open(t, port);
  peer.socket.write(Buffer.concat([requestHeader(ApiKeys.DatabaseExists.key, 0, 9, 1), Buffer.of(0xff)]));
  const { requestId, error } = await peer.nextError();
  assert.deepEqual([requestId, error.errorCode], [9, ErrorCodes.CORRUPT_MESSAGE]);
  assert.match(error.errorMessage, /not a name/);
  await peer.closed;
});

test('a response encoder writes the wire bytes of a handler\'s response; a request run in the process gets the response as the handler made it', async (t) => {
  // The encoder answers `exists` = 1 whatever the handler said, so the test sees which path was taken.
  const { server, port } = await startServer(t, {}, (s) =>
    s.register(ApiKeys.DatabaseExists, async () => ({ exists: false }), { encode: (response) => (response.exists === false ? [Uint8Array.of(0x08), Uint8Array.of(0x01)] : []) }),
  );
  const conn = await connect(t, port);
  assert.equal((await conn.request(ApiKeys.DatabaseExists, { databaseName: 'db' })).exists, true);
  assert.equal((await server.invoke(ApiKeys.DatabaseExists, { databaseName: 'db' })).exists, false);
});

test('response memory is reused only once the socket has written the response that holds it; in-process callers keep theirs', async (t) => {
  // Each request answers 16 MiB of its name's first byte, in response memory: more than a peer
  // that does not read leaves room for in the socket buffers, so its response stays being written.
  const SIZE = 16 << 20;
  const taken: Buffer[] = [];
  const answered: (() => void)[] = [];
  const { server, port } = await startServer(t, { maxInflightBytes: 1 << 28 }, (s) => {
    s.register(
      ApiKeys.DatabaseExists,
      async (name: string, ctx) => {
        const memory = ctx.responseMemory(SIZE).fill(name.charCodeAt(0));
        taken.push(memory);
        answered.shift()?.();
        return new EncodedResponse([memory]);
      },
      { decode: (body) => body.toString('latin1') },
    );
    s.register(
      ApiKeys.FetchLog,
      async (_request, ctx) => ({ tablesResp: [{ tableId: 1n, bucketsResp: [{ bucketId: 0, records: ctx.responseMemory(SIZE).fill(7) }] }] }),
      { encode: encodeFetchLogResponse },
    );
  });
  const ask = (peer: RawPeer, id: number, name: string): void => void peer.socket.write(Buffer.concat([requestHeader(ApiKeys.DatabaseExists.key, 0, id, 1), Buffer.from(name)]));
  const slow = await RawPeer.open(t, port);
  const quick = await RawPeer.open(t, port);
  slow.socket.pause();
  const slowAnswered = new Promise<void>((resolve) => answered.push(resolve));
  ask(slow, 1, 'a');
  await slowAnswered;
  await new Promise((resolve) => setImmediate(resolve)); // the response is handed to the socket

  ask(quick, 2, 'b');
  const b = await quick.next();
  assert.equal(b.body.length, SIZE);
  assert.notEqual(taken[1].buffer, taken[0].buffer, 'memory of a response still being written is not lent again');
  slow.socket.resume();
  const a = await slow.next();
  assert.equal(a.requestId, 1);
  assert.equal(a.body.length, SIZE);
  assert.deepEqual([...new Set(a.body)], ['a'.charCodeAt(0)], 'the slow response went out as it was made');

  ask(quick, 3, 'c');
  await quick.next();
  assert.ok(taken[2].buffer === taken[0].buffer || taken[2].buffer === taken[1].buffer, 'memory of written responses is lent again');

  const first = await server.invoke(ApiKeys.FetchLog, {});
  const second = await server.invoke(ApiKeys.FetchLog, {});
  ask(quick, 4, 'd');
  await quick.next();
  const records = [first, second].map((r) => r.tablesResp[0].bucketsResp[0].records);
  assert.notEqual(records[0].buffer, records[1].buffer);
  assert.ok(records.every((r) => r.length === SIZE && r.every((byte) => byte === 7)), 'in-process responses keep their memory');
});

test('a negative or too-short frame length gets CORRUPT_MESSAGE and its connection is closed', async (t) => {
  const { port } = await startServer(t, {}, registerDatabaseExists);
  for (const hex of ['ffffffff', '00000007' + '03ec000000', '80000000']) {
    const peer = await RawPeer.open(t, port);
    peer.socket.write(Buffer.from(hex, 'hex'));
    const { type, requestId, error } = await peer.nextError();
    assert.deepEqual([type, requestId, error.errorCode], [ResponseType.ERROR, 0, ErrorCodes.CORRUPT_MESSAGE]);
    await peer.closed;
  }
});

test('an oversized frame gets RECORD_TOO_LARGE_EXCEPTION without its body being read, and other connections keep working', async (t) => {
  const { port } = await startServer(t, { maxFrameBytes: 1000 }, registerDatabaseExists);
  const bystander = await connect(t, port);

  const withHeader = await RawPeer.open(t, port);
  // Announce 100 MB but send only the header and a little of the body.
  withHeader.socket.write(Buffer.concat([requestHeader(ApiKeys.DatabaseExists.key, 0, 31, 100 << 20), Buffer.alloc(100)]));
  const first = await withHeader.nextError();
  assert.deepEqual([first.type, first.requestId, first.error.errorCode], [ResponseType.ERROR, 31, ErrorCodes.RECORD_TOO_LARGE_EXCEPTION]);
  assert.match(first.error.errorMessage, /exceeds the limit of 1000 bytes/);
  await withHeader.closed;

  const lengthOnly = await RawPeer.open(t, port);
  lengthOnly.socket.write(Buffer.from('GET / HTTP/1.1\r\n'));
  const second = await lengthOnly.nextError();
  assert.deepEqual([second.requestId, second.error.errorCode], [Buffer.from('TP/1').readInt32BE(), ErrorCodes.RECORD_TOO_LARGE_EXCEPTION]);
  await lengthOnly.closed;

  const justLength = await RawPeer.open(t, port);
  justLength.socket.write(Buffer.from('00001000', 'hex'));
  const third = await justLength.nextError();
  assert.deepEqual([third.requestId, third.error.errorCode], [0, ErrorCodes.RECORD_TOO_LARGE_EXCEPTION]);
  await justLength.closed;

  assert.equal((await bystander.request(ApiKeys.DatabaseExists, { databaseName: 'db' })).exists, true);
});

test('an unknown API or version gets UNSUPPORTED_VERSION and the connection stays usable', async (t) => {
  const { port } = await startServer(t, {}, registerDatabaseExists);
  const peer = await RawPeer.open(t, port);
  peer.socket.write(encodeRequest(ApiKeys.DatabaseExists, 1, { databaseName: 'db' }, 5));
  const wrongVersion = await peer.nextError();
  assert.deepEqual([wrongVersion.requestId, wrongVersion.error.errorCode], [1, ErrorCodes.UNSUPPORTED_VERSION]);
  assert.equal(wrongVersion.error.errorMessage, 'DatabaseExists (1004) does not support version 5; this server supports version 0');

  peer.socket.write(Buffer.concat([requestHeader(999, 0, 2, 0), requestHeader(ApiKeys.ProduceLog.key, 0, 3, 0)]));
  const unknown = await peer.nextError();
  assert.deepEqual([unknown.requestId, unknown.error.errorCode, unknown.error.errorMessage], [2, ErrorCodes.UNSUPPORTED_VERSION, 'unknown API key 999']);
  const unserved = await peer.nextError();
  assert.deepEqual([unserved.requestId, unserved.error.errorMessage], [3, 'ProduceLog (1014) is not served by this server']);

  peer.socket.write(encodeRequest(ApiKeys.DatabaseExists, 4, { databaseName: 'db' }));
  const ok = await peer.next();
  assert.deepEqual([ok.type, ok.requestId, fromBinary(ApiKeys.DatabaseExists.response, ok.body).exists], [ResponseType.OK, 4, true]);

  // Many rejected frames in one read are answered one after another (no recursion per frame).
  const count = 20_000;
  peer.socket.write(Buffer.concat(Array.from({ length: count }, (_, i) => requestHeader(999, 0, 100 + i, 0))));
  for (let i = 0; i < count; i++) assert.equal((await peer.next()).requestId, 100 + i);
});

/**
 * Gives the server a few event-loop turns to read and start whatever has arrived, so a missing
 * budget check would show. (No round trip can serve: over budget, the server reads no socket.)
 */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** ListTables handler that holds each request until released, counting how many run at once. */
function holdingServer() {
  const held: { name: string; release: () => void }[] = [];
  const entered: string[] = [];
  let running = 0;
  let maxRunning = 0;
  let onEnter: (() => void) | undefined;
  const setup = (server: RpcServer): void =>
    server.register(ApiKeys.ListTables, async ({ databaseName }) => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      entered.push(databaseName);
      const gate = deferred();
      held.push({ name: databaseName, release: gate.resolve });
      onEnter?.();
      await gate.promise;
      running--;
      return { tableNames: [databaseName] };
    });
  const waitEntered = async (count: number): Promise<void> => {
    while (entered.length < count) await new Promise<void>((resolve) => (onEnter = resolve));
  };
  return { setup, held, entered, waitEntered, stats: () => ({ running, maxRunning }) };
}

test('with a budget smaller than one request, requests run one at a time in arrival order', async (t) => {
  const h = holdingServer();
  const { port, server } = await startServer(t, { maxInflightBytes: 64 }, h.setup);
  const conn = await connect(t, port);
  const names = ['a', 'b', 'c', 'd', 'e', 'f'].map((c) => c.repeat(100)); // each frame > 64 bytes
  const responses = names.map((databaseName) => conn.request(ApiKeys.ListTables, { databaseName }));
  for (let i = 0; i < names.length; i++) {
    await h.waitEntered(i + 1);
    await settle();
    assert.equal(h.entered.length, i + 1, `only request ${i} may run before the ones ahead of it are answered`);
    h.held[i].release();
    assert.equal((await responses[i]).tableNames[0], names[i]);
  }
  assert.deepEqual(h.entered, names);
  assert.equal(h.stats().maxRunning, 1);
  assert.deepEqual(server.stats(), { connections: 1, heldBytes: 0, runningBytes: 0 });
});

test('small requests run together up to the budget and the rest wait', async (t) => {
  const h = holdingServer();
  // Each frame: 4 length + 8 header + 2 + 5 body bytes = 19; three fit in 60, four do not.
  const { port, server } = await startServer(t, { maxInflightBytes: 60 }, h.setup);
  const conn = await connect(t, port);
  const names = ['d1', 'd2', 'd3', 'd4', 'd5', 'd6'].map((n) => n + 'xxx');
  const responses = names.map((databaseName) => conn.request(ApiKeys.ListTables, { databaseName }));
  await h.waitEntered(3);
  await settle();
  assert.deepEqual(h.entered, names.slice(0, 3));
  h.held[0].release();
  await h.waitEntered(4);
  await settle();
  assert.equal(h.entered.length, 4);
  for (const entry of h.held.slice(1)) entry.release();
  await h.waitEntered(6);
  for (const entry of h.held.slice(4)) entry.release();
  assert.deepEqual((await Promise.all(responses)).map((r) => r.tableNames[0]), names);
  assert.equal(h.stats().maxRunning, 3);
  assert.deepEqual(server.stats(), { connections: 1, heldBytes: 0, runningBytes: 0 });
});

test('over budget the server stops reading sockets, so held bytes stay near the budget', async (t) => {
  const h = holdingServer();
  const budget = 1000;
  const { port, server } = await startServer(t, { maxInflightBytes: budget }, h.setup);
  const conn = await connect(t, port);
  const names = Array.from({ length: 2000 }, (_, i) => `${i}`.padEnd(10_000, '.')); // 20 MB in total
  const responses = names.map((databaseName) => conn.request(ApiKeys.ListTables, { databaseName }));
  await h.waitEntered(1);
  await settle();
  // At most one socket read (64 KiB) past the budget: the read that crossed it.
  assert.ok(server.stats().heldBytes <= budget + 65_536, `held ${server.stats().heldBytes} bytes`);
  for (let i = 0; i < names.length; i++) {
    await h.waitEntered(i + 1);
    h.held[i].release();
  }
  assert.equal((await Promise.all(responses)).length, names.length);
  assert.deepEqual(server.stats(), { connections: 1, heldBytes: 0, runningBytes: 0 });
});

test('a request far bigger than the budget and than a socket read still gets through, also from two connections at once', async (t) => {
  const { port } = await startServer(t, { maxInflightBytes: 64, maxFrameBytes: 8 << 20 }, (server) =>
    server.register(ApiKeys.ProduceLog, async (request) => ({
      bucketsResp: [{ bucketId: request.bucketsReq[0].bucketId, baseOffset: BigInt(request.bucketsReq[0].records.length) }],
    })),
  );
  const [a, b] = [await connect(t, port), await connect(t, port)];
  const big = (bucketId: number, size: number) => ({ tableId: 1n, bucketsReq: [{ bucketId, records: Buffer.alloc(size, bucketId) }] });
  const [ra, rb] = await Promise.all([a.request(ApiKeys.ProduceLog, big(1, 3 << 20)), b.request(ApiKeys.ProduceLog, big(2, 2 << 20))]);
  assert.equal(ra.bucketsResp[0].baseOffset, BigInt(3 << 20));
  assert.equal(rb.bucketsResp[0].baseOffset, BigInt(2 << 20));
});

test('close lets running requests answer, then closes connections', async (t) => {
  const h = holdingServer();
  const server = new RpcServer({ host: '127.0.0.1', port: 0, maxFrameBytes: 1 << 20, maxInflightBytes: 1 << 20, frameTimeoutMs: 30_000, idleTimeoutMs: 600_000, closeTimeoutMs: 30_000 });
  h.setup(server);
  const { port } = await server.listen();
  const conn = await connect(t, port);
  const response = conn.request(ApiKeys.ListTables, { databaseName: 'db' });
  await h.waitEntered(1);
  const closed = server.close();
  h.held[0].release();
  assert.deepEqual((await response).tableNames, ['db']);
  await closed;
  await assert.rejects(conn.request(ApiKeys.ListTables, { databaseName: 'db' }), (err: TributaryError) => err.errorName === 'CONNECTION_CLOSED');
  await assert.rejects(RpcConnection.connect('127.0.0.1', port), (err: TributaryError) => err.errorName === 'NETWORK_EXCEPTION');
});

/** Waits until `condition` holds, checking every 20 ms, and fails after `ms`. */
async function until(condition: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A raw peer that sends the header of a `declared`-byte request frame and `sent` bytes of its body, then stalls. */
async function stalledPeer(t: TestContext, port: number, declared: number, sent: number): Promise<RawPeer> {
  const peer = await RawPeer.open(t, port);
  peer.socket.write(Buffer.concat([requestHeader(ApiKeys.DatabaseExists.key, 0, 1, declared), Buffer.alloc(sent)]));
  return peer;
}

test('connections stalled in the middle of big frames do not keep other connections from being read', async (t) => {
  const budget = 1 << 20;
  const { port, server } = await startServer(t, { maxInflightBytes: budget, maxFrameBytes: 8 << 20 }, registerDatabaseExists);
  const stalled = await Promise.all(Array.from({ length: 12 }, () => stalledPeer(t, port, 4 << 20, 200_000)));
  await until(() => server.stats().heldBytes >= budget, 'the stalled frames fill the budget');
  const conn = await connect(t, port);
  assert.equal((await conn.request(ApiKeys.DatabaseExists, { databaseName: 'db' })).exists, true);
  assert.ok(stalled.every((peer) => !peer.socket.destroyed), 'the stalled connections are still open');
  assert.ok(server.stats().heldBytes < 12 * 200_000 + 65_536, 'connections past their share are not read');
});

test('a connection that stays silent loses its turn to read alone, and a big frame behind it gets through', async (t) => {
  // Sweeps once a second; the stalled frame stays within its deadline for the whole test.
  const { port } = await startServer(t, { maxInflightBytes: 64, maxFrameBytes: 8 << 20, frameTimeoutMs: 60_000 }, (server) =>
    server.register(ApiKeys.ProduceLog, async (request) => ({ bucketsResp: [{ bucketId: 0, baseOffset: BigInt(request.bucketsReq[0].records.length) }] })),
  );
  const stalled = await stalledPeer(t, port, 1 << 20, 1000); // over the budget with nothing running: read alone
  const conn = await connect(t, port);
  const response = await conn.request(ApiKeys.ProduceLog, { tableId: 1n, bucketsReq: [{ bucketId: 0, records: Buffer.alloc(300_000, 1) }] });
  assert.equal(response.bucketsResp[0].baseOffset, 300_000n);
  assert.ok(!stalled.socket.destroyed);
});

test('a frame not complete within the frame deadline closes its connection and releases its bytes', async (t) => {
  const closed: string[] = [];
  const { port, server } = await startServer(t, { frameTimeoutMs: 300, onDeadlineClosed: (deadline) => closed.push(deadline) }, registerDatabaseExists);
  const conn = await connect(t, port);
  const stalled = await stalledPeer(t, port, 500_000, 100_000);
  const slow = await RawPeer.open(t, port); // sends a byte of its frame now and then, never finishing in time
  slow.socket.write(requestHeader(ApiKeys.DatabaseExists.key, 0, 1, 100));
  const drip = setInterval(() => slow.socket.write(Buffer.alloc(1)), 50);
  t.after(() => clearInterval(drip));
  await Promise.race([Promise.all([stalled.closed, slow.closed]), new Promise((_, reject) => setTimeout(() => reject(new Error('still open')), 10_000))]);
  assert.deepEqual(closed, ['frame-timeout', 'frame-timeout']);
  await until(() => server.stats().heldBytes === 0, 'the stalled bytes are released');
  assert.equal(server.stats().connections, 1);
  assert.equal((await conn.request(ApiKeys.DatabaseExists, { databaseName: 'db' })).exists, true, 'complete frames are not affected');
});

test('a connection without bytes and without requests in flight is closed after the idle deadline', async (t) => {
  const h = holdingServer();
  const closed: string[] = [];
  const { port } = await startServer(t, { idleTimeoutMs: 300, onDeadlineClosed: (deadline) => closed.push(deadline) }, h.setup);
  const busy = await connect(t, port);
  const response = busy.request(ApiKeys.ListTables, { databaseName: 'db' });
  await h.waitEntered(1);
  const idle = await RawPeer.open(t, port);
  await Promise.race([idle.closed, new Promise((_, reject) => setTimeout(() => reject(new Error('idle connection still open')), 10_000))]);
  assert.deepEqual(closed, ['idle']);
  assert.ok(!busy.isClosed, 'a connection waiting for its answer is not idle');
  h.held[0].release();
  assert.deepEqual((await response).tableNames, ['db']);
  await until(() => busy.isClosed, 'the answered connection is closed once idle');
  assert.deepEqual(closed, ['idle', 'idle']);
});

test('readiness: ready while listening, not while requests wait for the budget longer than a frame may take, nor once closed', async (t) => {
  const h = holdingServer();
  const server = new RpcServer({ host: '127.0.0.1', port: 0, maxFrameBytes: 1 << 20, maxInflightBytes: 64, frameTimeoutMs: 200, idleTimeoutMs: 600_000, closeTimeoutMs: 1000 });
  h.setup(server);
  assert.deepEqual(server.readiness(), { ready: false, reason: 'the RPC listener is not listening' });
  const { port } = await server.listen();
  t.after(() => server.close());
  assert.deepEqual(server.readiness(), { ready: true });

  const conn = await connect(t, port);
  const other = await connect(t, port); // the first connection will hold its share and not be read on
  const first = conn.request(ApiKeys.ListTables, { databaseName: 'a'.repeat(100) }); // bigger than the budget: runs alone
  await h.waitEntered(1);
  const second = other.request(ApiKeys.ListTables, { databaseName: 'b' }); // waits for it
  await until(() => !server.readiness().ready, 'the waiting request makes the server not ready');
  const readiness = server.readiness();
  assert.ok(!readiness.ready && /requests have waited \d+ ms/.test(readiness.reason), JSON.stringify(readiness));
  h.held[0].release();
  await first;
  await h.waitEntered(2);
  h.held[1].release();
  await second;
  await until(() => server.readiness().ready, 'ready again once requests start');

  await server.close();
  assert.deepEqual(server.readiness(), { ready: false, reason: 'the RPC listener is not listening' });
});
