/**
 * Errors are values with stable names and codes, shared by server, client and CLI.
 *
 * Codes below 100 keep Apache Fluss's numbering so that Fluss users recognise them;
 * codes from 100 up are Tributary's own, for validation failures Fluss folds into
 * broader codes.
 */
export const ErrorCodes = {
  UNKNOWN_SERVER_ERROR: -1,
  NONE: 0,
  NETWORK_EXCEPTION: 1,
  UNSUPPORTED_VERSION: 2,
  CORRUPT_MESSAGE: 3,
  DATABASE_NOT_EXIST: 4,
  DATABASE_NOT_EMPTY: 5,
  DATABASE_ALREADY_EXIST: 6,
  TABLE_NOT_EXIST: 7,
  TABLE_ALREADY_EXIST: 8,
  SCHEMA_NOT_EXIST: 9,
  LOG_STORAGE_EXCEPTION: 10,
  KV_STORAGE_EXCEPTION: 11,
  NOT_LEADER_OR_FOLLOWER: 12,
  RECORD_TOO_LARGE_EXCEPTION: 13,
  CORRUPT_RECORD_EXCEPTION: 14,
  INVALID_TABLE_EXCEPTION: 15,
  INVALID_DATABASE_EXCEPTION: 16,
  INVALID_REPLICATION_FACTOR: 17,
  INVALID_REQUIRED_ACKS: 18,
  LOG_OFFSET_OUT_OF_RANGE_EXCEPTION: 19,
  NON_PRIMARY_KEY_TABLE_EXCEPTION: 20,
  UNKNOWN_TABLE_OR_BUCKET_EXCEPTION: 21,
  /** acks=all with fewer replicas in the ISR than log.replica.min-in-sync-replicas-number. */
  NOT_ENOUGH_REPLICAS_EXCEPTION: 23,
  FENCED_LEADER_EPOCH_EXCEPTION: 24,
  REQUEST_TIME_OUT: 25,
  STORAGE_EXCEPTION: 26,
  /** A request from a coordinator whose epoch is older than the newest the server has seen: a deposed coordinator. */
  INVALID_COORDINATOR_EXCEPTION: 27,
  /** An ISR change based on a leader_isr version that has moved on. */
  INVALID_UPDATE_VERSION_EXCEPTION: 28,
  OUT_OF_ORDER_SEQUENCE_EXCEPTION: 31,
  DUPLICATE_SEQUENCE_EXCEPTION: 32,
  UNKNOWN_WRITER_ID_EXCEPTION: 33,
  INVALID_COLUMN_PROJECTION: 34,
  INVALID_TARGET_COLUMN: 35,
  PARTITION_NOT_EXISTS: 36,
  TABLE_NOT_PARTITIONED_EXCEPTION: 37,
  INVALID_TIMESTAMP_EXCEPTION: 38,
  INVALID_CONFIG_EXCEPTION: 39,
  LAKE_STORAGE_NOT_CONFIGURED_EXCEPTION: 40,
  PARTITION_ALREADY_EXISTS: 42,
  PARTITION_SPEC_INVALID_EXCEPTION: 43,
  PARTITION_MAX_NUM_EXCEPTION: 45,
  BUCKET_MAX_NUM_EXCEPTION: 49,
  FENCED_TIERING_EPOCH_EXCEPTION: 50,
  LAKE_SNAPSHOT_NOT_EXIST: 53,
  LAKE_TABLE_ALREADY_EXIST: 54,
  INVALID_ALTER_TABLE_EXCEPTION: 56,
  DELETION_DISABLED_EXCEPTION: 57,
  /** A server tag names a tablet server that is neither registered nor holds any replica. */
  SERVER_NOT_EXIST_EXCEPTION: 58,
  /** A tablet server already carries another tag (Fluss's spelling). */
  SEVER_TAG_ALREADY_EXIST_EXCEPTION: 59,
  /** RemoveServerTag of a tag the server does not carry (Fluss's spelling). */
  SEVER_TAG_NOT_EXIST_EXCEPTION: 60,
  /** A rebalance that cannot start (another one runs, no server to move to) or whose goals are unknown. */
  REBALANCE_FAILURE_EXCEPTION: 61,
  /** ListRebalanceProgress or CancelRebalance with no (such) rebalance task. */
  NO_REBALANCE_IN_PROGRESS_EXCEPTION: 62,
  /** The data disk is fuller than `server.data-disk.write-limit-ratio`; reads go on, writes resume below the recover ratio. */
  DISK_WRITE_LOCKED: 70,
  // Tributary's own.
  INVALID_TYPE: 100,
  DUPLICATE_COLUMN: 101,
  INVALID_PARTITION_KEY: 102,
  INVALID_BUCKET_KEY: 103,
  INVALID_ROW: 104,
  SQL_PARSE_ERROR: 105,
  SQL_UNSUPPORTED: 106,
  CONNECTION_CLOSED: 107,
  BUFFER_EXHAUSTED: 108,
  SERVER_BUSY: 109,
  INVALID_ARGUMENT: 110,
  /** An optimistic commit lost to a concurrent writer; reload the table and re-apply. */
  COMMIT_FAILED: 111,
  /** A SQL query ran past `sql.query.timeout`. */
  QUERY_TIMEOUT: 112,
  /** A result passed the row or byte limit of its request. */
  RESULT_TOO_LARGE: 113,
  /** A query stopped because its client went away or asked it to stop. */
  QUERY_CANCELLED: 114,
  /** A query needed more memory than `sql.memory-limit`. */
  QUERY_MEMORY_EXCEEDED: 115,
  /** Another live process holds the data directory. */
  DATA_DIR_LOCKED: 117,
  /** The data directory cannot be used (not a directory, not writable, not creatable). */
  INVALID_DATA_DIR: 118,
  /** A listener's address is taken by another process. */
  ADDRESS_IN_USE: 119,
  /** No lake table of that name in the warehouse. */
  LAKE_TABLE_NOT_EXIST: 145,
  /** A lake table a live table owns: drop the table (with PURGE) instead. */
  LAKE_TABLE_IN_USE: 146,
  /** An HTTP request body of a content type the endpoint does not take. */
  UNSUPPORTED_MEDIA_TYPE: 150,
  /** A Kafka consumer group beyond `kafka.group.max-groups` on one server. */
  GROUP_MAX_NUM_EXCEPTION: 160,
  /** A member joining a Kafka consumer group that has `kafka.group.max-members` members. */
  GROUP_MAX_SIZE_REACHED: 161,
  /** A consumer group member's protocol metadata, or an assignment, above `kafka.group.max-metadata-size`. */
  GROUP_METADATA_TOO_LARGE: 162,
} as const;

export type ErrorName = keyof typeof ErrorCodes;

const namesByCode = new Map<number, ErrorName>(
  Object.entries(ErrorCodes).map(([name, code]) => [code, name as ErrorName]),
);

/** Errors a client may retry after a short back-off (and, where relevant, a metadata refresh). */
const RETRIABLE = new Set<ErrorName>([
  'NETWORK_EXCEPTION',
  'NOT_LEADER_OR_FOLLOWER',
  'NOT_ENOUGH_REPLICAS_EXCEPTION',
  'REQUEST_TIME_OUT',
  'CONNECTION_CLOSED',
  'SERVER_BUSY',
  'COMMIT_FAILED',
  'DISK_WRITE_LOCKED',
]);

export class TributaryError extends Error {
  readonly code: number;
  readonly errorName: ErrorName;

  constructor(errorName: ErrorName, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TributaryError';
    this.errorName = errorName;
    this.code = ErrorCodes[errorName];
  }

  get retriable(): boolean {
    return RETRIABLE.has(this.errorName);
  }

  override toString(): string {
    return `${this.errorName}: ${this.message}`;
  }
}

export function errorNameOf(code: number): ErrorName {
  return namesByCode.get(code) ?? 'UNKNOWN_SERVER_ERROR';
}

export function errorFromCode(code: number, message: string): TributaryError {
  return new TributaryError(errorNameOf(code), message);
}

/** Maps anything thrown to a TributaryError; unknown failures become UNKNOWN_SERVER_ERROR. */
export function asTributaryError(err: unknown): TributaryError {
  if (err instanceof TributaryError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new TributaryError('UNKNOWN_SERVER_ERROR', message, { cause: err });
}

/**
 * A listener that cannot bind `host:port`: ADDRESS_IN_USE when another socket holds the address,
 * else INVALID_CONFIG_EXCEPTION (a host that is not local, a port that needs privileges) naming
 * the option (`what`) that set it.
 */
export function listenError(what: string, host: string, port: number, err: unknown): TributaryError {
  const code = (err as NodeJS.ErrnoException).code;
  const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  if (code === 'EADDRINUSE') return new TributaryError('ADDRESS_IN_USE', `${address} (${what}) is in use by another process`, { cause: err });
  return new TributaryError('INVALID_CONFIG_EXCEPTION', `cannot listen on ${address} (${what}): ${(err as Error).message}`, { cause: err });
}
