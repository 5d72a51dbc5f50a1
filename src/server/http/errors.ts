/**
 * Errors over HTTP, in the two shapes the HTTP server speaks:
 *
 *   REST API (/api/v1)          { "error": { "name": ErrorName, "code": int, "message": string } }
 *                               the TributaryError's name and code; the HTTP status says its kind
 *   Iceberg REST catalog        { "error": { "message": string, "type": string, "code": int } }
 *   (/iceberg/v1)               the spec's ErrorModel: `type` is the Iceberg exception name,
 *                               `code` repeats the HTTP status
 *
 * HTTP statuses of TributaryErrors:
 *
 *   404  something named does not exist (*_NOT_EXIST, PARTITION_NOT_EXISTS)
 *   409  it already exists, is in use, or a concurrent change won (*_ALREADY_EXIST(S),
 *        LAKE_TABLE_IN_USE, DATABASE_NOT_EMPTY, COMMIT_FAILED)
 *   413  a request or record too large (RECORD_TOO_LARGE_EXCEPTION)
 *   415  a body of a content type the endpoint does not take (UNSUPPORTED_MEDIA_TYPE)
 *   400  the request is wrong: validation (INVALID_*, DUPLICATE_COLUMN, SQL_PARSE_ERROR, …), or
 *        it asks for more than the server's limits grant (RESULT_TOO_LARGE, QUERY_MEMORY_EXCEEDED)
 *   504  a SQL statement ran past its timeout (QUERY_TIMEOUT)
 *   499  a SQL statement stopped as its client went away (QUERY_CANCELLED; nginx's number for
 *        it), which only the server's log sees
 *   503  retry later (SERVER_BUSY, BUFFER_EXHAUSTED, REQUEST_TIME_OUT, NETWORK_EXCEPTION, …)
 *   500  anything else
 *
 * Failures of fastify itself (malformed JSON, a body over the limit, an unknown content type) are
 * mapped to named errors too, so every error a client sees has one of these shapes.
 */
import { asTributaryError, type ErrorName, TributaryError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';

const BAD_REQUEST = new Set<ErrorName>([
  'CORRUPT_MESSAGE',
  'CORRUPT_RECORD_EXCEPTION',
  'INVALID_TABLE_EXCEPTION',
  'INVALID_DATABASE_EXCEPTION',
  'INVALID_REQUIRED_ACKS',
  'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION',
  'NON_PRIMARY_KEY_TABLE_EXCEPTION',
  'INVALID_COLUMN_PROJECTION',
  'INVALID_TARGET_COLUMN',
  'TABLE_NOT_PARTITIONED_EXCEPTION',
  'INVALID_TIMESTAMP_EXCEPTION',
  'INVALID_CONFIG_EXCEPTION',
  'LAKE_STORAGE_NOT_CONFIGURED_EXCEPTION',
  'PARTITION_SPEC_INVALID_EXCEPTION',
  'PARTITION_MAX_NUM_EXCEPTION',
  'BUCKET_MAX_NUM_EXCEPTION',
  'INVALID_ALTER_TABLE_EXCEPTION',
  'DELETION_DISABLED_EXCEPTION',
  'INVALID_TYPE',
  'DUPLICATE_COLUMN',
  'INVALID_PARTITION_KEY',
  'INVALID_BUCKET_KEY',
  'INVALID_ROW',
  'SQL_PARSE_ERROR',
  'SQL_UNSUPPORTED',
  'INVALID_ARGUMENT',
  'UNSUPPORTED_VERSION',
  'RESULT_TOO_LARGE',
  'QUERY_MEMORY_EXCEEDED',
]);

const CONFLICT = new Set<ErrorName>(['DATABASE_ALREADY_EXIST', 'TABLE_ALREADY_EXIST', 'PARTITION_ALREADY_EXISTS', 'LAKE_TABLE_ALREADY_EXIST', 'LAKE_TABLE_IN_USE', 'DATABASE_NOT_EMPTY', 'COMMIT_FAILED']);

const NOT_FOUND = new Set<ErrorName>(['DATABASE_NOT_EXIST', 'TABLE_NOT_EXIST', 'SCHEMA_NOT_EXIST', 'PARTITION_NOT_EXISTS', 'LAKE_SNAPSHOT_NOT_EXIST', 'LAKE_TABLE_NOT_EXIST']);

export function httpStatusOf(err: TributaryError): number {
  const name = err.errorName;
  if (NOT_FOUND.has(name)) return 404;
  if (CONFLICT.has(name)) return 409;
  if (name === 'RECORD_TOO_LARGE_EXCEPTION') return 413;
  if (name === 'UNSUPPORTED_MEDIA_TYPE') return 415;
  if (BAD_REQUEST.has(name)) return 400;
  if (name === 'QUERY_TIMEOUT') return 504;
  if (name === 'QUERY_CANCELLED') return 499;
  if (err.retriable || name === 'BUFFER_EXHAUSTED') return 503;
  return 500;
}

/** fastify's own failures (`FST_ERR_…` codes) as TributaryErrors; anything else as asTributaryError does. */
export function requestError(err: unknown): TributaryError {
  if (err instanceof TributaryError) return err;
  const e = err as { code?: unknown; message?: string; statusCode?: number };
  const message = e.message ?? String(err);
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new TributaryError('RECORD_TOO_LARGE_EXCEPTION', message);
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new TributaryError('CORRUPT_MESSAGE', message);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new TributaryError('UNSUPPORTED_MEDIA_TYPE', message);
  }
  // Other client errors fastify raises (a malformed URL, JSON with __proto__, …).
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) return new TributaryError('INVALID_ARGUMENT', message);
  return asTributaryError(err);
}

/** Status and body of an error answered by the REST API. */
export function restError(err: unknown): { status: number; body: { error: { name: ErrorName; code: number; message: string } } } {
  const e = requestError(err);
  return { status: httpStatusOf(e), body: { error: { name: e.errorName, code: e.code, message: e.message } } };
}

/** An error of the Iceberg REST catalog with the spec's exception type. */
export class IcebergCatalogError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
    this.name = 'IcebergCatalogError';
  }
}

/** Exception types as Iceberg's REST clients map them back (Java's ErrorHandlers, pyiceberg). */
const ICEBERG_TYPES: Partial<Record<ErrorName, string>> = {
  DATABASE_NOT_EXIST: 'NoSuchNamespaceException',
  TABLE_NOT_EXIST: 'NoSuchTableException',
  DATABASE_ALREADY_EXIST: 'AlreadyExistsException',
  TABLE_ALREADY_EXIST: 'AlreadyExistsException',
  COMMIT_FAILED: 'CommitFailedException',
};

const TYPE_BY_STATUS: Record<number, string> = {
  400: 'BadRequestException',
  404: 'NotFoundException',
  409: 'AlreadyExistsException',
  503: 'ServiceUnavailableException',
};

/** Status and body of an error answered by the Iceberg REST catalog. */
export function icebergError(err: unknown): { status: number; body: { error: { message: string; type: string; code: number } } } {
  if (err instanceof IcebergCatalogError) return { status: err.status, body: { error: { message: err.message, type: err.type, code: err.status } } };
  const e = requestError(err);
  const status = httpStatusOf(e);
  // 413 and 415 are not among the spec's statuses: a body over the limit or of another type is a bad request there.
  const code = status === 413 || status === 415 ? 400 : status;
  const type = ICEBERG_TYPES[e.errorName] ?? TYPE_BY_STATUS[code] ?? 'InternalServerError';
  return { status: code, body: { error: { message: e.message, type, code } } };
}

/**
 * Logs a failed request by its status: a failure of the server (500) as an error; a refusal that
 * asks the client to come back (503: busy, a full disk; 504: a statement's timeout) only at debug,
 * since under load it comes with every request and the client has its answer.
 */
export function logFailure(log: Logger, status: number, err: unknown, req: { method: string; url: string }, what: string): void {
  if (status === 500) log.error({ err, method: req.method, url: req.url }, what);
  else if (status > 500) log.debug({ err, method: req.method, url: req.url }, what);
}
