/**
 * The HTTP endpoint of a node and of the active coordinator of a cluster (fastify, on `http.port`):
 *
 *   GET  /health, /ready, /metrics   liveness, readiness and metrics, as every server serves them (node-endpoint.ts)
 *   …    /api/v1/…    the REST API for admin and rows (rest-api-routes.ts)
 *   …    /iceberg/v1/… the Iceberg REST catalog over the lake tables (iceberg-catalog-routes.ts)
 *
 * Anything else is 404 {"error":"not found"}. Request bodies are JSON, text/plain (SQL) or Arrow
 * IPC streams (application/vnd.apache.arrow.stream), at most MAX_BODY_BYTES: a bigger one is
 * refused with 413, from its Content-Length before it is read, or once a chunked body passes the
 * limit; a body of another content type with 415. Whatever a request holds, it gets an answer and the server stays up.
 */
import fs from 'node:fs';
import { Connection } from '../../client/connection.js';
import type { LakeStorage } from '../../lake/lake-format.js';
import type { SqlLimits } from '../../query/sql-limits.js';
import type { Logger } from '../../common/logger.js';
import { ARROW_STREAM } from './encoding.js';
import { icebergCatalogRoutes, type TributaryTables } from './iceberg-catalog-routes.js';
import { NodeEndpoint, type NodeStatus, statusApp } from './node-endpoint.js';
import { restApiRoutes } from './rest-api-routes.js';

/** How long the REST API retries a write the server refuses with a retriable error. */
export const REST_DELIVERY_TIMEOUT = '10s';

/** Largest request body: rows to insert are sent in requests of at most this size. */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

export interface HttpServerOptions extends NodeStatus {
  /** Where to serve: a new listener on host and port, or the listener a standby coordinator has served its status on. */
  listen: { host: string; port: number } | NodeEndpoint;
  /** This node's RPC address: the REST API connects to it as a client. */
  rpc: { host: string; port: number };
  tables: TributaryTables;
  lake: LakeStorage;
  /** Limits of the REST API's SQL statements. */
  sql: SqlLimits;
  log: Logger;
}

export class HttpServer {
  private constructor(
    private readonly endpoint: NodeEndpoint,
    private readonly conn: Connection,
  ) {}

  get address(): { host: string; port: number } {
    return this.endpoint.address;
  }

  static async start(options: HttpServerOptions): Promise<HttpServer> {
    const { rpc, log, sql } = options;
    // What DuckDB spilled before a crash is of no use now.
    if (sql.session.spillDirectory) fs.rmSync(sql.session.spillDirectory, { recursive: true, force: true });
    const conn = await Connection.create({
      'bootstrap.servers': `${rpc.host.includes(':') ? `[${rpc.host}]` : rpc.host}:${rpc.port}`,
      // A write the server keeps refusing (a full disk) is answered with its error while the HTTP client still waits.
      'client.writer.delivery-timeout': REST_DELIVERY_TIMEOUT,
    });
    const app = statusApp(options, { bodyLimit: MAX_BODY_BYTES, routerOptions: { maxParamLength: 1000 } });
    try {
      app.addContentTypeParser(ARROW_STREAM, { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
      await app.register(restApiRoutes(conn, options.lake, sql, log), { prefix: '/api/v1' });
      const { restCatalog } = options.lake;
      if (restCatalog) await app.register(icebergCatalogRoutes(options.tables, options.lake, restCatalog, log), { prefix: '/iceberg' });
      const { listen } = options;
      let endpoint: NodeEndpoint;
      if (listen instanceof NodeEndpoint) {
        await listen.serve(app);
        endpoint = listen;
      } else {
        endpoint = await NodeEndpoint.start(listen.host, listen.port, app);
      }
      return new HttpServer(endpoint, conn);
    } catch (err) {
      await app.close().catch(() => undefined);
      await conn.close();
      throw err;
    }
  }

  /** Stops accepting requests, finishes in-flight ones, then closes the client connection. */
  async close(): Promise<void> {
    await this.endpoint.close();
    await this.conn.close();
  }
}
