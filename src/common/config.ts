/**
 * Every configuration key, declared once: name, scope, type, default and a one-line description.
 * `docs/configuration.md` is generated from this list (`npm run docs:config`); keep names and
 * defaults the same as Apache Fluss where Fluss has the option.
 */
import path from 'node:path';
import { TributaryError } from './errors.js';

export type OptionScope = 'table' | 'server' | 'client';
export type OptionType = 'int' | 'double' | 'bool' | 'string' | 'list' | 'duration' | 'memory' | 'enum';

export interface OptionDef {
  key: string;
  scope: OptionScope;
  type: OptionType;
  /** Default in its written form; undefined = no default (optional or required by context). */
  default?: string;
  description: string;
  enumValues?: readonly string[];
  /** Values Fluss takes for the option that Tributary refuses by name (its storage differs). */
  flussOnlyValues?: readonly string[];
  /** Least value: of an int or double as it is, of a duration in milliseconds (intervals and deadlines of 0 would spin or close at once). */
  min?: number;
  max?: number;
  /** Table options that ALTER TABLE SET/RESET may change after creation. */
  alterable?: boolean;
  /** A credential: never logged, shown or put in an error message. */
  secret?: boolean;
}

const d = (def: OptionDef): OptionDef => def;

export const OPTIONS: readonly OptionDef[] = [
  // ---- table options
  d({ key: 'bucket.num', scope: 'table', type: 'int', min: 1, max: 4096, description: 'Number of buckets of the table (or of each partition); defaults to the server\'s default.bucket.number.' }),
  d({ key: 'bucket.key', scope: 'table', type: 'list', description: 'Comma-separated columns hashed to choose a bucket; empty means sticky assignment for log tables.' }),
  d({ key: 'table.replication.factor', scope: 'table', type: 'int', min: 1, description: 'Replicas of each bucket, on as many tablet servers; unset means the server\'s default.replication.factor. More than the live tablet servers fails with INVALID_REPLICATION_FACTOR.' }),
  d({ key: 'table.log.format', scope: 'table', type: 'enum', enumValues: ['ARROW'], flussOnlyValues: ['INDEXED', 'COMPACTED'], default: 'ARROW', description: 'Record format of the log; ARROW stores Arrow IPC record batches. Fluss\'s INDEXED and COMPACTED are not supported.' }),
  d({ key: 'table.kv.format', scope: 'table', type: 'enum', enumValues: ['COMPACTED'], flussOnlyValues: ['INDEXED'], default: 'COMPACTED', description: 'Row format of a primary-key table\'s KV state; Tributary stores CompactedRow values (Fluss\'s default). Fluss\'s INDEXED is not supported.' }),
  d({ key: 'table.kv.standby-replica.enabled', scope: 'table', type: 'bool', default: 'true', description: 'Primary-key tables with a replication factor of 2 or more: one follower of each bucket, in the ISR, keeps a warm KV state from the replicated changelog (the standby). The coordinator elects it first when the leader fails, and it leads without restoring a KV snapshot. Ignored by log tables.' }),
  d({ key: 'table.log.ttl', scope: 'table', type: 'duration', default: '7d', alterable: true, description: 'How long log segments are kept (with remote.data.dir set: remote segments; local ones go once uploaded); 0 keeps them forever.' }),
  d({ key: 'table.log.tiered.local-segments', scope: 'table', type: 'int', default: '2', min: 1, alterable: true, description: 'With remote.data.dir set: the newest log segments each bucket keeps on local disk once older ones are in the remote log (or the lake). A lake-enabled table\'s segment waits for the lake up to twice table.datalake.freshness before it is uploaded.' }),
  d({ key: 'table.log.arrow.compression.type', scope: 'table', type: 'enum', enumValues: ['ZSTD', 'LZ4_FRAME', 'NONE'], default: 'ZSTD', description: 'Arrow IPC body compression of log batches, buffer by buffer; a buffer under 64 bytes, or one that would not shrink, is stored uncompressed.' }),
  d({ key: 'table.log.arrow.compression.zstd.level', scope: 'table', type: 'int', default: '3', min: 1, max: 22, description: 'ZSTD level for Arrow body compression.' }),
  d({ key: 'table.auto-partition.enabled', scope: 'table', type: 'bool', default: 'false', description: 'Create and drop time partitions automatically.' }),
  d({ key: 'table.auto-partition.key', scope: 'table', type: 'string', description: 'The time partition key; required when the table has more than one partition key.' }),
  d({ key: 'table.auto-partition.time-unit', scope: 'table', type: 'enum', enumValues: ['HOUR', 'DAY', 'MONTH', 'QUARTER', 'YEAR'], default: 'DAY', description: 'Time unit of automatic partitions (yyyyMMddHH, yyyyMMdd, yyyyMM, yyyyQ, yyyy).' }),
  d({ key: 'table.auto-partition.num-precreate', scope: 'table', type: 'int', default: '2', min: 0, alterable: true, description: 'Partitions created ahead: the current one and the following ones.' }),
  d({ key: 'table.auto-partition.num-retention', scope: 'table', type: 'int', default: '7', min: 0, alterable: true, description: 'Past partitions kept; older automatic partitions are dropped. 0 keeps all.' }),
  d({ key: 'table.auto-partition.time-zone', scope: 'table', type: 'string', description: 'IANA time zone used to compute partition values; defaults to the server\'s zone.' }),
  d({ key: 'table.merge-engine', scope: 'table', type: 'enum', enumValues: ['LAST_ROW', 'FIRST_ROW', 'VERSIONED', 'AGGREGATION'], description: 'How a primary-key table merges a write with the stored row of its key: unset or last_row keeps the newest row; first_row keeps the first row and ignores later ones (insert-only changelog); versioned keeps the row with the highest table.merge-engine.versioned.ver-column; aggregation combines each column by its fields.*.agg function. Any case is accepted; Fluss writes the names in lower case.' }),
  d({ key: 'table.merge-engine.versioned.ver-column', scope: 'table', type: 'string', description: 'Version column of the versioned merge engine (INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ); a write replaces the stored row when its version is at least the stored one, a null version counts as the smallest.' }),
  d({ key: 'table.delete.behavior', scope: 'table', type: 'enum', enumValues: ['ALLOW', 'IGNORE', 'DISABLE'], description: 'What deletes do on a primary-key table: ALLOW removes rows, IGNORE drops deletes silently, DISABLE fails them with DELETION_DISABLED_EXCEPTION. Unset: ALLOW for last_row, IGNORE for the other engines; first_row and versioned cannot ALLOW.' }),
  d({ key: 'table.changelog.image', scope: 'table', type: 'enum', enumValues: ['FULL', 'WAL'], default: 'FULL', description: 'Changelog of a primary-key table: FULL writes -U (the old row) and +U for an update; WAL writes only +U, and with last_row full-row upserts skip reading the old row and are all written as +U. The aggregation engine needs FULL.' }),
  d({ key: 'fields.<col>.agg', scope: 'table', type: 'enum', enumValues: ['sum', 'product', 'max', 'min', 'last_value', 'last_value_ignore_nulls', 'first_value', 'first_value_ignore_nulls', 'listagg', 'string_agg', 'bool_and', 'bool_or'], default: 'last_value_ignore_nulls', description: 'Aggregate function of a non-key column (named in the key) under the aggregation merge engine. sum and product take numeric columns; max and min numeric, CHAR/STRING, DATE, TIME and timestamp columns; listagg (alias string_agg) CHAR/STRING; bool_and and bool_or BOOLEAN; the value functions any type. Nulls are ignored except by last_value and first_value.' }),
  d({ key: 'fields.<col>.listagg.delimiter', scope: 'table', type: 'string', default: ',', description: 'Separator that listagg puts between the values of the column (the key reads fields.*.string_agg.delimiter for string_agg); must not be empty.' }),
  d({ key: 'table.datalake.enabled', scope: 'table', type: 'bool', default: 'false', alterable: true, description: 'Tier the table into an Iceberg table of the lake continuously; can be switched on later with ALTER TABLE SET.' }),
  d({ key: 'table.datalake.format', scope: 'table', type: 'enum', enumValues: ['iceberg'], description: 'Lake format the table is aligned with, fixed at creation (set automatically when the table is created lake-enabled): with iceberg, a single-column bucket key buckets rows with Iceberg\'s bucket transform so Tributary bucket b is lake bucket b.' }),
  d({ key: 'table.datalake.freshness', scope: 'table', type: 'duration', default: '3min', alterable: true, description: 'Target lag of the lake behind the table; a tiering round starts this long after the previous one began, and a round that runs longer commits what it has.' }),
  d({ key: 'table.datalake.auto-compaction', scope: 'table', type: 'bool', default: 'false', alterable: true, description: 'After each tiering round, rewrite every lake partition the round wrote to into one data file without deleted rows (sorted by __offset). When off, only partitions holding 8 or more delete files are compacted.' }),
  d({ key: 'table.datalake.auto-expire-snapshot', scope: 'table', type: 'bool', default: 'false', alterable: true, description: 'Expire old lake snapshots after each tiering commit, as the lake table properties history.expire.max-snapshot-age-ms (5 days) and history.expire.min-snapshots-to-keep (1) say; set them with the table options iceberg.history.expire.*.' }),

  d({ key: 'kafka.value.format', scope: 'table', type: 'enum', enumValues: ['raw', 'json'], description: 'Exposes a log table as a Kafka topic (when it is in kafka.database): raw for the key, value, headers, timestamp columns of a topic made by CreateTopics; json to read each record value as a JSON object of the table\'s columns on produce (a record that does not fit is refused with INVALID_RECORD) and to write the row back as one on fetch.' }),
  d({ key: 'kafka.key.fields', scope: 'table', type: 'list', description: 'With kafka.value.format json: the columns whose values, as a JSON object, are a fetched record\'s key; unset, fetched records have a null key.' }),

  // ---- server options
  d({ key: 'bind.listeners', scope: 'server', type: 'string', default: 'TRIBUTARY://127.0.0.1:9123', description: 'RPC listener as NAME://host:port; port 0 picks a free port.' }),
  d({ key: 'http.port', scope: 'server', type: 'int', default: '9124', min: 0, max: 65535, description: 'Port of the HTTP server (health, readiness, metrics; on tributary start and a coordinator also the REST API and Iceberg REST catalog); 0 picks a free port. A tablet server of a cluster serves HTTP only when it is set.' }),
  d({ key: 'metrics.replica-lag.max-bucket-series', scope: 'server', type: 'int', default: '1000', min: 0, description: 'Most bucket series a tablet server exports of its followers\' lag (tributary_replica_lag_records, tributary_replica_last_caught_up_seconds): past it, only the most lagging; the per-follower totals cover every bucket.' }),
  d({ key: 'data.dir', scope: 'server', type: 'string', default: './tributary-data', description: 'Directory for metadata and log segments.' }),
  d({ key: 'default.bucket.number', scope: 'server', type: 'int', default: '1', min: 1, max: 4096, description: 'Bucket count of tables created without bucket.num.' }),
  d({ key: 'max.partition.num', scope: 'server', type: 'int', default: '1000', min: 1, description: 'Most partitions one table may have.' }),
  d({ key: 'max.bucket.num', scope: 'server', type: 'int', default: '4096', min: 1, description: 'Most buckets one table or partition may have.' }),
  d({ key: 'log.segment.file-size', scope: 'server', type: 'memory', default: '1024mb', description: 'A log segment rolls to a new file past this size.' }),
  d({ key: 'log.index.interval-size', scope: 'server', type: 'memory', default: '4kb', description: 'Bytes of log between two entries of the sparse offset index.' }),
  d({ key: 'log.recent-batches.size', scope: 'server', type: 'memory', default: '1mb', description: 'The last batches appended to each bucket, up to this size, are also kept in memory, so that reads at the head of the log (consumers that keep up, the log side of union reads) need no file read; 0 keeps none.' }),
  d({ key: 'log.preallocate.size', scope: 'server', type: 'memory', default: '1mb', description: 'Zeros written and fsynced ahead of each bucket\'s active log segment, renewed in the background once half are used: the fsync before an acknowledgement then writes data blocks only, without the file system\'s journal commit a growing file needs, which shortens the slowest fsyncs. Appends of more than a sixteenth of it set off no zeros (their fsync is mostly their data, and zeros ahead would double a fast log\'s disk writes). Costs up to this much disk per active segment (cut off when it rolls or the server stops); 0 lets segments grow as they are written.' }),
  d({ key: 'log.flush.interval-messages', scope: 'server', type: 'int', default: '1', min: 1, description: 'fsync the log after this many appended batches; 1 makes every acknowledged batch durable on disk before the ack.' }),
  d({ key: 'log.flush.interval', scope: 'server', type: 'duration', min: 1, default: '1s', description: 'Upper bound on how long appended data may wait for an fsync when log.flush.interval-messages > 1.' }),
  d({ key: 'log.flush.offset.checkpoint-interval', scope: 'server', type: 'duration', min: 1, default: '1min', description: 'How often each log\'s recovery point is checkpointed; recovery validates batches from there.' }),
  d({ key: 'log.retention.check-interval', scope: 'server', type: 'duration', min: 1, default: '5min', description: 'How often expired log segments are deleted.' }),
  d({ key: 'auto-partition.check.interval', scope: 'server', type: 'duration', min: 1, default: '10min', description: 'How often automatic partitions are created and expired.' }),
  d({ key: 'server.writer-id.expiration-time', scope: 'server', type: 'duration', default: '7d', description: 'Idle writer ids older than this are forgotten.' }),
  d({ key: 'server.data-disk.write-limit-ratio', scope: 'server', type: 'double', default: '0.85', min: 0, max: 1, description: 'Once the disk of data.dir is fuller than this share of its size (or a write finds it full), the server refuses writes with DISK_WRITE_LOCKED (retriable) and goes on serving reads.' }),
  d({ key: 'server.data-disk.write-recover-ratio', scope: 'server', type: 'double', default: '0.80', min: 0, max: 1, description: 'Writes resume once the disk of data.dir is back at or below this share of its size; at most server.data-disk.write-limit-ratio.' }),
  d({ key: 'server.data-disk.check-interval', scope: 'server', type: 'duration', min: 1, default: '1s', description: 'How often the server reads the disk use of data.dir (statfs), for server.data-disk.write-limit-ratio.' }),
  d({ key: 'rpc.max-frame-size', scope: 'server', type: 'memory', default: '100mb', description: 'Largest request frame accepted; bigger frames get RECORD_TOO_LARGE_EXCEPTION and the connection is closed.' }),
  d({ key: 'server.buffer.memory-size', scope: 'server', type: 'memory', default: '256mb', description: 'Request bytes the server holds in flight across the connections of its RPC and Kafka listeners together; once they reach it, the server stops reading the connections that hold their share of it (this size divided by the open connections, at least 64 KiB or all of it when smaller) until responses free memory.' }),
  d({ key: 'rpc.frame-timeout', scope: 'server', type: 'duration', min: 1, default: '30s', description: 'Longest a request frame may take from its first bytes to its last; a connection whose frame is not complete by then is closed and its bytes released.' }),
  d({ key: 'netty.connection.max-idle-time', scope: 'server', type: 'duration', min: 1, default: '10min', description: 'A connection that sends no bytes and has no request in flight for this long is closed.' }),
  d({ key: 'rpc.max-wait', scope: 'server', type: 'duration', default: '30s', description: 'Longest a FetchLog may wait for min-bytes, whatever the client asks.' }),
  d({ key: 'kv.flush.interval', scope: 'server', type: 'duration', default: '20ms', description: 'The least time between two writes of a primary-key bucket\'s committed changes to its lmdb state, each of which ends in an fsync of the lmdb file; changes committed meanwhile are read from memory, and the changelog (fsynced with every batch) keeps them durable. 0 writes after every commit.' }),
  d({ key: 'kv.snapshot.interval', scope: 'server', type: 'duration', min: 1, default: '10min', description: 'How often each primary-key bucket snapshots its KV state to remote.data.dir; recovery restores the latest snapshot and replays the changelog after it.' }),
  d({ key: 'kv.snapshot.chunk-size', scope: 'server', type: 'memory', default: '4mb', description: 'A KV snapshot cuts the lmdb copy into chunks of this size, named by their content: a chunk an earlier snapshot of the bucket already stored is not uploaded again. A chunk of s3.multipart.threshold or more goes up as a multipart upload.' }),
  d({ key: 'kv.snapshot.num-retained', scope: 'server', type: 'int', default: '2', min: 1, description: 'Registered KV snapshots the coordinator keeps per bucket; it forgets older ones and deletes their files.' }),
  d({ key: 'remote.data.dir', scope: 'server', type: 'string', description: 'Where KV snapshots go: a directory, or s3://bucket/prefix (with the s3.* options); unset means the directory remote under data.dir. In a cluster every server, the coordinators included, must reach the same location.' }),
  d({ key: 'remote.log.task-interval-duration', scope: 'server', type: 'duration', default: '1min', description: 'With remote.data.dir set: how often each bucket leader uploads closed log segments, commits the remote log manifest and deletes local segments the remote log holds; 0 turns the remote log off.' }),
  d({ key: 'remote.log.task-max-upload-segments', scope: 'server', type: 'int', default: '5', min: 1, description: 'Most closed segments one bucket uploads per remote log round.' }),
  d({ key: 'remote.log.orphan-min-age', scope: 'server', type: 'duration', default: '10min', description: 'Objects in a bucket\'s remote log directory that its committed manifest does not name (left by rounds a crash or failure interrupted) are deleted when a new leader of the bucket starts uploading, once they are this old.' }),
  d({ key: 'remote.log.upload.max-backoff', scope: 'server', type: 'duration', min: 1, default: '5min', description: 'Longest a bucket whose remote log round failed (the store is unreachable) waits before the next try; the wait doubles from remote.log.task-interval-duration.' }),
  d({ key: 'remote.log.cache.max-size', scope: 'server', type: 'memory', default: '1gb', description: 'Bytes of remote log segments a tablet server keeps downloaded (under remote-log-cache in data.dir) to serve fetches below the local log start; least recently used first out.' }),
  d({ key: 'remote.log.read.max-concurrent-downloads', scope: 'server', type: 'int', default: '4', min: 1, description: 'Remote log segments a tablet server downloads at once for fetches; more wait.' }),
  d({ key: 'datalake.format', scope: 'server', type: 'enum', enumValues: ['iceberg'], flussOnlyValues: ['PAIMON', 'HUDI', 'LANCE'], default: 'iceberg', description: 'Format of the lake that lake-enabled tables are tiered into; tiering workers and clients learn it from the server.' }),
  d({ key: 'datalake.iceberg.warehouse', scope: 'server', type: 'string', description: 'Where the Iceberg filesystem catalog keeps its tables (<warehouse>/<db>/<table>/metadata, data): a directory (/path or file:///path), which tiering workers must see at the same path, or s3://bucket/prefix (see the s3.* options); unset means the directory lake under data.dir.' }),
  d({ key: 'datalake.cache.dir', scope: 'server', type: 'string', description: 'Local directory of the cache of lake files read from object storage (an s3:// warehouse), which DuckDB reads; unset means lake-cache under data.dir (the SQL shell: under the system temp directory).' }),
  d({ key: 'datalake.cache.metadata-max-size', scope: 'server', type: 'memory', default: '64mb', description: 'Bytes of the manifests and manifest lists of lake tables on object storage, and of the footers of their Parquet data files read for partial copies, kept in memory, least recently used out first: a query planned again reads them from memory, not from S3. They never change once written.' }),
  d({ key: 'datalake.cache.max-size', scope: 'server', type: 'memory', default: '2gb', description: 'Bytes the lake file cache keeps; past it the least recently used files not read by a running query are deleted.' }),
  d({ key: 'datalake.cache.partial-file.max-ratio', scope: 'server', type: 'double', default: '0.5', min: 0, max: 1, description: 'A query that reads some columns of a lake Parquet file on object storage fetches only its footer and those columns\' byte ranges, and the cache keeps a smaller Parquet file of them, when they are at most this share of the file; else (and for delete files) the file is fetched whole. 0 always fetches whole files.' }),
  d({ key: 'datalake.iceberg.rest.vend-credentials', scope: 'server', type: 'bool', default: 'false', description: 'Hand s3.access-key and s3.secret-key to Iceberg REST catalog clients in the load-table config, so outside engines can read an s3:// warehouse with the server\'s credentials. Off: clients bring their own.' }),
  d({ key: 's3.endpoint', scope: 'server', type: 'string', description: 'Endpoint of the S3 API (for MinIO and other S3-compatible stores), e.g. http://127.0.0.1:9000; unset means AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS S3.' }),
  d({ key: 's3.region', scope: 'server', type: 'string', description: 'Region of the S3 buckets; unset means AWS_REGION or AWS_DEFAULT_REGION, else us-east-1.' }),
  d({ key: 's3.access-key', scope: 'server', type: 'string', secret: true, description: 'Access key id for S3; unset means AWS_ACCESS_KEY_ID, else the AWS SDK\'s default credential chain. Never logged or shown.' }),
  d({ key: 's3.secret-key', scope: 'server', type: 'string', secret: true, description: 'Secret access key for S3; unset means AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN). Never logged or shown.' }),
  d({ key: 's3.path-style-access', scope: 'server', type: 'bool', description: 'Address buckets as endpoint/bucket/key instead of bucket.endpoint/key (MinIO and most S3-compatible stores need it); unset means AWS_S3_FORCE_PATH_STYLE, else true when an endpoint is set.' }),
  d({ key: 's3.max-connections', scope: 'server', type: 'int', default: '32', min: 1, description: 'S3 requests in flight at once per process.' }),
  d({ key: 's3.max-attempts', scope: 'server', type: 'int', default: '5', min: 1, description: 'Tries of one S3 request, with exponential back-off and jitter between them (the AWS SDK\'s standard retries).' }),
  d({ key: 's3.multipart.part-size', scope: 'server', type: 'memory', default: '8mb', description: 'Part size of multipart uploads to S3 (at least 5mb, S3\'s least).' }),
  d({ key: 's3.multipart.threshold', scope: 'server', type: 'memory', default: '128mb', description: 'Objects of this size and larger go up to S3 as multipart uploads (parts of s3.multipart.part-size, four at once), smaller ones as one PutObject; at least s3.multipart.part-size and at most 5gb, S3\'s largest single upload. A stream (a KV snapshot chunk) is held in memory up to it.' }),
  d({ key: 's3.commit.claim-timeout', scope: 'server', type: 'duration', default: '1min', min: 1, description: 'A commit claim on S3 (the compare-and-set of a lake table\'s next metadata version) older than this is taken for one whose writer died and removed.' }),
  d({ key: 'datalake.tiering.embedded.nice', scope: 'server', type: 'int', default: '10', min: 0, max: 19, description: 'Linux nice value of the threads of the tiering worker that `tributary start` runs beside its node (its decoding and Parquet writing), so that when the cores are busy the node\'s appends and fetches run first; 0 gives them the node\'s own priority. Ignored on other systems, where a priority is the whole process\'s.' }),
  d({ key: 'datalake.tiering.timeout', scope: 'server', type: 'duration', min: 1, default: '2min', description: 'A table whose tiering worker sends no heartbeat for this long goes back to the queue and the worker\'s tiering epoch is fenced.' }),
  d({ key: 'sql.query.timeout', scope: 'server', type: 'duration', default: '5min', description: 'Longest one SQL statement of the REST API (POST /api/v1/sql) or the SQL shell may run, loading its tables included, before it stops with QUERY_TIMEOUT; a request may ask for less. 0 means no limit.' }),
  d({ key: 'sql.result.max-rows', scope: 'server', type: 'int', default: '1000000', min: 1, description: 'Most rows a result held in memory may have: the answer of POST /api/v1/sql, the rows an INSERT, UPDATE or DELETE reads; past it RESULT_TOO_LARGE. The shell prints query rows as they come, without this limit.' }),
  d({ key: 'sql.result.max-bytes', scope: 'server', type: 'memory', default: '128mb', description: 'Most bytes a result held in memory may have (text and binary values by their length, other values 8 bytes each); past it RESULT_TOO_LARGE.' }),
  d({ key: 'sql.memory-limit', scope: 'server', type: 'memory', default: '1gb', description: 'Memory DuckDB may use for one statement (its memory_limit); beyond it DuckDB spills to a directory under data.dir where it can, and otherwise the statement fails with QUERY_MEMORY_EXCEEDED.' }),
  d({ key: 'sql.threads', scope: 'server', type: 'int', min: 1, description: 'Threads DuckDB uses for one statement; unset: one per core.' }),
  d({ key: 'sql.max-concurrent-queries', scope: 'server', type: 'int', default: '2', min: 1, description: 'SQL statements the REST API runs at once; one more is refused with SERVER_BUSY. Each running statement holds one of Node\'s libuv threads (16 in the tributary command unless UV_THREADPOOL_SIZE says otherwise) while DuckDB works, which file I/O needs too: keep it below that.' }),
  d({ key: 'zookeeper.address', scope: 'server', type: 'string', description: 'ZooKeeper ensemble that holds a cluster\'s metadata, as comma-separated host:port; not used by the one-process tributary start.' }),
  d({ key: 'zookeeper.path.root', scope: 'server', type: 'string', default: '/tributary', description: 'Znode under which the cluster keeps everything in ZooKeeper (metadata, counters, coordinator election); clusters sharing an ensemble need different roots.' }),
  d({ key: 'zookeeper.client.session-timeout', scope: 'server', type: 'duration', min: 1, default: '60s', description: 'ZooKeeper session timeout asked for (the server bounds it by its min/maxSessionTimeout): a coordinator cut off from ZooKeeper this long loses its session, and with it its leadership.' }),
  d({ key: 'zookeeper.client.connection-timeout', scope: 'server', type: 'duration', min: 1, default: '15s', description: 'How long a server waits for its first connection to ZooKeeper before failing with NETWORK_EXCEPTION.' }),

  // ---- cluster (tributary coordinator-server / tablet-server)
  d({ key: 'tablet-server.id', scope: 'server', type: 'int', min: 0, description: 'Id of this tablet server in its cluster: required by tributary tablet-server, unique, and the same across restarts (its replicas are assigned to it by id).' }),
  d({ key: 'tablet-server.rack', scope: 'server', type: 'string', description: 'Rack (or zone) of this tablet server: replicas of one bucket are spread over racks first.' }),
  d({ key: 'kafka.enabled', scope: 'server', type: 'bool', default: 'false', description: 'Serve the Kafka protocol on the listener of bind.listeners named by kafka.listener.names (tributary start --kafka-port adds one).' }),
  d({ key: 'kafka.listener.names', scope: 'server', type: 'string', default: 'KAFKA', description: 'Name of the listener in bind.listeners that speaks the Kafka protocol.' }),
  d({ key: 'kafka.database', scope: 'server', type: 'string', default: 'kafka', description: 'Database whose log tables are the Kafka topics; created on start when missing, or with the first topic when no coordinator is active at start.' }),
  d({ key: 'kafka.auto-create-topics', scope: 'server', type: 'bool', default: 'false', description: 'Metadata and Produce for an unknown topic create it as a raw topic table with num.partitions buckets.' }),
  d({ key: 'num.partitions', scope: 'server', type: 'int', default: '1', min: 1, max: 4096, description: 'Buckets of a topic created by auto-creation, or by CreateTopics with NumPartitions -1.' }),
  d({ key: 'kafka.produce.max-in-flight', scope: 'server', type: 'int', min: 1, max: 1024, default: '8', description: 'Most Produce requests of one Kafka connection handled at once, of the same partitions or not (each partition\'s batches are written in the order the requests arrived, answers stay in request order); 1 handles every request of a connection one at a time.' }),
  d({ key: 'kafka.fetch.max-bytes', scope: 'server', type: 'memory', default: '50mb', description: 'Most Kafka record batch bytes one Fetch response carries (as sent, not as stored), whatever the consumer asks (its fetch.max.bytes is honoured below it).' }),
  d({ key: 'kafka.fetch.lake-cursors', scope: 'server', type: 'int', min: 1, max: 100000, default: '64', description: 'Lake reads a Kafka listener keeps open for fetches below a lake-enabled topic\'s log start, so that a consumer\'s next Fetch continues where the last one stopped instead of reading the lake file again; the least recently used is dropped beyond it.' }),
  d({ key: 'kafka.group.min-session-timeout', scope: 'server', type: 'duration', min: 1, default: '6s', description: 'Shortest session timeout a Kafka consumer group member may ask for (Kafka\'s group.min.session.timeout.ms); a JoinGroup below it gets INVALID_SESSION_TIMEOUT.' }),
  d({ key: 'kafka.group.max-session-timeout', scope: 'server', type: 'duration', min: 1, default: '30min', description: 'Longest session timeout a Kafka consumer group member may ask for (Kafka\'s group.max.session.timeout.ms); a JoinGroup above it gets INVALID_SESSION_TIMEOUT.' }),
  d({ key: 'kafka.group.initial-rebalance-delay', scope: 'server', type: 'duration', default: '3s', description: 'How long the first rebalance of an empty consumer group waits for more members to join (at most their rebalance timeout), so that members starting together share one rebalance.' }),
  d({ key: 'kafka.group.max-groups', scope: 'server', type: 'int', min: 1, default: '10000', description: 'Most consumer groups (with members or committed offsets) one server coordinates; a new group beyond it fails with GROUP_MAX_NUM_EXCEPTION (Kafka\'s POLICY_VIOLATION).' }),
  d({ key: 'kafka.group.max-members', scope: 'server', type: 'int', min: 1, default: '1000', description: 'Most members of one consumer group (Kafka\'s group.max.size); one more gets GROUP_MAX_SIZE_REACHED.' }),
  d({ key: 'kafka.group.max-metadata-size', scope: 'server', type: 'memory', default: '1mb', description: 'Most bytes of a group member\'s protocol metadata and of one assignment; more fails with GROUP_METADATA_TOO_LARGE (Kafka\'s MESSAGE_TOO_LARGE).' }),
  d({ key: 'kafka.group.offset-metadata.max-bytes', scope: 'server', type: 'memory', default: '4kb', description: 'Most bytes of the metadata string of one committed offset (Kafka\'s offset.metadata.max.bytes); a longer one gets OFFSET_METADATA_TOO_LARGE.' }),
  d({ key: 'kafka.group.offsets-buckets', scope: 'server', type: 'int', min: 1, max: 1024, default: '1', description: 'Buckets of the table that stores committed offsets (kafka.__consumer_offsets), set when it is created; each group is coordinated by the leader of its bucket.' }),
  d({ key: 'advertised.listeners', scope: 'server', type: 'string', description: 'NAME://host:port that clients and other servers should connect to, when it differs from bind.listeners (a wildcard bind, NAT).' }),
  d({ key: 'default.replication.factor', scope: 'server', type: 'int', min: 1, default: '1', description: 'Replication factor of tables created without table.replication.factor.' }),
  d({ key: 'log.replica.max-lag-time', scope: 'server', type: 'duration', min: 1, default: '30s', description: 'A follower that has not caught up with the leader\'s log end for this long leaves the ISR; it rejoins once caught up.' }),
  d({ key: 'log.replica.min-in-sync-replicas-number', scope: 'server', type: 'int', min: 1, default: '1', description: 'Fewest replicas in the ISR for an acks=all write: with fewer, it fails with NOT_ENOUGH_REPLICAS_EXCEPTION.' }),
  d({ key: 'log.replica.fetch.max-bytes', scope: 'server', type: 'memory', default: '16mb', description: 'Most bytes one follower fetch asks a leader for, over all its buckets.' }),
  d({ key: 'log.replica.fetch.max-bytes-for-bucket', scope: 'server', type: 'memory', default: '1mb', description: 'Most bytes one follower fetch asks for of one bucket.' }),
  d({ key: 'log.replica.fetch.min-bytes', scope: 'server', type: 'memory', default: '1b', description: 'A follower fetch waits at the leader until this many bytes are there, or the wait time passes.' }),
  d({ key: 'log.replica.fetch.wait-max-time', scope: 'server', type: 'duration', min: 1, default: '500ms', description: 'Longest a follower fetch waits at the leader for min-bytes.' }),
  d({ key: 'log.replica.fetch.backoff-interval', scope: 'server', type: 'duration', min: 1, default: '1s', description: 'Pause of a follower after a failed fetch from a leader before it tries again.' }),
  d({ key: 'log.replica.high-watermark.checkpoint-interval', scope: 'server', type: 'duration', min: 1, default: '5s', description: 'How often each replica writes its high watermark to disk; after a crash it restarts from there.' }),
  d({ key: 'tablet-server.controlled-shutdown.max-retries', scope: 'server', type: 'int', min: 0, default: '3', description: 'Times a stopping tablet server asks the coordinator to move its leaderships away before it stops anyway.' }),
  d({ key: 'tablet-server.controlled-shutdown.retry-interval', scope: 'server', type: 'duration', min: 1, default: '1s', description: 'Pause between those requests.' }),
  d({ key: 'coordinator.rebalance.max-concurrent-moves', scope: 'server', type: 'int', min: 1, default: '4', description: 'Most buckets a rebalance moves at once (each adds its new replicas, waits until they are in sync, then drops the old ones).' }),
  d({ key: 'coordinator.offline-leader.retry-delay', scope: 'server', type: 'duration', min: 1, default: '1min', description: 'How often the coordinator retries electing a leader for a bucket none of whose ISR replicas is alive.' }),

  // ---- client options
  d({ key: 'bootstrap.servers', scope: 'client', type: 'list', default: '127.0.0.1:9123', description: 'Comma-separated host:port of servers to bootstrap from: any of them (a coordinator or a tablet server of a cluster, or the one node of tributary start) names the active coordinator and the tablet servers; the next is tried when one does not answer.' }),
  d({ key: 'client.request-timeout', scope: 'client', type: 'duration', min: 1, default: '30s', description: 'How long a request may take before it fails with REQUEST_TIME_OUT; also how long a read retries at new leaders (after NOT_LEADER_OR_FOLLOWER, a lost connection), and a request to the coordinator while none is active, before it fails with the last error.' }),
  d({ key: 'client.connect-timeout', scope: 'client', type: 'duration', min: 1, default: '10s', description: 'How long connecting to a server may take.' }),
  d({ key: 'client.writer.acks', scope: 'client', type: 'enum', enumValues: ['0', '1', 'all', '-1'], default: 'all', description: '0: do not wait for the server; 1: written to the log file; all: below the high watermark, i.e. durable per log.flush.* and visible to readers.' }),
  d({ key: 'client.writer.batch-size', scope: 'client', type: 'memory', default: '2mb', description: 'A bucket\'s batch is sent once it holds this many bytes.' }),
  d({ key: 'client.writer.batch-timeout', scope: 'client', type: 'duration', default: '100ms', description: 'Linger: a non-full batch is sent after this long.' }),
  d({ key: 'client.writer.buffer.memory-size', scope: 'client', type: 'memory', default: '64mb', description: 'Memory for unsent rows; append() waits when it is full.' }),
  d({ key: 'client.writer.buffer.wait-timeout', scope: 'client', type: 'duration', default: '60s', description: 'How long append() waits for buffer memory before failing with BUFFER_EXHAUSTED.' }),
  d({ key: 'client.writer.request-max-size', scope: 'client', type: 'memory', default: '10mb', description: 'Largest ProduceLog request the writer sends.' }),
  d({ key: 'client.writer.retries', scope: 'client', type: 'int', default: '2147483647', min: 0, description: 'Retries of each batch after a retriable failure (backing off up to 2 s); by default a writer keeps retrying while the server is unreachable.' }),
  d({ key: 'client.writer.delivery-timeout', scope: 'client', type: 'duration', min: 1, default: '2min', description: 'How long a batch may be retried after retriable failures (a server unreachable, a full data disk: DISK_WRITE_LOCKED), counted from its first row; then the write fails with the last error.' }),
  d({ key: 'client.writer.enable-idempotence', scope: 'client', type: 'bool', default: 'true', description: 'Tag batches with a writer id and sequence so retries never duplicate.' }),
  d({ key: 'client.writer.max-inflight-requests-per-bucket', scope: 'client', type: 'int', default: '5', min: 1, description: 'Requests per bucket sent and not yet acknowledged; batches that queue meanwhile leave together in the next request.' }),
  d({ key: 'client.writer.bucket.no-key-assigner', scope: 'client', type: 'enum', enumValues: ['STICKY', 'ROUND_ROBIN'], default: 'STICKY', description: 'Bucket choice for tables without a bucket key.' }),
  d({ key: 'client.writer.dynamic-create-partition.enabled', scope: 'client', type: 'bool', default: 'true', description: 'Create a missing partition on first write.' }),
  d({ key: 'client.scanner.log.max-poll-records', scope: 'client', type: 'int', default: '500', min: 1, description: 'Most records one poll() returns.' }),
  d({ key: 'client.scanner.log.fetch.max-bytes', scope: 'client', type: 'memory', default: '16mb', description: 'Most bytes of one fetch response.' }),
  d({ key: 'client.scanner.log.fetch.max-bytes-for-bucket', scope: 'client', type: 'memory', default: '1mb', description: 'Most bytes per bucket in one fetch (the first batch is always returned).' }),
  d({ key: 'client.scanner.log.fetch.min-bytes', scope: 'client', type: 'memory', default: '1b', description: 'The server waits for this many bytes before answering a fetch.' }),
  d({ key: 'client.scanner.log.fetch.wait-max-time', scope: 'client', type: 'duration', default: '500ms', description: 'Longest the server holds a fetch waiting for min-bytes.' }),
];

/**
 * Fluss table options that Tributary does not honour, and why: refused by name rather than as
 * unknown keys, so that Fluss DDL says what it asks for that is missing here.
 */
export const FLUSS_TABLE_OPTIONS_NOT_SUPPORTED: readonly { key: string; why: string }[] = [
  { key: 'table.auto-partition.time-format', why: 'automatic partition values have the fixed format of their time unit' },
  { key: 'table.log.local-ttl', why: 'with a remote log, local segments go once uploaded, keeping table.log.tiered.local-segments' },
  { key: 'table.statistics.columns', why: 'log batches carry no column statistics' },
  { key: 'table.kv.format-version', why: 'primary keys have one encoding' },
  { key: 'table.datalake.historical-partition.enabled', why: 'lookups read the table\'s live partitions only' },
  { key: 'table.auto-increment.cache-size', why: 'there are no auto-increment columns' },
  { key: 'auto-increment.fields', why: 'there are no auto-increment columns' },
];

const BY_KEY = new Map(OPTIONS.map((o) => [o.key, o]));
const NOT_SUPPORTED = new Map(FLUSS_TABLE_OPTIONS_NOT_SUPPORTED.map((o) => [o.key, o.why]));

export function optionDef(key: string): OptionDef | undefined {
  return BY_KEY.get(key);
}

/** The declared default of an option that has one (for help texts). */
export function optionDefault(key: string): string {
  const value = BY_KEY.get(key)?.default;
  if (value === undefined) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `option '${key}' has no default`);
  return value;
}

const DURATION_UNITS: Record<string, number> = {
  ms: 1, milli: 1, millis: 1, s: 1000, sec: 1000, second: 1000, seconds: 1000,
  m: 60_000, min: 60_000, minute: 60_000, minutes: 60_000,
  h: 3_600_000, hour: 3_600_000, hours: 3_600_000, d: 86_400_000, day: 86_400_000, days: 86_400_000,
};
const MEMORY_UNITS: Record<string, number> = {
  b: 1, '': 1, k: 1024, kb: 1024, m: 1024 ** 2, mb: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3, t: 1024 ** 4, tb: 1024 ** 4,
};

/** Parses `500ms`, `30s`, `3min`, `7d`, `2 h`; a bare number is milliseconds. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  if (!m) return undefined;
  const unit = m[2].toLowerCase() || 'ms';
  const factor = DURATION_UNITS[unit];
  return factor === undefined ? undefined : Math.round(Number(m[1]) * factor);
}

/** Parses `1b`, `4kb`, `2mb`, `1024m`, `1g`; a bare number is bytes. */
export function parseMemory(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  if (!m) return undefined;
  const factor = MEMORY_UNITS[m[2].toLowerCase()];
  return factor === undefined ? undefined : Math.round(Number(m[1]) * factor);
}

function invalidOption(def: OptionDef, value: string, why: string): TributaryError {
  return new TributaryError('INVALID_CONFIG_EXCEPTION', `invalid value ${def.secret ? '(hidden)' : `'${value}'`} for option '${def.key}': ${why}`);
}

/** Checks one value against its declaration; throws INVALID_CONFIG_EXCEPTION with the reason. */
export function validateOptionValue(def: OptionDef, value: string): void {
  switch (def.type) {
    case 'int': {
      if (!/^-?\d+$/.test(value.trim())) throw invalidOption(def, value, 'expected an integer');
      const n = Number(value);
      if (def.min !== undefined && n < def.min) throw invalidOption(def, value, `must be at least ${def.min}`);
      if (def.max !== undefined && n > def.max) throw invalidOption(def, value, `must be at most ${def.max}`);
      return;
    }
    case 'double': {
      if (!/^-?\d+(\.\d+)?$/.test(value.trim())) throw invalidOption(def, value, 'expected a decimal number');
      const n = Number(value);
      if (def.min !== undefined && n < def.min) throw invalidOption(def, value, `must be at least ${def.min}`);
      if (def.max !== undefined && n > def.max) throw invalidOption(def, value, `must be at most ${def.max}`);
      return;
    }
    case 'bool':
      if (!/^(true|false)$/i.test(value.trim())) throw invalidOption(def, value, 'expected true or false');
      return;
    case 'duration': {
      const ms = parseDuration(value);
      if (ms === undefined) throw invalidOption(def, value, "expected a duration such as '500ms', '30s', '3min', '7d'");
      if (def.min !== undefined && ms < def.min) throw invalidOption(def, value, `must be at least ${def.min}ms`);
      return;
    }
    case 'memory':
      if (parseMemory(value) === undefined) throw invalidOption(def, value, "expected a size such as '4kb', '2mb', '1gb'");
      return;
    case 'enum':
      if (def.flussOnlyValues?.includes(value.trim().toUpperCase())) {
        throw invalidOption(def, value, `a Fluss value not supported by Tributary, which takes ${def.enumValues!.join(', ')}`);
      }
      if (!def.enumValues!.includes(value.trim().toUpperCase()) && !def.enumValues!.includes(value.trim())) {
        throw invalidOption(def, value, `expected one of ${def.enumValues!.join(', ')}`);
      }
      return;
    case 'string':
    case 'list':
      return;
  }
}

/**
 * A set of options of one scope with typed getters that fall back to declared defaults.
 * Unknown keys of the scope's namespaces are rejected so typos do not pass silently.
 */
export class Options {
  private readonly values: Map<string, string>;

  constructor(readonly scope: OptionScope, values: Record<string, string> = {}) {
    this.values = new Map();
    for (const [k, v] of Object.entries(values)) this.set(k, v);
  }

  set(key: string, value: string): void {
    const def = BY_KEY.get(key);
    if (!def || def.scope !== this.scope) {
      throw new TributaryError('INVALID_CONFIG_EXCEPTION', `unknown ${this.scope} option '${key}'`);
    }
    validateOptionValue(def, value);
    this.values.set(key, value);
  }

  raw(key: string): string | undefined {
    const def = this.def(key);
    return this.values.get(key) ?? def.default;
  }

  has(key: string): boolean {
    return this.values.has(key);
  }

  int(key: string): number {
    return Number(this.required(key));
  }

  double(key: string): number {
    return Number(this.required(key));
  }

  bool(key: string): boolean {
    return this.required(key).trim().toLowerCase() === 'true';
  }

  string(key: string): string | undefined {
    return this.raw(key);
  }

  list(key: string): string[] {
    const v = this.raw(key);
    return v ? v.split(',').map((s) => s.trim()).filter((s) => s.length > 0) : [];
  }

  durationMs(key: string): number {
    return parseDuration(this.required(key))!;
  }

  bytes(key: string): number {
    return parseMemory(this.required(key))!;
  }

  enumValue(key: string): string {
    return this.required(key).trim().toUpperCase();
  }

  entries(): Record<string, string> {
    return Object.fromEntries(this.values);
  }

  private def(key: string): OptionDef {
    const def = BY_KEY.get(key);
    if (!def) throw new Error(`option '${key}' is not declared`);
    return def;
  }

  private required(key: string): string {
    const v = this.raw(key);
    if (v === undefined) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `option '${key}' has no value`);
    return v;
  }
}

/**
 * Table options are the declared `table.*`/`bucket.*` keys; Fluss's options that Tributary does not
 * honour are refused by name; other keys are kept as custom properties.
 */
export function validateTableProperties(props: Record<string, string>): void {
  for (const [k, v] of Object.entries(props)) {
    const def = BY_KEY.get(k);
    const notSupported = NOT_SUPPORTED.get(k);
    if (notSupported) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `'${k}' is a Fluss option not supported by Tributary: ${notSupported}`);
    if (def && def.scope === 'table') {
      validateOptionValue(def, v);
    } else if (k.startsWith('table.') || k.startsWith('bucket.')) {
      throw new TributaryError('INVALID_CONFIG_EXCEPTION', `unknown table option '${k}'`);
    }
  }
}

/** Reads a table option with its declared default. */
export function tableOption(props: Record<string, string>, key: string): string | undefined {
  return props[key] ?? BY_KEY.get(key)?.default;
}

/** The Iceberg warehouse of a node with these server options: datalake.iceberg.warehouse, else `<data.dir>/lake`. */
export function lakeWarehouse(options: Options): string {
  const warehouse = options.string('datalake.iceberg.warehouse');
  if (warehouse !== undefined && /^s3a?:\/\//.test(warehouse)) return warehouse.replace(/\/+$/, '');
  return path.resolve(warehouse?.replace(/^file:\/\/(?=\/)/, '') ?? path.join(options.string('data.dir')!, 'lake'));
}

/** The lake file cache of a node with these server options: datalake.cache.dir, else `<data.dir>/lake-cache`. */
export function lakeCacheDir(options: Options): string {
  return path.resolve(options.string('datalake.cache.dir') ?? path.join(options.string('data.dir')!, 'lake-cache'));
}
