/**
 * The Iceberg REST catalog (the Iceberg repository's open-api/rest-catalog-open-api.yaml) over the
 * lake tables, read-only, so external engines (Spark, Trino, StarRocks, DuckDB, pyiceberg) find
 * Tributary's lake tables in one catalog. Mounted under /iceberg, so the catalog URI is
 * `http://<host>:<http.port>/iceberg`; no `prefix` is announced, so paths are /v1/…:
 *
 *   GET  /v1/config                               { defaults: {}, overrides: { warehouse }, endpoints }
 *   GET  /v1/namespaces[?parent=]                 { namespaces: [ [db] … ] }: every database
 *   GET  /v1/namespaces/{ns}                      { namespace: [db], properties: {} }
 *   HEAD /v1/namespaces/{ns}                      204, or 404
 *   GET  /v1/namespaces/{ns}/tables               { identifiers: [ { namespace: [db], name } … ] }:
 *                                                 the lake tables of the database's lake-enabled tables
 *   GET  /v1/namespaces/{ns}/tables/{table}       LoadTableResult { metadata-location, metadata, config }
 *                                                 with an ETag; If-None-Match of it gives 304
 *   HEAD /v1/namespaces/{ns}/tables/{table}       204, or 404
 *   POST /v1/namespaces/{ns}/tables/{table}/metrics  204: scan and commit reports are accepted and dropped
 *
 * The documents come from the lake format's REST catalog facet (LakeRestCatalog, lake-format.ts);
 * the routes are mounted only for a format that has one. Namespaces have one level (a database);
 * a multi-level one does not exist.
 *
 * Tributary owns the lake metadata: tiering commits snapshots, and table DDL goes through Tributary.
 * Every write of the API (create, commit, drop, rename, register, namespace changes, multi-table
 * transactions) answers 403 ForbiddenException, and none is listed in `endpoints`, so clients that
 * read the list refuse them before sending.
 */
import crypto from 'node:crypto';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { TributaryError } from '../../common/errors.js';
import type { TableInfo, TablePath } from '../../common/schema.js';
import type { LakeRestCatalog, LakeRestTable, LakeStorage } from '../../lake/lake-format.js';
import { isLakeEnabled } from '../coordinator/lake-tiering-manager.js';
import type { Logger } from '../../common/logger.js';
import { IcebergCatalogError, icebergError, logFailure } from './errors.js';

/** What the catalog reads of Tributary's metadata (the coordinator's read side). */
export interface TributaryTables {
  listDatabases(): string[];
  databaseExists(db: string): boolean;
  listTables(db: string): string[];
  getTableInfo(path: TablePath): TableInfo;
}

/** The endpoints served, as the spec spells them in CatalogConfig.endpoints. */
const ENDPOINTS = [
  'GET /v1/{prefix}/namespaces',
  'GET /v1/{prefix}/namespaces/{namespace}',
  'HEAD /v1/{prefix}/namespaces/{namespace}',
  'GET /v1/{prefix}/namespaces/{namespace}/tables',
  'GET /v1/{prefix}/namespaces/{namespace}/tables/{table}',
  'HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}',
  'POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics',
];

/** Writes of the spec, all refused. */
const WRITES: [method: 'POST' | 'DELETE', url: string][] = [
  ['POST', '/v1/namespaces'],
  ['DELETE', '/v1/namespaces/:namespace'],
  ['POST', '/v1/namespaces/:namespace/properties'],
  ['POST', '/v1/namespaces/:namespace/tables'],
  ['POST', '/v1/namespaces/:namespace/register'],
  ['POST', '/v1/namespaces/:namespace/tables/:table'],
  ['DELETE', '/v1/namespaces/:namespace/tables/:table'],
  ['POST', '/v1/tables/rename'],
  ['POST', '/v1/transactions/commit'],
];

/** The spec's default namespace separator (the unit separator, %1F in a URL). */
const NAMESPACE_SEPARATOR = '\x1f';

type NamespaceParams = { Params: { namespace: string } };
type TableParams = { Params: { namespace: string; table: string } };

export function icebergCatalogRoutes(tables: TributaryTables, lake: LakeStorage, rest: LakeRestCatalog, log: Logger): FastifyPluginAsync {
  /** The database a namespace names; NoSuchNamespaceException when there is none. */
  const database = (namespace: string): string => {
    const levels = namespace.split(NAMESPACE_SEPARATOR);
    if (levels.length !== 1 || !tables.databaseExists(levels[0])) {
      throw new IcebergCatalogError(404, 'NoSuchNamespaceException', `namespace ${levels.join('.')} does not exist`);
    }
    return levels[0];
  };

  /** The lake table of a lake-enabled table, if it exists and belongs to that table (not to a dropped namesake). */
  const ownedLakeTable = async (info: TableInfo): Promise<LakeRestTable | undefined> => {
    if (!isLakeEnabled(info)) return undefined;
    const loaded = await rest.loadTable(info.path);
    return loaded?.tableId === info.tableId ? loaded : undefined;
  };

  /** The lake table `{ns}.{table}`; NoSuchTableException (or NoSuchNamespaceException) otherwise. */
  const lakeTable = async (namespace: string, table: string): Promise<LakeRestTable> => {
    const db = database(namespace);
    const noSuchTable = (why: string) => new IcebergCatalogError(404, 'NoSuchTableException', `table ${db}.${table} ${why}`);
    let info: TableInfo;
    try {
      info = tables.getTableInfo({ database: db, table });
    } catch (err) {
      if ((err as TributaryError).errorName === 'TABLE_NOT_EXIST') throw noSuchTable('does not exist');
      throw err;
    }
    if (!isLakeEnabled(info)) throw noSuchTable("is not lake-enabled (set 'table.datalake.enabled' = 'true')");
    const loaded = await ownedLakeTable(info);
    if (!loaded) throw noSuchTable('has no lake table yet');
    return loaded;
  };

  const forbidden = async (): Promise<never> => {
    throw new IcebergCatalogError(403, 'ForbiddenException', 'tables are owned by Tributary: change them with Tributary SQL or its client; the lake metadata is written by tiering');
  };

  return async (app: FastifyInstance) => {
    app.setErrorHandler((err, req, reply) => {
      const { status, body } = icebergError(err);
      logFailure(log, status, err, req, 'Iceberg REST catalog request failed');
      return reply.code(status).type('application/json').send(body);
    });
    app.setNotFoundHandler((req, reply) => {
      reply.code(404).send({ error: { message: `no endpoint ${req.method} ${req.url} in this catalog`, type: 'NotFoundException', code: 404 } });
    });

    app.get('/v1/config', async () => ({ defaults: {}, overrides: { warehouse: lake.warehouse }, endpoints: ENDPOINTS }));

    app.get('/v1/namespaces', async (req: FastifyRequest<{ Querystring: { parent?: string } }>) => {
      const parent = req.query.parent;
      if (parent) {
        database(parent);
        return { namespaces: [] }; // one level: a database has no namespaces below it
      }
      return { namespaces: tables.listDatabases().map((db) => [db]) };
    });

    app.head('/v1/namespaces/:namespace', async (req: FastifyRequest<NamespaceParams>, reply: FastifyReply) => {
      database(req.params.namespace);
      return reply.code(204).send();
    });
    app.get('/v1/namespaces/:namespace', async (req: FastifyRequest<NamespaceParams>) => ({ namespace: [database(req.params.namespace)], properties: {} }));

    app.get('/v1/namespaces/:namespace/tables', async (req: FastifyRequest<NamespaceParams>) => {
      const db = database(req.params.namespace);
      const infos = tables.listTables(db).map((table) => tables.getTableInfo({ database: db, table }));
      const owned = await Promise.all(infos.map(ownedLakeTable));
      return { identifiers: infos.filter((_, i) => owned[i]).map((info) => ({ namespace: [db], name: info.path.table })) };
    });

    app.head('/v1/namespaces/:namespace/tables/:table', async (req: FastifyRequest<TableParams>, reply: FastifyReply) => {
      await lakeTable(req.params.namespace, req.params.table);
      return reply.code(204).send();
    });
    app.get('/v1/namespaces/:namespace/tables/:table', async (req: FastifyRequest<TableParams>, reply: FastifyReply) => {
      const loaded = await lakeTable(req.params.namespace, req.params.table);
      const etag = `"${crypto.createHash('sha256').update(loaded.version).digest('hex').slice(0, 32)}"`;
      reply.header('etag', etag);
      if (req.headers['if-none-match'] === etag) return reply.code(304).send();
      return reply.type('application/json').send(await loaded.document());
    });

    app.post('/v1/namespaces/:namespace/tables/:table/metrics', async (req: FastifyRequest<TableParams>, reply: FastifyReply) => {
      await lakeTable(req.params.namespace, req.params.table);
      return reply.code(204).send();
    });

    for (const [method, url] of WRITES) app.route({ method, url, handler: forbidden });
  };
}
