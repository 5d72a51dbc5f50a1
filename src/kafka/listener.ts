/**
 * The Kafka listener: a TCP server speaking the Kafka protocol (protocol/), answering each request
 * through the broker (broker.ts).
 *
 * Per connection, requests are answered in the order they arrived, as Kafka brokers do (producers
 * rely on it for the order of their batches). They run one at a time, but for Produce: up to
 * `maxProducesInFlight` Produce requests run side by side, of any partitions, so one request's
 * conversion and write overlap another's wait for its acknowledgement (fsync, replicas); the
 * broker hands the batches of a partition to its log in the order the requests were started
 * (produce-turns.ts), so they reach the log in the order sent. Any other request waits until the
 * requests before it are answered. While a request waits,
 * the connection is no longer read: it holds at most the requests running and what one socket read
 * brought after them. Frames are split by the native listener's FrameDecoder
 * with its limit (`rpc.max-frame-size`). The native listener's deadlines hold
 * (rpc/connection-deadlines.ts): a connection whose frame is not complete `rpc.frame-timeout` after
 * its first bytes, or that sends nothing and holds nothing for `netty.connection.max-idle-time`,
 * is closed. A frame that spans socket reads is assembled in pooled memory (rpc/frame-pool.ts), as
 * the native listener's are; a Produce frame is given back once its request is answered (its
 * records were copied into log batches by then), any other frame is left to the garbage collector,
 * since what it decodes to (a group member's metadata, say) may keep views of it.
 *
 * Answers: a connection whose socket still holds answers its peer has not read is not given the
 * next request's answer until the socket has sent them ('drain'), as the native listener stops
 * reading such a peer; a consumer that pipelines Fetch requests and reads nothing makes the
 * process hold about one answer, not one per request.
 *
 * Memory: the listener's connections are in the node's request memory (rpc/request-memory.ts,
 * `server.buffer.memory-size`), shared with the native listener's. Every byte read is held until
 * the answer of its request is written (the bytes of a Produce with acks 0 until it is handled);
 * a request starts, in its turn, only once that memory lets it, and while the memory is full a
 * connection holding its share of it is not read until answers release bytes.
 *
 * Failures and what the peer sees (the connection stays unless said otherwise):
 *   frame length < 8 or > rpc.max-frame-size    an error answer (below) with CORRUPT_MESSAGE or
 *                                               MESSAGE_TOO_LARGE, then the connection is closed:
 *                                               the stream has no frame boundaries after it
 *   unknown API key, or a version not served    UNSUPPORTED_VERSION; ApiVersions answers at
 *                                               version 0 with the versions it serves
 *   header or body that does not decode         CORRUPT_MESSAGE
 *   a handler failing unexpectedly              UNKNOWN_SERVER_ERROR, logged
 *   Produce with acks 0                         no answer, as Kafka's protocol says
 * An error answer of an API and version served is that API's response (protocol/error-response.ts):
 * the top-level error code where the version has one, else the code on every requested topic or
 * partition. An unknown API key or version, or an oversized frame whose header did not arrive, has
 * no known response shape: its answer is the response header v0 followed by the int16 error code.
 */
import net from 'node:net';
import { type ConnectionDeadline, DeadlineWatch, sweepIntervalMs } from '../rpc/connection-deadlines.js';
import { FrameDecoder, LENGTH_FIELD_SIZE } from '../rpc/frame.js';
import { FramePool, idleShareOf } from '../rpc/frame-pool.js';
import type { BudgetedConnection, ConnectionMemory, ListenerMemory, RequestMemoryBudget } from '../rpc/request-memory.js';
import { listenOn, type RpcLogger } from '../rpc/server.js';
import type { KafkaApi } from './protocol/api.js';
import {
  ApiVersions,
  CreatePartitions,
  CreateTopics,
  DeleteTopics,
  DescribeConfigs,
  DescribeGroups,
  Fetch,
  FindCoordinator,
  Heartbeat,
  InitProducerId,
  JoinGroup,
  KAFKA_APIS,
  LeaveGroup,
  ListGroups,
  ListOffsets,
  Metadata,
  OffsetCommit,
  OffsetFetch,
  Produce,
  SyncGroup,
} from './protocol/apis/index.js';
import { KafkaErrors } from './protocol/error-codes.js';
import { errorResponse } from './protocol/error-response.js';
import { readRequestHeaderRest, readRequestHeaderStart, responseHeaderVersion, writeResponseHeader } from './protocol/headers.js';
import { KafkaDecodeError, Reader, Writer } from './protocol/primitives.js';
import { decodeMessage, encodeMessage } from './protocol/schema.js';
import { type KafkaBroker, kafkaFailure } from './broker.js';

export interface KafkaListenerOptions {
  host: string;
  port: number;
  maxFrameBytes: number;
  /** Most Produce requests of one connection running at once (`kafka.produce.max-in-flight`). */
  maxProducesInFlight: number;
  /** The request memory the listener's connections hold their bytes in (the native listener's). */
  requestMemory: RequestMemoryBudget;
  /** How long a frame may take from its first bytes to its last (`rpc.frame-timeout`). */
  frameTimeoutMs: number;
  idleTimeoutMs: number;
  logger: RpcLogger;
  /** Told of every connection the listener closed because it missed a deadline. */
  onDeadlineClosed?: (deadline: ConnectionDeadline) => void;
}

const HEADER_START = 8;
const APIS = new Map<number, KafkaApi>(KAFKA_APIS.map((a) => [a.key, a]));

/** Who sent a request, and at which version. */
interface RequestContext {
  clientId: string | null;
  clientHost: string;
  version: number;
}

type Handler = (broker: KafkaBroker, request: never, context: RequestContext) => unknown;
const HANDLERS = new Map<number, Handler>([
  [Produce.key, (b, r) => b.produce(r)],
  [Fetch.key, (b, r) => b.fetch(r)],
  [ListOffsets.key, (b, r) => b.listOffsets(r)],
  [Metadata.key, (b, r, c) => b.metadata(r, c.version)],
  [ApiVersions.key, (b) => b.apiVersions()],
  [CreateTopics.key, (b, r) => b.createTopics(r)],
  [DeleteTopics.key, (b, r) => b.deleteTopics(r)],
  [InitProducerId.key, (b, r) => b.initProducerId(r)],
  [DescribeConfigs.key, (b, r) => b.describeConfigs(r)],
  [CreatePartitions.key, (b, r) => b.createPartitions(r)],
  [FindCoordinator.key, (b, r) => b.groups.findCoordinator(r)],
  [JoinGroup.key, (b, r, c) => b.groups.joinGroup(r, c)],
  [SyncGroup.key, (b, r) => b.groups.syncGroup(r)],
  [Heartbeat.key, (b, r) => b.groups.heartbeat(r)],
  [LeaveGroup.key, (b, r, c) => b.groups.leaveGroup(r, c.version)],
  [OffsetCommit.key, (b, r) => b.groups.offsetCommit(r)],
  [OffsetFetch.key, (b, r) => b.groups.offsetFetch(r)],
  [ListGroups.key, (b, r) => b.groups.listGroups(r)],
  [DescribeGroups.key, (b, r) => b.groups.describeGroups(r)],
]);

/** A request frame, or the frame error that ends the stream, answered after the frames before it. */
type QueueItem = { kind: 'frame'; frame: Buffer } | { kind: 'frame-error'; header: Buffer | undefined; code: number };

/** A request decoded and ready to run, or the answer it gets without running. */
type Prepared = { api: KafkaApi; version: number; correlationId: number; request: unknown; clientId: string | null } | { answer: Buffer[] };

/** A listener's connections, the request bytes they hold (closed connections' running requests included) and the answer bytes their sockets have yet to send. */
export interface KafkaListenerStats {
  connections: number;
  heldBytes: number;
  runningBytes: number;
  unsentBytes: number;
}

class KafkaConnection implements BudgetedConnection {
  readonly queue: QueueItem[] = [];
  readonly memory: ConnectionMemory;
  running = false;
  /** Bytes arrived while requests were being taken: the connection is not read until they are. */
  backlogged = false;
  closing = false;
  reading = true;
  /** Produce requests running, answered or not. */
  inFlight = 0;
  /** Frames completed so far, for the frame deadline. */
  framesRead = 0;
  readonly deadlines = new DeadlineWatch();
  /** Settles once every answer so far is written, in order. */
  written: Promise<void> = Promise.resolve();
  /** The request waiting for request memory, and how it is let start (or told the connection closed). */
  private admission: { bytes: number; start: (started: boolean) => void } | undefined;

  constructor(
    readonly socket: net.Socket,
    readonly decoder: FrameDecoder,
    memory: ListenerMemory,
  ) {
    this.memory = memory.open(this);
  }

  /** Settles true once the request memory lets a request of `bytes` start, false if the connection closes first. */
  admit(bytes: number): Promise<boolean> {
    const admitted = new Promise<boolean>((start) => (this.admission = { bytes, start }));
    this.memory.startWaiting();
    return admitted;
  }

  closed(): void {
    this.memory.close();
    this.admission?.start(false);
    this.admission = undefined;
  }

  waitingBytes(): number {
    return this.admission?.bytes ?? 0;
  }

  startWaiting(): void {
    this.admission?.start(true);
    this.admission = undefined;
  }

  receiving(): boolean {
    return !this.closing && !this.backlogged && this.decoder.bufferedBytes > 0;
  }

  /** Read while requests are taken as they come and the request memory allows; after a frame error, read to discard. */
  refresh(): void {
    const read = this.closing || (!this.backlogged && this.memory.mayRead);
    if (read === this.reading) return;
    this.reading = read;
    if (read) this.socket.resume();
    else this.socket.pause();
  }
}

export class KafkaListener {
  private readonly server: net.Server;
  private readonly connections = new Set<KafkaConnection>();
  private readonly frames: FramePool;
  /** This listener's part of the request memory. */
  private readonly memory: ListenerMemory;
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(
    private readonly broker: KafkaBroker,
    private readonly options: KafkaListenerOptions,
  ) {
    this.frames = new FramePool(idleShareOf(options.requestMemory.limitBytes));
    this.memory = options.requestMemory.listener();
    this.server = net.createServer({ noDelay: true }, (socket) => this.accept(socket));
    this.server.on('error', (err) => options.logger.error({ err }, 'kafka listener error'));
    this.sweepTimer = setInterval(() => this.sweep(), sweepIntervalMs(options)).unref();
  }

  listen(): Promise<{ host: string; port: number }> {
    return listenOn(this.server, this.options.host, this.options.port);
  }

  stats(): KafkaListenerStats {
    let unsentBytes = 0;
    for (const c of this.connections) unsentBytes += c.socket.writableLength;
    return { connections: this.connections.size, heldBytes: this.memory.heldBytes, runningBytes: this.memory.runningBytes, unsentBytes };
  }

  async close(): Promise<void> {
    clearInterval(this.sweepTimer);
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const c of this.connections) c.socket.destroy();
    await closed;
  }

  private accept(socket: net.Socket): void {
    const conn = new KafkaConnection(socket, new FrameDecoder(HEADER_START, this.options.maxFrameBytes, (length) => this.frames.take(length)), this.memory);
    this.connections.add(conn);
    socket.on('data', (chunk: Buffer) => {
      if (conn.closing) return; // discarded until the peer closes
      conn.deadlines.touch();
      conn.memory.hold(chunk.length);
      const error = conn.decoder.push(chunk, (frame) => {
        conn.framesRead++;
        conn.queue.push({ kind: 'frame', frame });
      });
      if (error) {
        const oversized = error.kind === 'oversized';
        conn.queue.push({ kind: 'frame-error', header: oversized ? error.header : undefined, code: oversized ? KafkaErrors.MESSAGE_TOO_LARGE : KafkaErrors.CORRUPT_MESSAGE });
        conn.closing = true;
      }
      void this.drain(conn);
      conn.memory.changed();
    });
    socket.on('error', (err) => this.options.logger.debug({ err }, 'kafka connection error'));
    socket.on('close', () => {
      this.connections.delete(conn);
      conn.closed();
    });
  }

  private async drain(conn: KafkaConnection): Promise<void> {
    if (conn.running) {
      conn.backlogged = true;
      return;
    }
    conn.running = true;
    try {
      while (conn.queue.length > 0 && !conn.socket.destroyed) {
        const item = conn.queue.shift()!;
        if (item.kind === 'frame-error') {
          await conn.written;
          // Every request before the broken frame is answered: what is held is the frame's bytes.
          conn.memory.releaseIdle();
          this.write(conn, this.frameErrorAnswer(item.header, item.code));
          conn.socket.end();
          return;
        }
        // A peer that does not read its answers gets no more until the socket has sent what it
        // holds: answers waiting in this process stay at about one (a Fetch answer may be 50 MiB).
        if (conn.socket.writableNeedDrain && !(await drained(conn.socket))) return;
        const prepared = this.prepare(item.frame);
        const produce = 'api' in prepared && prepared.api === Produce;
        // A request that cannot run beside the ones before it waits for their answers.
        if (!produce || conn.inFlight >= this.options.maxProducesInFlight) await conn.written;
        const bytes = item.frame.length + LENGTH_FIELD_SIZE;
        if (!(await conn.admit(bytes))) return;
        const answer = 'answer' in prepared ? Promise.resolve(prepared.answer) : this.run(prepared, conn.socket.remoteAddress ?? '');
        if (produce) {
          this.track(conn, answer);
          void answer.then(() => this.frames.give(item.frame));
        }
        conn.written = conn.written.then(() => answer).then((parts) => {
          if (parts) this.write(conn, parts);
          conn.memory.release(bytes);
        });
        // Only Produce requests run beside what comes after them.
        if (!produce) await conn.written;
      }
    } finally {
      conn.running = false;
      conn.backlogged = false;
      conn.memory.changed();
    }
  }

  /** Counts a running Produce until it is answered. */
  private track(conn: KafkaConnection, answer: Promise<unknown>): void {
    conn.inFlight++;
    void answer.finally(() => conn.inFlight--);
  }

  /** Closes the connections past a deadline; their held bytes are released as they close. */
  private sweep(): void {
    const now = Date.now();
    for (const conn of this.connections) {
      const past = conn.deadlines.check(now, { framesRead: conn.framesRead, partialBytes: conn.decoder.bufferedBytes, heldBytes: conn.memory.heldBytes }, this.options);
      if (!past || conn.closing) continue;
      this.options.logger.debug({ remote: `${conn.socket.remoteAddress}:${conn.socket.remotePort}`, ...past }, 'closing kafka connection');
      conn.socket.destroy();
      this.options.onDeadlineClosed?.(past.deadline);
    }
  }

  private write(conn: KafkaConnection, parts: Buffer[]): void {
    conn.deadlines.touch();
    if (conn.socket.destroyed || conn.socket.writableEnded) return;
    conn.socket.cork();
    for (const p of parts) conn.socket.write(p);
    conn.socket.uncork();
  }

  /** A request frame decoded, or the answer to one that does not decode or is not served. */
  private prepare(frame: Buffer): Prepared {
    const r = new Reader(frame);
    const { apiKey, apiVersion, correlationId } = readRequestHeaderStart(r);
    const api = servedApi(apiKey, apiVersion);
    if (!api) {
      if (apiKey === ApiVersions.key) return { answer: this.answer(ApiVersions, 0, correlationId, this.broker.unsupportedApiVersions()) };
      return { answer: bareErrorAnswer(correlationId, KafkaErrors.UNSUPPORTED_VERSION) };
    }
    try {
      const clientId = readRequestHeaderRest(r, api, apiVersion);
      return { api, version: apiVersion, correlationId, clientId, request: decodeMessage(api.request, apiVersion, r) };
    } catch (err) {
      if (!(err instanceof KafkaDecodeError)) throw err;
      this.options.logger.debug({ api: api.name, apiVersion, reason: err.message }, 'kafka request does not decode');
      return { answer: this.answer(api, apiVersion, correlationId, errorResponse(api, apiVersion, undefined, KafkaErrors.CORRUPT_MESSAGE)) };
    }
  }

  /** A decoded request to its answer (size included), or undefined for none. Never rejects. */
  private async run(p: Exclude<Prepared, { answer: Buffer[] }>, clientHost: string): Promise<Buffer[] | undefined> {
    const { api, version, correlationId, request, clientId } = p;
    const unanswered = api === Produce && (request as { acks: number }).acks === 0;
    try {
      const response = await (HANDLERS.get(api.key)! as (b: KafkaBroker, r: unknown, c: RequestContext) => unknown)(this.broker, request, { clientId, clientHost, version });
      return unanswered ? undefined : this.answer(api, version, correlationId, response as object);
    } catch (err) {
      const { errorCode, errorMessage } = kafkaFailure(err);
      if (errorCode === KafkaErrors.UNKNOWN_SERVER_ERROR) this.options.logger.error({ err, api: api.name }, 'kafka request failed');
      else this.options.logger.warn({ err, api: api.name, errorCode }, 'kafka request failed');
      return unanswered ? undefined : this.answer(api, version, correlationId, errorResponse(api, version, request, errorCode, errorMessage));
    }
  }

  /** The answer to an oversized or corrupt frame: in its API's shape when its header arrived and names one. */
  private frameErrorAnswer(header: Buffer | undefined, code: number): Buffer[] {
    if (!header) return bareErrorAnswer(0, code);
    const { apiKey, apiVersion, correlationId } = readRequestHeaderStart(new Reader(header));
    const api = servedApi(apiKey, apiVersion);
    return api ? this.answer(api, apiVersion, correlationId, errorResponse(api, apiVersion, undefined, code)) : bareErrorAnswer(correlationId, code);
  }

  private answer(api: KafkaApi, version: number, correlationId: number, response: object): Buffer[] {
    const w = new Writer(1024);
    w.int32(0);
    writeResponseHeader(w, responseHeaderVersion(api, version), correlationId);
    encodeMessage(api.response, version, response, w);
    const out = w.finish();
    out.writeInt32BE(out.length - 4, 0);
    return [out];
  }
}

/** Settles true once `socket` has sent what it held, false if it closes first. */
function drained(socket: net.Socket): Promise<boolean> {
  return new Promise((resolve) => {
    const settle = (sent: boolean) => () => {
      socket.off('drain', onDrain);
      socket.off('close', onClose);
      resolve(sent);
    };
    const onDrain = settle(true);
    const onClose = settle(false);
    socket.once('drain', onDrain);
    socket.once('close', onClose);
  });
}

function servedApi(apiKey: number, apiVersion: number): KafkaApi | undefined {
  const api = APIS.get(apiKey);
  return api && apiVersion >= api.minVersion && apiVersion <= api.maxVersion ? api : undefined;
}

/** Response header v0 and the int16 code: for requests whose response shape is not known. */
function bareErrorAnswer(correlationId: number, code: number): Buffer[] {
  const w = new Writer(16);
  w.int32(0);
  writeResponseHeader(w, 0, correlationId);
  w.int16(code);
  const out = w.finish();
  out.writeInt32BE(out.length - 4, 0);
  return [out];
}
