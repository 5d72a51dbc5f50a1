/**
 * RpcConnection: the client side of one TCP connection to one server (frame grammar in frame.ts).
 *
 * `connect` opens the socket and exchanges ApiVersions first; each later request uses the highest
 * version both sides speak. Requests are pipelined under increasing request ids (1..2^31-1, then
 * wrapping; 0 is never used, so a server's answer to a frame it could not read the id of matches
 * nothing). Error responses reject with the TributaryError the server named; a request without an
 * answer within its timeout rejects with REQUEST_TIME_OUT and its late answer is dropped; when the
 * socket closes or breaks, every pending request rejects with CONNECTION_CLOSED (retriable) and the
 * connection stays closed.
 */
import net from 'node:net';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import type { Message } from '@bufbuild/protobuf';
import { TributaryError, errorFromCode } from '../common/errors.js';
import { ApiKeys, describeApi, versionRange } from './api-keys.js';
import type { Api, RequestInit, ResponseMessage } from './api-keys.js';
import { FrameDecoder, MAX_INT32, RESPONSE_HEADER_SIZE, ResponseType, parseResponseFrame, requestHeader, writeFrame } from './frame.js';
import { ErrorResponseSchema } from './gen/tributary_pb.js';
import type { PbApiVersion } from './gen/tributary_pb.js';
import { SOFTWARE_VERSION } from './version.js';

export interface ConnectOptions {
  /** `client.connect-timeout`. */
  connectTimeoutMs?: number;
  /** Default timeout of each request, `client.request-timeout`. */
  requestTimeoutMs?: number;
  /** Sent to the server in ApiVersions, for its logs. */
  clientName?: string;
}

export interface RequestOptions {
  timeoutMs?: number;
}

interface Pending {
  api: Api;
  /** Resolve with the body bytes of an OK response instead of its decoded message. */
  raw: boolean;
  resolve(response: Message | Buffer): void;
  reject(error: TributaryError): void;
  timer: NodeJS.Timeout;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

export class RpcConnection {
  private readonly decoder = new FrameDecoder(RESPONSE_HEADER_SIZE, MAX_INT32);
  private readonly pending = new Map<number, Pending>();
  /** api key → version used; before the handshake only ApiVersions 0 is known. */
  private readonly versions = new Map<number, number>([[ApiKeys.ApiVersions.key, 0]]);
  private serverApis = new Map<number, PbApiVersion>();
  private lastRequestId = 0;
  private closedBy: TributaryError | undefined;
  private readonly socketClosed: Promise<void>;
  /** The server's software version, from ApiVersions. */
  serverVersion = '';

  private constructor(
    private readonly socket: net.Socket,
    /** host:port of the server. */
    readonly address: string,
    private readonly requestTimeoutMs: number,
  ) {
    socket.on('data', (chunk: Buffer) => {
      const error = this.decoder.push(chunk, (frame) => this.onFrame(frame));
      if (error) this.fail(`corrupt response frame (length ${error.length})`);
    });
    socket.on('error', (err) => this.fail(err.message, err));
    this.socketClosed = new Promise((resolve) => socket.once('close', () => resolve()));
    void this.socketClosed.then(() => this.fail('was closed'));
  }

  static async connect(host: string, port: number, options: ConnectOptions = {}): Promise<RpcConnection> {
    const address = `${host}:${port}`;
    const socket = await openSocket(host, port, options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
    const conn = new RpcConnection(socket, address, options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS);
    try {
      const response = await conn.request(ApiKeys.ApiVersions, {
        clientSoftwareName: options.clientName ?? 'tributary-ts',
        clientSoftwareVersion: SOFTWARE_VERSION,
      });
      conn.serverVersion = response.serverVersion;
      conn.serverApis = new Map(response.apiVersions.map((v) => [v.apiKey, v]));
      conn.versions.clear();
      for (const api of Object.values(ApiKeys) as Api[]) {
        const offered = conn.serverApis.get(api.key);
        if (!offered) continue;
        const version = Math.min(api.maxVersion, offered.maxVersion);
        if (version >= Math.max(api.minVersion, offered.minVersion)) conn.versions.set(api.key, version);
      }
    } catch (err) {
      await conn.close();
      throw err;
    }
    return conn;
  }

  get isClosed(): boolean {
    return this.closedBy !== undefined;
  }

  request<A extends Api>(api: A, init: RequestInit<A>, options: RequestOptions = {}): Promise<ResponseMessage<A>> {
    return this.requestEncoded(api, () => toBinary(api.request, create(api.request, init as Record<string, unknown>)), options);
  }

  /**
   * Sends a request whose body is already encoded, as parts written one after the other: the hot
   * write paths pass record bytes through without copying them into one protobuf buffer.
   */
  requestEncoded<A extends Api>(api: A, encode: () => Uint8Array | readonly Uint8Array[], options: RequestOptions = {}): Promise<ResponseMessage<A>> {
    return this.send(api, encode, false, options) as Promise<ResponseMessage<A>>;
  }

  /**
   * Like `requestEncoded`, but resolves with the body bytes of the OK response (a view of the
   * received frame), for callers that decode it themselves. Error responses reject as usual.
   */
  requestRaw(api: Api, encode: () => Uint8Array | readonly Uint8Array[], options: RequestOptions = {}): Promise<Buffer> {
    return this.send(api, encode, true, options) as Promise<Buffer>;
  }

  private send(api: Api, encode: () => Uint8Array | readonly Uint8Array[], raw: boolean, options: RequestOptions): Promise<Message | Buffer> {
    return new Promise((resolve, reject) => {
      if (this.closedBy) throw this.closedBy;
      const version = this.versions.get(api.key);
      if (version === undefined) throw this.unsupported(api);
      const body = encode();
      const bodyLength = body instanceof Uint8Array ? body.length : body.reduce((n, p) => n + p.length, 0);
      const requestId = this.nextRequestId();
      const timeoutMs = options.timeoutMs ?? this.requestTimeoutMs;
      const timer = setTimeout(() => {
        this.pending.delete(requestId);
        reject(new TributaryError('REQUEST_TIME_OUT', `${describeApi(api)} request ${requestId} to ${this.address} got no response within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(requestId, { api, raw, resolve, reject, timer });
      writeFrame(this.socket, requestHeader(api.key, version, requestId, bodyLength), body);
    });
  }

  /** Closes the socket; pending requests reject with CONNECTION_CLOSED. */
  close(): Promise<void> {
    this.fail('was closed by the client');
    return this.socketClosed;
  }

  private nextRequestId(): number {
    this.lastRequestId = this.lastRequestId === MAX_INT32 ? 1 : this.lastRequestId + 1;
    return this.lastRequestId;
  }

  private onFrame(frame: Buffer): void {
    const { type, requestId, body } = parseResponseFrame(frame);
    const pending = this.pending.get(requestId);
    if (!pending) return; // timed out; the late answer has no one waiting
    this.pending.delete(requestId);
    clearTimeout(pending.timer);
    try {
      if (type === ResponseType.OK) {
        pending.resolve(pending.raw ? body : fromBinary(pending.api.response, body, { readUnknownFields: false }));
      } else if (type === ResponseType.ERROR || type === ResponseType.SERVER_FAILURE) {
        const error = fromBinary(ErrorResponseSchema, body);
        pending.reject(errorFromCode(error.errorCode, error.errorMessage));
      } else {
        pending.reject(new TributaryError('CORRUPT_MESSAGE', `${describeApi(pending.api)} response ${requestId} has unknown type ${type}`));
      }
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      pending.reject(new TributaryError('CORRUPT_MESSAGE', `cannot decode ${describeApi(pending.api)} response ${requestId}: ${reason}`, { cause: err }));
    }
  }

  private fail(reason: string, cause?: unknown): void {
    if (this.closedBy) return;
    this.closedBy = new TributaryError('CONNECTION_CLOSED', `connection to ${this.address} ${cause ? 'failed: ' : ''}${reason}`, { cause });
    for (const pending of this.pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(this.closedBy);
    }
    this.pending.clear();
    this.socket.destroy();
  }

  private unsupported(api: Api): TributaryError {
    const offered = this.serverApis.get(api.key);
    const server = offered ? `the server speaks ${versionRange(offered.minVersion, offered.maxVersion)}` : 'the server does not serve it';
    return new TributaryError(
      'UNSUPPORTED_VERSION',
      `${describeApi(api)} at ${this.address}: this client speaks ${versionRange(api.minVersion, api.maxVersion)}, ${server}`,
    );
  }
}

function openSocket(host: string, port: number, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port, noDelay: true });
    const fail = (message: string, cause?: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(new TributaryError('NETWORK_EXCEPTION', `cannot connect to ${host}:${port}: ${message}`, { cause }));
    };
    const timer = setTimeout(() => fail(`no connection within ${timeoutMs} ms`), timeoutMs);
    const onError = (err: Error): void => fail(err.message, err);
    socket.once('error', onError);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.off('error', onError);
      resolve(socket);
    });
  });
}
