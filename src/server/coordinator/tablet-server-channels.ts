/**
 * The active coordinator's requests to tablet servers: one RpcConnection per live server, every
 * request stamped with the coordinator epoch, and the requests to one server delivered one after
 * another in the order they were sent (a later leader epoch never overtakes an earlier one).
 *
 * A request that fails on the way (no connection, connection lost, no answer in time) is sent again
 * with a growing pause for as long as the server stays registered under the same session; once it
 * has left, or restarted with a new session, or the channels are closed, the request is dropped: the
 * coordinator tells a server that joins everything it needs then. A server's answer, error or not,
 * ends the request.
 */
import { TributaryError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { Api, RequestInit, ResponseMessage } from '../../rpc/api-keys.js';
import { RpcConnection } from '../../rpc/connection.js';
import type { TabletServerNode } from '../metadata/tablet-server-registry.js';

const FIRST_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5_000;
const CONNECT_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 30_000;
/** Failures of the way there, after which the request is sent again. */
const TRANSPORT_ERRORS = new Set(['NETWORK_EXCEPTION', 'CONNECTION_CLOSED', 'REQUEST_TIME_OUT']);

/** Requests that take the coordinator's epoch. */
type EpochRequest<A extends Api> = Omit<RequestInit<A>, 'coordinatorEpoch'>;

interface Channel {
  /** The registration the connection was made for: a restarted server gets a new channel. */
  session: string;
  connection?: RpcConnection;
  /** The last request queued: the next one starts after it. */
  tail: Promise<unknown>;
}

export class TabletServerChannels {
  private readonly channels = new Map<number, Channel>();
  private closed = false;

  constructor(
    private readonly coordinatorEpoch: number,
    /** The server as registered now, undefined once it has left. */
    private readonly registered: (id: number) => TabletServerNode | undefined,
    private readonly log: Logger,
  ) {}

  /**
   * Sends `request` to server `id` after the requests sent to it before; resolves with the answer, or
   * undefined when the server left (or restarted) first or answered with an error (logged).
   */
  send<A extends Api>(id: number, api: A, request: EpochRequest<A>): Promise<ResponseMessage<A> | undefined> {
    const server = this.registered(id);
    if (!server || this.closed) return Promise.resolve(undefined);
    let channel = this.channels.get(id);
    if (!channel || channel.session !== server.session) {
      void channel?.connection?.close();
      channel = { session: server.session, tail: Promise.resolve() };
      this.channels.set(id, channel);
    }
    const current = channel;
    const run = current.tail.then(() => this.deliver(id, current, api, { ...request, coordinatorEpoch: this.coordinatorEpoch } as unknown as RequestInit<A>));
    current.tail = run;
    return run;
  }

  /** Drops every connection; requests still queued are dropped. */
  async close(): Promise<void> {
    this.closed = true;
    const channels = [...this.channels.values()];
    this.channels.clear();
    await Promise.all(channels.map((c) => c.connection?.close()));
  }

  private async deliver<A extends Api>(id: number, channel: Channel, api: A, request: RequestInit<A>): Promise<ResponseMessage<A> | undefined> {
    for (let backoff = FIRST_BACKOFF_MS; ; backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)) {
      const server = this.registered(id);
      if (this.closed || !server || server.session !== channel.session) return undefined;
      try {
        if (!channel.connection || channel.connection.isClosed) {
          channel.connection = await RpcConnection.connect(server.host, server.port, {
            connectTimeoutMs: CONNECT_TIMEOUT_MS,
            requestTimeoutMs: REQUEST_TIMEOUT_MS,
            clientName: 'coordinator',
          });
        }
        return await channel.connection.request(api, request);
      } catch (err) {
        if (!(err instanceof TributaryError) || !TRANSPORT_ERRORS.has(err.errorName)) {
          this.log.warn({ err, server: id, api: api.name }, 'tablet server refused a request of the coordinator');
          return undefined;
        }
        void channel.connection?.close();
        channel.connection = undefined;
        this.log.debug({ err, server: id, api: api.name, backoffMs: backoff }, 'request to a tablet server failed on the way; sending it again');
        await new Promise((resolve) => setTimeout(resolve, backoff));
      }
    }
  }
}
