/**
 * The HTTP endpoint of a node (fastify, on `http.port`):
 *
 *   GET  /health      {"status":"ok"} while the process answers (liveness), for supervisors
 *   GET  /ready       {"status":"ready"} while the RPC listener serves requests, else 503
 *                     {"status":"not ready","reason":…} (readiness), for load balancers
 *   GET  /metrics     the node's metrics in the Prometheus text format (server/metrics.ts)
 *   …    /api/v1/…    the REST API for admin and rows (rest-api-routes.ts)
 *   …    /iceberg/v1/… the Iceberg REST catalog over the lake tables (iceberg-catalog-routes.ts)
 *
 * Anything else is 404 {"error":"not found"}. Request bodies are JSON, text/plain (SQL) or Arrow
 * IPC streams (application/vnd.apache.arrow.stream), at most MAX_BODY_BYTES: a bigger one is
 * refused with 413, from its Content-Length before it is read, or once a chunked body passes the
 * limit; a body of another content type with 415. Whatever a request holds, it gets an answer and the server stays up.
 */
import fs from 'node:fs';
import { fastify, type FastifyInstance, type FastifyReply } from 'fastify';
import { Connection } from '../../client/connection.js';
import { listenError } from '../../common/errors.js';
import type { FileSystemCatalog } from '../../lake/iceberg/catalog.js';
import type { RpcReadiness } from '../../rpc/server.js';
import type { SqlLimits } from '../../query/sql-limits.js';
import type { Logger } from '../../common/logger.js';
import { ARROW_STREAM } from './encoding.js';
import { icebergCatalogRoutes, type TributaryTables } from './iceberg-catalog-routes.js';
import { restApiRoutes } from './rest-api-routes.js';

/** How long the REST API retries a write the server refuses with a retriable error. */
export const REST_DELIVERY_TIMEOUT = '10s';

/** Largest request body: rows to insert are sent in requests of at most this size. */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** Answers as the endpoint always has: `content-type: application/json`, without the charset fastify adds. */
function plainJson(reply: FastifyReply, status: number, body: string): void {
  reply.hijack();
  reply.raw.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

export interface HttpServerOptions {
  host: string;
  port: number;
  /** This node's RPC address: the REST API connects to it as a client. */
  rpc: { host: string; port: number };
  tables: TributaryTables;
  catalog: FileSystemCatalog;
  /** The node's metrics (`NodeMetrics` in server/metrics.ts, which the wiring above this folder builds), served as they are. */
  metrics: { readonly contentType: string; text(): Promise<string> };
  /** Whether the node's RPC listener serves requests (RpcServer.readiness). */
  readiness: () => RpcReadiness;
  /** Limits of the REST API's SQL statements. */
  sql: SqlLimits;
  log: Logger;
}

export class HttpServer {
  private constructor(
    readonly address: { host: string; port: number },
    private readonly app: FastifyInstance,
    private readonly conn: Connection,
  ) {}

  static async start(options: HttpServerOptions): Promise<HttpServer> {
    const { rpc, log, sql } = options;
    // What DuckDB spilled before a crash is of no use now.
    if (sql.session.spillDirectory) fs.rmSync(sql.session.spillDirectory, { recursive: true, force: true });
    const conn = await Connection.create({
      'bootstrap.servers': `${rpc.host.includes(':') ? `[${rpc.host}]` : rpc.host}:${rpc.port}`,
      // A write the server keeps refusing (a full disk) is answered with its error while the HTTP client still waits.
      'client.writer.delivery-timeout': REST_DELIVERY_TIMEOUT,
    });
    const app = fastify({ bodyLimit: MAX_BODY_BYTES, routerOptions: { maxParamLength: 1000 } });
    try {
      app.addContentTypeParser(ARROW_STREAM, { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
      app.get('/health', (_req, reply) => plainJson(reply, 200, '{"status":"ok"}'));
      app.get('/ready', (_req, reply) => {
        const readiness = options.readiness();
        if (readiness.ready) plainJson(reply, 200, '{"status":"ready"}');
        else plainJson(reply, 503, JSON.stringify({ status: 'not ready', reason: readiness.reason }));
      });
      app.get('/metrics', async (_req, reply) => {
        const body = await options.metrics.text();
        reply.hijack();
        reply.raw.writeHead(200, { 'content-type': options.metrics.contentType, 'content-length': Buffer.byteLength(body) }).end(body);
      });
      app.setNotFoundHandler((_req, reply) => plainJson(reply, 404, '{"error":"not found"}'));
      await app.register(restApiRoutes(conn, options.catalog, sql, log), { prefix: '/api/v1' });
      await app.register(icebergCatalogRoutes(options.tables, options.catalog, log), { prefix: '/iceberg' });
      await app.listen({ host: options.host, port: options.port }).catch((err: unknown) => {
        throw listenError('http.port', options.host, options.port, err);
      });
    } catch (err) {
      await app.close().catch(() => undefined);
      await conn.close();
      throw err;
    }
    const address = app.server.address() as { address: string; port: number };
    return new HttpServer({ host: address.address, port: address.port }, app, conn);
  }

  /** Stops accepting requests, finishes in-flight ones, then closes the client connection. */
  async close(): Promise<void> {
    await this.app.close();
    await this.conn.close();
  }
}
