/**
 * The HTTP listener every server process has (on `http.port`) and the routes each of them serves:
 *
 *   GET  /health      {"status":"ok"} while the process answers (liveness), for supervisors
 *   GET  /ready       {"status":"ready"} while the server serves requests, else 503
 *                     {"status":"not ready","reason":…} (readiness), for load balancers
 *   GET  /metrics     the server's metrics in the Prometheus text format (server/metrics.ts)
 *
 * Anything else is 404 {"error":"not found"}, unless the app adds routes (http-server.ts adds the
 * REST API and the Iceberg REST catalog). A listener serves one fastify app at a time and can
 * swap it for another on the same address: a coordinator serves these routes alone while it stands
 * by, and the full endpoint once it leads.
 */
import http from 'node:http';
import { fastify, type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify';
import { listenError } from '../../common/errors.js';
import type { RpcReadiness } from '../../rpc/server.js';

/** What the status routes read of the server. */
export interface NodeStatus {
  /** The server's metrics (`NodeMetrics` in server/metrics.ts, built by the wiring above this folder), served as they are. */
  metrics: { readonly contentType: string; exposition(): Promise<Buffer> };
  /** Whether the server serves requests (RpcServer.readiness, or why a standby does not). */
  readiness: () => RpcReadiness;
}

/** fastify's keep-alive timeout, which its own listener would have. */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/** Answers as the endpoint always has: `content-type: application/json`, without the charset fastify adds. */
export function plainJson(reply: FastifyReply, status: number, body: string): void {
  reply.hijack();
  reply.raw.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

/** A fastify app with the status routes and the 404 answer, for a NodeEndpoint to serve; `options` are fastify's. */
export function statusApp(status: NodeStatus, options: FastifyServerOptions = {}): FastifyInstance {
  const app = fastify(options);
  app.get('/health', (_req, reply) => plainJson(reply, 200, '{"status":"ok"}'));
  app.get('/ready', (_req, reply) => {
    const readiness = status.readiness();
    if (readiness.ready) plainJson(reply, 200, '{"status":"ready"}');
    else plainJson(reply, 503, JSON.stringify({ status: 'not ready', reason: readiness.reason }));
  });
  app.get('/metrics', async (_req, reply) => {
    const body = await status.metrics.exposition();
    reply.hijack();
    reply.raw.writeHead(200, { 'content-type': status.metrics.contentType, 'content-length': body.length }).end(body);
  });
  app.setNotFoundHandler((_req, reply) => plainJson(reply, 404, '{"error":"not found"}'));
  return app;
}

export class NodeEndpoint {
  private constructor(
    readonly address: { host: string; port: number },
    private readonly server: http.Server,
    private app: FastifyInstance,
  ) {}

  /** Listens on `host:port` (0 picks a free port) and serves `app`; ADDRESS_IN_USE or INVALID_CONFIG_EXCEPTION when it cannot. */
  static async start(host: string, port: number, app: FastifyInstance): Promise<NodeEndpoint> {
    await app.ready();
    let endpoint: NodeEndpoint | undefined;
    const server = http.createServer((req, res) => (endpoint?.app ?? app).routing(req, res));
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    // Like fastify's own listener: a request body may take as long as it takes (its size is bounded).
    server.requestTimeout = 0;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port }, () => {
        server.off('error', reject);
        resolve();
      });
    }).catch(async (err: unknown) => {
      await app.close().catch(() => undefined);
      throw listenError('http.port', host, port, err);
    });
    const address = server.address() as { address: string; port: number };
    endpoint = new NodeEndpoint({ host: address.address, port: address.port }, server, app);
    return endpoint;
  }

  /** Serves `app` from now on, on the same address, and closes the app served before. */
  async serve(app: FastifyInstance): Promise<void> {
    await app.ready();
    const before = this.app;
    this.app = app;
    await before.close();
  }

  /** Stops accepting connections, finishes the requests under way, then closes the app. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    await closed;
    await this.app.close();
  }
}
