/**
 * RpcServer: accepts TCP connections, decodes request frames (frame.ts), runs the registered
 * handler of each API and writes its response as soon as it is ready, so pipelined requests may be
 * answered out of order.
 *
 * Failures and what the peer sees:
 *   handler throws TributaryError      error response (type 1) with its code; connection stays
 *   handler throws anything else       server failure (type 2), UNKNOWN_SERVER_ERROR; logged
 *   unknown api key / version          UNSUPPORTED_VERSION; connection stays
 *   body is not a valid message        CORRUPT_MESSAGE, then the connection is closed
 *   length > maxFrameBytes             RECORD_TOO_LARGE_EXCEPTION (request id from the header when it
 *                                      arrived with the length, else 0), then closed; the body is
 *                                      never buffered
 *   length < header size or negative   CORRUPT_MESSAGE, then closed
 * Closing after a fatal error lets the connection's running requests finish and answer first;
 * requests queued behind them are dropped.
 *
 * Memory: every byte read from a socket is held until the response of the request it belongs to
 * is written, within the request memory of maxInflightBytes (request-memory.ts), which the server
 * makes and the node's Kafka listener joins (`requestMemory`). The server stops reading a
 * connection that holds its share while that memory is full and resumes it once responses release
 * bytes; a complete frame waits in its connection's queue until the memory lets it start, and the
 * connection is not read while one waits.
 *
 * Deadlines (connection-deadlines.ts), checked by one sweep timer per server:
 *   a frame not complete frameTimeoutMs after its first bytes     the connection is closed
 *   no bytes and nothing held for idleTimeoutMs                   the connection is closed
 * Either way its held bytes are released and running requests still answer into the closed socket
 * (their bytes are released when they finish).
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { ErrorCodes, listenError, TributaryError } from '../common/errors.js';
import type { ErrorName } from '../common/errors.js';
import { ApiKeys, apiByKey, describeApi, versionRange } from './api-keys.js';
import type { Api, RequestInit, RequestMessage, ResponseInit, ResponseMessage } from './api-keys.js';
import {
  FrameDecoder,
  LENGTH_FIELD_SIZE,
  REQUEST_HEADER_SIZE,
  ResponseType,
  parseRequestFrame,
  responseHeader,
  writeFrame,
} from './frame.js';
import type { FrameError } from './frame.js';
import { type ConnectionDeadline, DeadlineWatch, sweepIntervalMs } from './connection-deadlines.js';
import { FramePool, idleShareOf, PoolLease } from './frame-pool.js';
import { ErrorResponseSchema } from './gen/tributary_pb.js';
import { type ConnectionMemory, type ListenerMemory, RequestMemoryBudget } from './request-memory.js';
import { SOFTWARE_VERSION } from './version.js';

/** The logging calls the server makes; a pino logger fits. */
export interface RpcLogger {
  debug(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface RpcServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Largest request frame (bytes after the length field), `rpc.max-frame-size`. */
  maxFrameBytes: number;
  /** Request bytes held across connections before reading stops, `server.buffer.memory-size`. */
  maxInflightBytes: number;
  /** How long a frame may take from its first bytes to its last, `rpc.frame-timeout`. */
  frameTimeoutMs: number;
  /** How long a connection may stay without bytes and without requests, `netty.connection.max-idle-time`. */
  idleTimeoutMs: number;
  logger?: RpcLogger;
  /** How long close() waits for running requests and for responses to flush. */
  closeTimeoutMs?: number;
  /** Told of every answered request: its API, seconds from decoded to answered, the error name it got. */
  onAnswered?: (api: Api, seconds: number, errorName: string | undefined) => void;
  /** Told of every connection the server closed because it missed a deadline. */
  onDeadlineClosed?: (deadline: ConnectionDeadline) => void;
}

/** Why the server closed a connection on its own: a frame too slow, or a connection idle too long. */
export type { ConnectionDeadline } from './connection-deadlines.js';

/** Whether the listener serves new requests; `reason` says why not. */
export type RpcReadiness = { ready: true } | { ready: false; reason: string };

/** The connection a request came on. */
export interface ConnectionInfo {
  connectionId: number;
  remoteAddress: string;
}

export interface RequestContext extends ConnectionInfo {
  /**
   * Memory for bytes the response carries (records read for it). From a connection it is pooled
   * and reused once the response has been written to the socket, so the handler keeps none of it
   * past its response; a handler that fails leaves it to the garbage collector (a read it started
   * may still be filling it). In-process (`invoke`) it is fresh memory the caller keeps.
   */
  responseMemory: (length: number) => Buffer;
}

export interface RpcServerStats {
  connections: number;
  /** Request bytes read and not yet answered, partial frames included (bounded by maxInflightBytes). */
  heldBytes: number;
  /** Bytes of the requests whose handlers are running. */
  runningBytes: number;
}

/**
 * A response body a handler encoded itself, as parts written one after the other: hot read paths
 * write their values straight into the response instead of building a message for protobuf-es.
 */
export class EncodedResponse {
  constructor(readonly parts: readonly Uint8Array[]) {}
}

export type Handler<A extends Api, R = RequestMessage<A>> = (request: R, ctx: RequestContext) => Promise<ResponseInit<A> | EncodedResponse>;

/** What registering services needs of a server: `RpcServer`, or anything that hands handlers on to one. */
export interface ApiRegistrar {
  register<A extends Api, R = RequestMessage<A>>(api: A, handler: Handler<A, R>, options?: RegisterOptions<R, A>): void;
}

export interface RegisterOptions<R, A extends Api = Api> {
  /**
   * Reads the request body in place of protobuf-es, for hot paths that read it by hand; it throws
   * on a body that is not a valid message, which is then treated as protobuf-es's failure.
   */
  decode?: (body: Buffer) => R;
  /**
   * Neither what the handler keeps nor its response refers to its request's bytes once it has
   * answered (it copies what it keeps), so the server reuses the frame's memory for later requests
   * as soon as the response is handed to the socket.
   */
  releasesBody?: boolean;
  /**
   * Writes the handler's response for the wire in place of protobuf-es, for hot paths whose
   * responses carry bytes that should go to the socket without copies; `invoke` (in this process)
   * takes the response as it is.
   */
  encode?: (response: ResponseInit<A>) => Uint8Array[];
}

interface Registration {
  api: Api;
  handler: (request: unknown, ctx: RequestContext) => Promise<unknown>;
  decode?: (body: Buffer) => unknown;
  encode?: (response: never) => Uint8Array[];
  releasesBody: boolean;
}

/** After a fatal frame error the server sends its answer and half-closes; a peer that keeps the connection open longer is cut off. */
const LINGER_MS = 1000;
const DEFAULT_CLOSE_TIMEOUT_MS = 10_000;
const silentLogger: RpcLogger = { debug() {}, warn() {}, error() {} };
/** The context of requests run by `invoke`: no connection of this listener. */
const IN_PROCESS: RequestContext = { connectionId: 0, remoteAddress: 'in-process', responseMemory: (length) => Buffer.allocUnsafe(length) };
/** Response bytes below this come from Node's shared slab as they are; pooling them gains nothing. */
const MIN_POOLED_RESPONSE = 4096;

class ServerConnection {
  readonly decoder: FrameDecoder;
  /** Complete frames waiting for the in-flight budget. */
  readonly queue: Buffer[] = [];
  /** A fatal frame error was answered; the connection ends once its running requests are done. */
  failed = false;
  writeBlocked = false;
  reading = true;
  lingerTimer: NodeJS.Timeout | undefined;
  /** Frames completed so far: the sweep tells a frame still under way from a later one by it. */
  framesRead = 0;
  readonly deadlines = new DeadlineWatch();

  constructor(
    readonly socket: net.Socket,
    readonly ctx: ConnectionInfo,
    readonly memory: ConnectionMemory,
    maxFrameBytes: number,
    frames: FramePool,
  ) {
    this.decoder = new FrameDecoder(REQUEST_HEADER_SIZE, maxFrameBytes, (length) => frames.take(length));
  }
}

export class RpcServer implements ApiRegistrar {
  private readonly server: net.Server;
  private readonly handlers = new Map<number, Registration>();
  private readonly connections = new Set<ServerConnection>();
  private readonly logger: RpcLogger;
  /** Memory of request frames that span socket chunks; idle buffers up to a quarter of the in-flight budget. */
  private readonly frames: FramePool;
  /** Memory of response bytes until they are written; idle buffers up to another quarter of the budget. */
  private readonly responses: FramePool;
  /** The request memory of maxInflightBytes: this server's connections, and those of listeners that join it. */
  readonly requestMemory: RequestMemoryBudget;
  /** This server's part of the request memory. */
  private readonly memory: ListenerMemory;
  private readonly sweepIntervalMs: number;
  private nextConnectionId = 1;
  private sweepTimer: NodeJS.Timeout | undefined;
  /** Since when (ms since epoch) every sweep found requests waiting for the budget; 0 when the last one did not. */
  private saturatedSince = 0;
  private closing = false;
  private closed: Promise<void> | undefined;
  private onIdle: (() => void) | undefined;

  constructor(private readonly options: RpcServerOptions) {
    this.logger = options.logger ?? silentLogger;
    this.frames = new FramePool(idleShareOf(options.maxInflightBytes));
    this.responses = new FramePool(idleShareOf(options.maxInflightBytes), MIN_POOLED_RESPONSE);
    this.sweepIntervalMs = sweepIntervalMs(options);
    // A connection reading alone loses its turn after a sweep's time without bytes.
    this.requestMemory = new RequestMemoryBudget(options.maxInflightBytes, this.sweepIntervalMs);
    this.memory = this.requestMemory.listener();
    this.server = net.createServer({ noDelay: true }, (socket) => this.accept(socket));
    this.server.on('error', (err) => this.logger.error({ err }, 'rpc listener error'));
    this.handlers.set(ApiKeys.ApiVersions.key, {
      api: ApiKeys.ApiVersions,
      handler: async () => ({
        apiVersions: [...this.handlers.values()].map(({ api }) => ({ apiKey: api.key, minVersion: api.minVersion, maxVersion: api.maxVersion })),
        serverVersion: SOFTWARE_VERSION,
      }),
      releasesBody: true,
    });
  }

  register<A extends Api, R = RequestMessage<A>>(api: A, handler: Handler<A, R>, options: RegisterOptions<R, A> = {}): void {
    if (this.handlers.has(api.key)) throw new TributaryError('INVALID_ARGUMENT', `${describeApi(api)} already has a handler`);
    const { decode, encode, releasesBody = false } = options;
    this.handlers.set(api.key, { api, handler: handler as Registration['handler'], decode, encode, releasesBody });
  }

  /**
   * Runs the handler of `api` in this process as a request from the wire would run, without the
   * frame: how a second protocol's listener in the same process (the Kafka listener) reaches the
   * node's services. Handler errors are thrown as they are.
   */
  async invoke<A extends Api>(api: A, request: RequestInit<A>): Promise<ResponseMessage<A>> {
    const registration = this.handlers.get(api.key);
    if (!registration) throw new TributaryError('UNSUPPORTED_VERSION', `${describeApi(api)} is not served by this server`);
    const message = create(api.request, request);
    const decoded = registration.decode ? registration.decode(Buffer.from(toBinary(api.request, message))) : message;
    const response = await registration.handler(decoded, IN_PROCESS);
    if (response instanceof EncodedResponse) return fromBinary(api.response, Buffer.concat(response.parts)) as ResponseMessage<A>;
    return create(api.response, response as ResponseInit<A>) as ResponseMessage<A>;
  }

  async listen(): Promise<{ host: string; port: number }> {
    const address = await listenOn(this.server, this.options.host, this.options.port);
    this.sweepTimer = setInterval(() => this.sweep(), this.sweepIntervalMs).unref();
    return address;
  }

  stats(): RpcServerStats {
    return { connections: this.connections.size, heldBytes: this.memory.heldBytes, runningBytes: this.memory.runningBytes };
  }

  /**
   * Not ready while the listener is not listening (before listen, when closing) and once requests
   * have waited for the budget at every sweep for longer than a frame may take: the running
   * requests hold it all and do not answer.
   */
  readiness(): RpcReadiness {
    if (this.closing || !this.server.listening) return { ready: false, reason: 'the RPC listener is not listening' };
    const waited = this.saturatedSince === 0 ? 0 : Date.now() - this.saturatedSince;
    if (waited > this.options.frameTimeoutMs) {
      return { ready: false, reason: `requests have waited ${waited} ms for the request memory held by running requests (server.buffer.memory-size)` };
    }
    return { ready: true };
  }

  /** Stops accepting, lets running requests answer (up to closeTimeoutMs), then closes every connection. */
  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  private async shutdown(): Promise<void> {
    this.closing = true;
    clearInterval(this.sweepTimer);
    const listenerClosed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const conn of this.connections) {
      this.dropQueued(conn);
      this.refresh(conn);
    }
    const deadline = Date.now() + (this.options.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS);
    if (this.memory.runningBytes > 0) await untilDeadline(new Promise<void>((resolve) => (this.onIdle = resolve)), deadline);
    for (const conn of this.connections) conn.socket.end(() => conn.socket.destroy());
    await untilDeadline(listenerClosed, deadline);
    for (const conn of this.connections) conn.socket.destroy();
    await listenerClosed;
  }

  private accept(socket: net.Socket): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    const ctx = { connectionId: this.nextConnectionId++, remoteAddress: `${socket.remoteAddress}:${socket.remotePort}` };
    const memory = this.memory.open({
      waitingBytes: () => (conn.failed || conn.queue.length === 0 ? 0 : conn.queue[0].length + LENGTH_FIELD_SIZE),
      startWaiting: () => this.start(conn, conn.queue.shift()!),
      receiving: () => !this.closing && !conn.failed && !conn.writeBlocked && conn.decoder.bufferedBytes > 0,
      refresh: () => this.refresh(conn),
    });
    const conn = new ServerConnection(socket, ctx, memory, this.options.maxFrameBytes, this.frames);
    this.connections.add(conn);
    socket.on('data', (chunk: Buffer) => this.onData(conn, chunk));
    socket.on('error', (err) => this.logger.debug({ ...ctx, err }, 'rpc connection error'));
    socket.on('close', () => this.onClose(conn));
    this.refresh(conn);
  }

  private onData(conn: ServerConnection, chunk: Buffer): void {
    if (conn.failed || this.closing) return; // discarded until the peer closes
    conn.memory.hold(chunk.length);
    conn.deadlines.touch();
    const error = conn.decoder.push(chunk, (frame) => {
      conn.framesRead++;
      conn.queue.push(frame);
    });
    conn.memory.startWaiting();
    if (error) this.failFrame(conn, error);
    conn.memory.changed();
  }

  private onClose(conn: ServerConnection): void {
    this.connections.delete(conn);
    clearTimeout(conn.lingerTimer);
    this.dropQueued(conn);
    conn.memory.close();
  }

  /** Runs a queued request: the request memory has counted its bytes as running. */
  private start(conn: ServerConnection, frame: Buffer): void {
    const size = frame.length + LENGTH_FIELD_SIZE;
    const { apiKey, apiVersion, requestId, body } = parseRequestFrame(frame);
    const registration = this.handlers.get(apiKey);
    if (!registration || apiVersion < registration.api.minVersion || apiVersion > registration.api.maxVersion) {
      this.frames.give(frame);
      this.sendError(conn, ResponseType.ERROR, requestId, 'UNSUPPORTED_VERSION', unsupportedMessage(apiKey, apiVersion, registration));
      this.finish(conn, size);
      return;
    }
    const { api, decode } = registration;
    let request: unknown;
    try {
      request = decode ? decode(body) : fromBinary(api.request, body, { readUnknownFields: false });
    } catch (err) {
      this.frames.give(frame);
      const message = `cannot decode ${describeApi(api)} request ${requestId}: ${err instanceof Error ? err.message : String(err)}`;
      this.sendError(conn, ResponseType.ERROR, requestId, 'CORRUPT_MESSAGE', message);
      this.fail(conn, message);
      this.finish(conn, size);
      this.options.onAnswered?.(api, 0, 'CORRUPT_MESSAGE');
      return;
    }
    void this.run(conn, registration, request, requestId, frame);
  }

  private async run(conn: ServerConnection, { api, handler, encode, releasesBody }: Registration, request: unknown, requestId: number, frame: Buffer): Promise<void> {
    const size = frame.length + LENGTH_FIELD_SIZE;
    const start = performance.now();
    let errorName: string | undefined;
    const memory = new PoolLease(this.responses);
    try {
      const response = await handler(request, { ...conn.ctx, responseMemory: memory.take });
      const body =
        response instanceof EncodedResponse
          ? response.parts
          : encode
            ? encode(response as never)
            : toBinary(api.response, create(api.response, response as Record<string, unknown>));
      this.send(conn, ResponseType.OK, requestId, body, memory.giveBack);
    } catch (err) {
      if (err instanceof TributaryError) {
        errorName = err.errorName;
        this.sendError(conn, ResponseType.ERROR, requestId, err.errorName, err.message);
      } else {
        errorName = 'UNKNOWN_SERVER_ERROR';
        this.logger.error({ ...conn.ctx, api: api.name, requestId, err }, 'rpc handler failed');
        const message = err instanceof Error ? err.message : String(err);
        this.sendError(conn, ResponseType.SERVER_FAILURE, requestId, 'UNKNOWN_SERVER_ERROR', message);
      }
    } finally {
      if (releasesBody) this.frames.give(frame);
      this.finish(conn, size);
      this.options.onAnswered?.(api, (performance.now() - start) / 1000, errorName);
    }
  }

  /** A request's response is written (or its connection is gone): release its bytes. */
  private finish(conn: ServerConnection, size: number): void {
    conn.deadlines.touch();
    conn.memory.release(size);
    if (conn.failed && conn.memory.runningBytes === 0) this.endFailed(conn);
    if (this.memory.runningBytes === 0 && this.onIdle) {
      this.onIdle();
      this.onIdle = undefined;
    }
  }

  private failFrame(conn: ServerConnection, error: FrameError): void {
    if (error.kind === 'corrupt') {
      const message = `invalid request frame length ${error.length} (a request frame holds at least ${REQUEST_HEADER_SIZE} header bytes)`;
      this.sendError(conn, ResponseType.ERROR, 0, 'CORRUPT_MESSAGE', message);
      this.fail(conn, message);
    } else {
      const requestId = error.header ? parseRequestFrame(error.header).requestId : 0;
      const message = `request frame of ${error.length} bytes exceeds the limit of ${this.options.maxFrameBytes} bytes (rpc.max-frame-size)`;
      this.sendError(conn, ResponseType.ERROR, requestId, 'RECORD_TOO_LARGE_EXCEPTION', message);
      this.fail(conn, message);
    }
  }

  /** Stops taking requests from the connection; it ends once its running requests have answered. */
  private fail(conn: ServerConnection, reason: string): void {
    if (conn.failed) return;
    this.logger.debug({ ...conn.ctx, reason }, 'closing rpc connection after a bad request');
    conn.failed = true;
    this.dropQueued(conn);
    conn.memory.releaseIdle();
    if (conn.memory.runningBytes === 0) this.endFailed(conn);
    this.refresh(conn);
  }

  private endFailed(conn: ServerConnection): void {
    if (conn.socket.writableEnded) return;
    conn.socket.end();
    conn.lingerTimer = setTimeout(() => conn.socket.destroy(), LINGER_MS).unref();
  }

  private dropQueued(conn: ServerConnection): void {
    for (const frame of conn.queue) this.frames.give(frame);
    conn.queue.length = 0;
  }

  /** Closes the connections past a deadline, and notes whether requests wait for the request memory. */
  private sweep(): void {
    const now = Date.now();
    for (const conn of this.connections) {
      const past = conn.deadlines.check(now, { framesRead: conn.framesRead, partialBytes: conn.decoder.bufferedBytes, heldBytes: conn.memory.heldBytes }, this.options);
      if (past && !conn.failed) this.closeOnDeadline(conn, past.deadline, past.reason); // a failed one is closing already
    }
    this.saturatedSince = !this.requestMemory.requestsWaiting() ? 0 : this.saturatedSince || now;
  }

  private closeOnDeadline(conn: ServerConnection, deadline: ConnectionDeadline, reason: string): void {
    this.logger.debug({ ...conn.ctx, deadline, reason }, 'closing rpc connection');
    conn.socket.destroy();
    this.options.onDeadlineClosed?.(deadline);
  }

  private refresh(conn: ServerConnection): void {
    const read =
      conn.failed ||
      (!this.closing &&
        !conn.writeBlocked &&
        conn.queue.length === 0 &&
        conn.memory.mayRead);
    if (read === conn.reading) return;
    conn.reading = read;
    if (read) conn.socket.resume();
    else conn.socket.pause();
  }

  /** Writes a response; `onWritten` is called once the socket is done with its bytes (written, failed or never sent). */
  private send(conn: ServerConnection, type: ResponseType, requestId: number, body: Uint8Array | readonly Uint8Array[], onWritten?: () => void): void {
    const socket = conn.socket;
    if (socket.destroyed || socket.writableEnded) {
      onWritten?.();
      return;
    }
    const length = body instanceof Uint8Array ? body.length : body.reduce((n, part) => n + part.length, 0);
    if (writeFrame(socket, responseHeader(type, requestId, length), body, onWritten) || conn.writeBlocked) return;
    // The peer is not reading its responses: stop reading its requests until they drain.
    conn.writeBlocked = true;
    this.refresh(conn);
    socket.once('drain', () => {
      conn.writeBlocked = false;
      conn.memory.changed();
    });
  }

  private sendError(conn: ServerConnection, type: ResponseType, requestId: number, name: ErrorName, message: string): void {
    const body = toBinary(ErrorResponseSchema, create(ErrorResponseSchema, { errorCode: ErrorCodes[name], errorMessage: message }));
    this.send(conn, type, requestId, body);
  }
}

function unsupportedMessage(apiKey: number, apiVersion: number, registration: Registration | undefined): string {
  if (registration) {
    const { api } = registration;
    return `${describeApi(api)} does not support version ${apiVersion}; this server supports ${versionRange(api.minVersion, api.maxVersion)}`;
  }
  const known = apiByKey(apiKey);
  return known ? `${describeApi(known)} is not served by this server` : `unknown API key ${apiKey}`;
}

/** Waits for `promise`, but no later than `deadline` (ms since epoch). */
async function untilDeadline(promise: Promise<void>, deadline: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))));
  try {
    await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** Binds `server` to a listener of bind.listeners; a failure to bind is the named error of listenError. */
export function listenOn(server: net.Server, host: string, port: number): Promise<{ host: string; port: number }> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(listenError('bind.listeners', host, port, err));
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      const address = server.address() as AddressInfo;
      resolve({ host: address.address, port: address.port });
    });
  });
}
