/**
 * The Kafka listener: a TCP server speaking the Kafka protocol (protocol/), answering each request
 * through the broker (broker.ts).
 *
 * Per connection, requests run one at a time in the order they arrived and are answered in that
 * order, as Kafka brokers do (producers rely on it for the order of their batches). While one runs,
 * a connection that sends more is no longer read: a connection holds at most the frame running and
 * what one socket read brought after it. Frames are split by the native listener's FrameDecoder
 * with its limit (`rpc.max-frame-size`); a connection idle for `netty.connection.max-idle-time`
 * is closed.
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
 * An error answer is the response header followed by the int16 error code: every Kafka response
 * body that has a top-level error code starts with it, and a client that cannot read it fails that
 * request, not the server or its other connections.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { listenError } from '../common/errors.js';
import { FrameDecoder } from '../rpc/frame.js';
import type { RpcLogger } from '../rpc/server.js';
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
import { readRequestHeaderRest, readRequestHeaderStart, responseHeaderVersion, writeResponseHeader } from './protocol/headers.js';
import { KafkaDecodeError, Reader, Writer } from './protocol/primitives.js';
import { decodeMessage, encodeMessage } from './protocol/schema.js';
import type { KafkaBroker } from './broker.js';
import { CompressionError } from './records/compression.js';

export interface KafkaListenerOptions {
  host: string;
  port: number;
  maxFrameBytes: number;
  idleTimeoutMs: number;
  logger: RpcLogger;
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
  [Metadata.key, (b, r) => b.metadata(r)],
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

class KafkaConnection {
  readonly queue: Buffer[] = [];
  running = false;
  closing = false;
  constructor(
    readonly socket: net.Socket,
    readonly decoder: FrameDecoder,
  ) {}
}

export class KafkaListener {
  private readonly server: net.Server;
  private readonly connections = new Set<KafkaConnection>();

  constructor(
    private readonly broker: KafkaBroker,
    private readonly options: KafkaListenerOptions,
  ) {
    this.server = net.createServer({ noDelay: true }, (socket) => this.accept(socket));
    this.server.on('error', (err) => options.logger.error({ err }, 'kafka listener error'));
  }

  listen(): Promise<{ host: string; port: number }> {
    const { host, port } = this.options;
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(listenError('bind.listeners', host, port, err));
      this.server.once('error', onError);
      this.server.listen(port, host, () => {
        this.server.off('error', onError);
        const a = this.server.address() as AddressInfo;
        resolve({ host: a.address, port: a.port });
      });
    });
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const c of this.connections) c.socket.destroy();
    await closed;
  }

  private accept(socket: net.Socket): void {
    const conn = new KafkaConnection(socket, new FrameDecoder(HEADER_START, this.options.maxFrameBytes));
    this.connections.add(conn);
    socket.setTimeout(this.options.idleTimeoutMs, () => {
      if (!conn.running) socket.destroy();
    });
    socket.on('data', (chunk: Buffer) => {
      if (conn.closing) return;
      const error = conn.decoder.push(chunk, (frame) => conn.queue.push(frame));
      if (error) {
        // Answered after the frames before it, then the connection ends.
        const id = error.kind === 'oversized' && error.header ? error.header.readInt32BE(4) : 0;
        const code = error.kind === 'oversized' ? KafkaErrors.MESSAGE_TOO_LARGE : KafkaErrors.CORRUPT_MESSAGE;
        conn.queue.push(errorFrameMarker(id, code));
        conn.closing = true;
      }
      void this.drain(conn);
    });
    socket.on('error', (err) => this.options.logger.debug({ err }, 'kafka connection error'));
    socket.on('close', () => this.connections.delete(conn));
  }

  private async drain(conn: KafkaConnection): Promise<void> {
    if (conn.running) {
      conn.socket.pause();
      return;
    }
    conn.running = true;
    try {
      while (conn.queue.length > 0 && !conn.socket.destroyed) {
        const frame = conn.queue.shift()!;
        const marker = ERROR_MARKERS.get(frame);
        if (marker) {
          this.write(conn, errorAnswer(marker.correlationId, 0, marker.code));
          conn.socket.end();
          return;
        }
        const answer = await this.handle(frame, conn.socket.remoteAddress ?? '');
        if (answer) this.write(conn, answer);
      }
    } finally {
      conn.running = false;
      if (!conn.closing) conn.socket.resume();
    }
  }

  private write(conn: KafkaConnection, parts: Buffer[]): void {
    if (conn.socket.destroyed || conn.socket.writableEnded) return;
    conn.socket.cork();
    for (const p of parts) conn.socket.write(p);
    conn.socket.uncork();
  }

  /** One request frame to its answer (size included), or undefined for none. Never throws. */
  private async handle(frame: Buffer, clientHost: string): Promise<Buffer[] | undefined> {
    const r = new Reader(frame);
    const { apiKey, apiVersion, correlationId } = readRequestHeaderStart(r);
    const api = APIS.get(apiKey);
    if (!api) return errorAnswer(correlationId, 0, KafkaErrors.UNSUPPORTED_VERSION);
    if (apiVersion < api.minVersion || apiVersion > api.maxVersion) {
      if (api === ApiVersions) return this.answer(api, 0, correlationId, this.broker.unsupportedApiVersions());
      return errorAnswer(correlationId, 0, KafkaErrors.UNSUPPORTED_VERSION);
    }
    const headerVersion = responseHeaderVersion(api, apiVersion);
    let request: unknown;
    let clientId: string | null;
    try {
      clientId = readRequestHeaderRest(r, api, apiVersion);
      request = decodeMessage(api.request, apiVersion, r);
    } catch (err) {
      if (!(err instanceof KafkaDecodeError)) throw err;
      this.options.logger.debug({ api: api.name, apiVersion, reason: err.message }, 'kafka request does not decode');
      return errorAnswer(correlationId, headerVersion, KafkaErrors.CORRUPT_MESSAGE);
    }
    try {
      const response = await (HANDLERS.get(apiKey)! as (b: KafkaBroker, r: unknown, c: RequestContext) => unknown)(this.broker, request, { clientId, clientHost, version: apiVersion });
      if (api === Produce && (request as { acks: number }).acks === 0) return undefined;
      return this.answer(api, apiVersion, correlationId, response as object);
    } catch (err) {
      const code = err instanceof KafkaDecodeError || err instanceof CompressionError ? KafkaErrors.CORRUPT_MESSAGE : KafkaErrors.UNKNOWN_SERVER_ERROR;
      if (code === KafkaErrors.UNKNOWN_SERVER_ERROR) this.options.logger.error({ err, api: api.name }, 'kafka request failed');
      return errorAnswer(correlationId, headerVersion, code);
    }
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

/** A frame error stands in the queue as a marker, so it is answered after the frames before it. */
const ERROR_MARKERS = new WeakMap<Buffer, { correlationId: number; code: number }>();
function errorFrameMarker(correlationId: number, code: number): Buffer {
  const marker = Buffer.alloc(0);
  ERROR_MARKERS.set(marker, { correlationId, code });
  return marker;
}

function errorAnswer(correlationId: number, headerVersion: 0 | 1, code: number): Buffer[] {
  const w = new Writer(16);
  w.int32(0);
  writeResponseHeader(w, headerVersion, correlationId);
  w.int16(code);
  const out = w.finish();
  out.writeInt32BE(out.length - 4, 0);
  return [out];
}
