/**
 * The coordinator: owner of databases, tables, schemas and partitions, and of automatic time
 * partitions. Every metadata change goes through `serially`, one at a time and in order (the role
 * Fluss's single-threaded coordinator event loop plays), and is committed to the MetadataStore
 * before the tablet side is told, so a crash never leaves buckets without metadata.
 *
 * Store layout:
 *   /databases/<db>                                   {comment, created_time}
 *   /databases/<db>/tables/<table>                    TableRegistration
 *   /databases/<db>/tables/<table>/schemas/<id>       schema JSON
 *   /databases/<db>/tables/<table>/partitions/<name>  PartitionRegistration
 *   counters: table_id, partition_id, writer_id
 * In a cluster the ClusterController keeps each bucket's replicas and leader beside them
 * (/assignments, /leader_isr: cluster-controller.ts), placed in the commit that registers the table
 * or partition. The registered KV snapshots are under /kv_snapshots (kv-snapshot-registry.ts),
 * forgotten in the commit that drops their table or partition.
 */
import { type Options, optionDef, validateTableProperties } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import { isNoSpace } from '../../common/files.js';
import { autoPartitionPlan, autoPartitionStrategy, parsePartitionSpec } from '../../common/partitions.js';
import { validateLogTableOptions, validatePrimaryKeyTable } from '../../common/pk-table.js';
import {
  addColumns,
  buildSchema,
  type ColumnSpec,
  DEFAULT_DATABASE,
  type PartitionInfo,
  schemaFromJson,
  schemaToJson,
  type Schema,
  type TableDescriptor,
  type TableInfo,
  type TablePath,
  tablePathString,
  validateIdentifier,
  validateKeys,
} from '../../common/schema.js';
import type { MetadataOp, MetadataStore } from '../metadata/metadata-store.js';
import type { Logger } from '../../common/logger.js';
import type { ServerActivity } from '../../common/activity.js';
import type { LakeBucketOffset } from '../../common/lake.js';
import type { LakeCatalog, LakeTableEntry } from '../../lake/lake-format.js';
import { isLakeEnabled, LakeTieringManager } from './lake-tiering-manager.js';
import { type BucketFence, type KvSnapshotCommit, KvSnapshotRegistry, ONE_NODE_FENCE, type SnapshotBucket } from './kv-snapshot-registry.js';
import { type RemoteLogCommit, RemoteLogRegistry } from './remote-log-registry.js';
import type { RemoteLogHandle } from '../../common/remote-log.js';
import { checkReplicationFactor, replicationFactorOf } from './replica-assignment.js';

interface DatabaseRegistration {
  comment?: string;
  created_time: number;
}

interface TableRegistration {
  table_id: number;
  schema_id: number;
  partition_keys: string[];
  bucket_count: number;
  bucket_keys: string[];
  properties: Record<string, string>;
  comment?: string;
  created_time: number;
  modified_time: number;
  /** The client's id of the creation: its retry is answered with this table, not TABLE_ALREADY_EXIST. */
  creation_token?: string;
}

interface PartitionRegistration {
  partition_id: number;
  spec: Record<string, string>;
  created_time: number;
  creation_token?: string;
}

/** What the tablet side does when buckets come and go: the in-process TabletServer, or in a cluster the ClusterController's requests. */
export interface BucketLifecycle {
  createBuckets(table: TableInfo, partition?: PartitionInfo): Promise<void>;
  /** Drops the buckets of one partition, or of the whole table when `partition` is absent. */
  dropBuckets(table: TableInfo, partition?: PartitionInfo): Promise<void>;
  tableAltered(table: TableInfo): void;
  /** What the lake now holds of the table's buckets: log retention keeps everything above it. */
  lakeOffsetsChanged(table: TableInfo, offsets: readonly LakeBucketOffset[]): void;
  /** A bucket's leader committed its remote log: its other replicas may delete local segments below the remote end. */
  remoteLogCommitted?(bucket: SnapshotBucket, manifest: RemoteLogHandle): void;
}

/**
 * Where the buckets of a new table or partition go, decided before its registration is committed
 * and committed with it, so that no bucket exists without its placement.
 */
export interface BucketPlacement {
  /**
   * Store operations that place the buckets of `partition`, or of a non-partitioned `table`; for a
   * partitioned table without `partition` it only checks that its partitions can be placed.
   * INVALID_REPLICATION_FACTOR when the table asks for more replicas than there are tablet servers.
   */
  placeBuckets(table: TableInfo, partition?: PartitionInfo): MetadataOp[];
}

/** A lake table, and whether a live table (of its path and table id) owns it. */
export interface LakeTableListing extends LakeTableEntry {
  owned: boolean;
}

/** What one ALTER TABLE changes. */
export interface TableChanges {
  /** SET (with a value) or RESET (without) of table options. */
  options?: { key: string; value?: string }[];
  /** Nullable columns appended at the end, in order (ADD COLUMN). */
  addColumns?: ColumnSpec[];
}

export interface PartitionEntry extends PartitionInfo {
  tableId: number;
}

/** Batches and KV values carry the schema id as an i16. */
const MAX_SCHEMA_ID = 0x7fff;
/** Writer ids reserved by one metadata write. */
const WRITER_ID_BLOCK = 1000;

/** Whether a creation carrying `token` is the one that registered `existing` (sent again by its client). */
const isRetryOf = (existing: { creation_token?: string }, token: string | undefined): boolean => token !== undefined && token !== '' && existing.creation_token === token;

// Names become store paths: one that is not an identifier (a '/' in it) could reach another node of the tree.
const dbPath = (db: string): string => {
  validateIdentifier('database', db);
  return `/databases/${db}`;
};
const tablePath = (p: TablePath): string => {
  validateIdentifier('table', p.table);
  return `${dbPath(p.database)}/tables/${p.table}`;
};

export class Coordinator {
  private queue: Promise<unknown> = Promise.resolve();
  private readonly pathsById = new Map<number, TablePath>();
  private readonly partitionsById = new Map<number, PartitionEntry>();
  /** Tables registered whose buckets are being created: nobody sees them before their buckets exist. */
  private readonly tablesWithoutBuckets = new Set<number>();
  private readonly schemaCache = new Map<string, Schema>();
  private autoPartitionTimer?: NodeJS.Timeout;
  /** Writer ids reserved in the store and not yet handed out: [next, end). */
  private writerIds = { next: 0n, end: 0n };
  private reservingWriterIds?: Promise<void>;
  private lifecycle?: BucketLifecycle;
  /** The one-process node keeps every bucket's only replica on its own tablet server: nothing to store. */
  private placement: BucketPlacement = {
    placeBuckets: (table) => {
      checkReplicationFactor(replicationFactorOf(table, this.options), 1);
      return [];
    },
  };
  /** Lake tiering: which table is tiered next and what the lake holds. */
  readonly tiering: LakeTieringManager;
  /** The registered KV snapshots of primary-key buckets (CommitKvSnapshot, GetLatestKvSnapshots). */
  readonly kvSnapshots: KvSnapshotRegistry;
  /** The committed remote logs of buckets (CommitRemoteLogManifest). */
  readonly remoteLogs: RemoteLogRegistry;
  /** What KV snapshot and remote log commits are fenced by: the one-process node's, or a cluster's ClusterController. */
  private kvSnapshotFence: BucketFence = ONE_NODE_FENCE;

  constructor(
    private readonly store: MetadataStore,
    private readonly options: Options,
    private readonly log: Logger,
    /** Times the automatic partitioning runs. */
    private readonly activity: ServerActivity,
    private readonly lakeCatalog?: LakeCatalog,
    /** Refuses creations while the data disk is full (DISK_WRITE_LOCKED). */
    private readonly disk?: { checkWritable(): void },
  ) {
    this.tiering = new LakeTieringManager(
      {
        store,
        tablePathById: (id) => this.pathsById.get(id),
        tableInfo: (p) => this.getTableInfo(p),
        lakeOffsetsChanged: (table, offsets) => this.lifecycle?.lakeOffsetsChanged(table, offsets),
        log,
      },
      options.durationMs('datalake.tiering.timeout'),
    );
    this.kvSnapshots = new KvSnapshotRegistry(store, options.int('kv.snapshot.num-retained'), log);
    this.remoteLogs = new RemoteLogRegistry(store);
    for (const db of store.children('/databases')) {
      for (const t of store.children(`${dbPath(db)}/tables`)) {
        const path = { database: db, table: t };
        const reg = store.get<TableRegistration>(tablePath(path))!;
        this.pathsById.set(reg.table_id, path);
        for (const name of store.children(`${tablePath(path)}/partitions`)) {
          const p = store.get<PartitionRegistration>(`${tablePath(path)}/partitions/${name}`)!;
          this.partitionsById.set(p.partition_id, { tableId: reg.table_id, partitionId: p.partition_id, partitionName: name, spec: p.spec });
        }
      }
    }
  }

  /**
   * Connects the tablet side (and, in a cluster, the placement of replicas on tablet servers),
   * creates the default database and starts the partition timer.
   */
  async start(lifecycle: BucketLifecycle, placement?: BucketPlacement, kvSnapshotFence?: BucketFence): Promise<void> {
    this.lifecycle = lifecycle;
    if (placement) this.placement = placement;
    if (kvSnapshotFence) this.kvSnapshotFence = kvSnapshotFence;
    if (this.store.children('/databases').length === 0) {
      await this.createDatabase(DEFAULT_DATABASE, { comment: 'default database' }, true);
    }
    // On a full disk the partitions ahead wait for the next round: the server starts, read-only.
    await this.runAutoPartitioning().catch((err: unknown) => {
      if (!isNoSpace(err)) throw err;
      this.log.warn({ err }, 'automatic partitions not created: the data disk is full');
    });
    this.tiering.start([...this.pathsById.values()].map((p) => this.getTableInfo(p)));
    const every = this.options.durationMs('auto-partition.check.interval');
    this.autoPartitionTimer = this.activity.every('auto-partition', every, () => this.runAutoPartitioning());
  }

  async stop(): Promise<void> {
    clearInterval(this.autoPartitionTimer);
    this.tiering.stop();
    await this.queue.catch(() => undefined);
  }

  // ------------------------------------------------------------------ reads

  listDatabases(): string[] {
    return this.store.children('/databases');
  }

  databaseExists(db: string): boolean {
    return this.store.get(dbPath(db)) !== undefined;
  }

  listTables(db: string): string[] {
    this.requireDatabase(db);
    return this.store.children(`${dbPath(db)}/tables`).filter((table) => this.tableExists({ database: db, table }));
  }

  tableExists(path: TablePath): boolean {
    const reg = this.store.get<TableRegistration>(tablePath(path));
    return reg !== undefined && !this.tablesWithoutBuckets.has(reg.table_id);
  }

  getTableInfo(path: TablePath): TableInfo {
    const reg = this.store.get<TableRegistration>(tablePath(path));
    if (!reg || this.tablesWithoutBuckets.has(reg.table_id)) {
      this.requireDatabase(path.database);
      throw new TributaryError('TABLE_NOT_EXIST', `table '${tablePathString(path)}' does not exist`);
    }
    return this.toTableInfo(path, reg);
  }

  getTableInfoById(tableId: number): TableInfo | undefined {
    const path = this.pathsById.get(tableId);
    return path ? this.getTableInfo(path) : undefined;
  }

  /** Schemas never change under an id (a re-created table gets a new table id), so they are cached. */
  schemaById(tableId: number, schemaId: number): Schema | undefined {
    const key = `${tableId}/${schemaId}`;
    let schema = this.schemaCache.get(key);
    if (!schema) {
      const path = this.pathsById.get(tableId);
      if (!path) return undefined;
      const json = this.store.get(`${tablePath(path)}/schemas/${schemaId}`);
      if (json === undefined) return undefined;
      schema = schemaFromJson(json);
      this.schemaCache.set(key, schema);
    }
    return schema;
  }

  getSchema(path: TablePath, schemaId?: number): { schemaId: number; schema: Schema } {
    const info = this.getTableInfo(path);
    const id = schemaId ?? info.schemaId;
    const json = this.store.get(`${tablePath(path)}/schemas/${id}`);
    if (json === undefined) throw new TributaryError('SCHEMA_NOT_EXIST', `schema ${id} of table '${tablePathString(path)}' does not exist`);
    return { schemaId: id, schema: schemaFromJson(json) };
  }

  /** Every table with its partitions, for the tablet side to open its buckets at start. */
  allTables(): { table: TableInfo; partitions: PartitionInfo[] }[] {
    return [...this.pathsById.values()].map((p) => {
      const table = this.getTableInfo(p);
      return { table, partitions: this.listPartitions(p) };
    });
  }

  listPartitions(path: TablePath, partialSpec: Record<string, string> = {}): PartitionInfo[] {
    const info = this.getTableInfo(path);
    for (const k of Object.keys(partialSpec)) {
      if (!info.partitionKeys.includes(k)) throw new TributaryError('PARTITION_SPEC_INVALID_EXCEPTION', `'${k}' is not a partition key of '${tablePathString(path)}'`);
    }
    return this.store
      .children(`${tablePath(path)}/partitions`)
      .map((name) => {
        const p = this.store.get<PartitionRegistration>(`${tablePath(path)}/partitions/${name}`)!;
        return { partitionId: p.partition_id, partitionName: name, spec: p.spec };
      })
      // A partition is known once its buckets exist (addPartition), so no reader sees it before.
      .filter((p) => this.partitionsById.has(p.partitionId) && Object.entries(partialSpec).every(([k, v]) => p.spec[k] === v));
  }

  partitionById(partitionId: number): PartitionEntry | undefined {
    return this.partitionsById.get(partitionId);
  }

  // ------------------------------------------------------------------ databases

  createDatabase(db: string, descriptor: { comment?: string }, ignoreIfExists: boolean): Promise<void> {
    return this.serially(async () => {
      validateIdentifier('database', db);
      if (this.databaseExists(db)) {
        if (ignoreIfExists) return;
        throw new TributaryError('DATABASE_ALREADY_EXIST', `database '${db}' already exists`);
      }
      this.disk?.checkWritable();
      const reg: DatabaseRegistration = { ...(descriptor.comment ? { comment: descriptor.comment } : {}), created_time: Date.now() };
      await this.store.commit([{ op: 'put', path: dbPath(db), value: reg }]);
      this.log.info({ database: db }, 'database created');
    });
  }

  dropDatabase(db: string, ignoreIfNotExists: boolean, cascade: boolean): Promise<void> {
    return this.serially(async () => {
      if (!this.databaseExists(db)) {
        if (ignoreIfNotExists) return;
        throw new TributaryError('DATABASE_NOT_EXIST', `database '${db}' does not exist`);
      }
      const tables = this.store.children(`${dbPath(db)}/tables`);
      if (tables.length > 0 && !cascade) {
        throw new TributaryError('DATABASE_NOT_EMPTY', `database '${db}' holds ${tables.length} table(s); drop them first or use CASCADE`);
      }
      const infos = tables.map((t) => this.getTableInfo({ database: db, table: t }));
      await this.store.commit([{ op: 'delete', path: dbPath(db), recursive: true }, ...infos.flatMap((info) => [...this.kvSnapshots.dropOps(info.tableId), ...this.remoteLogs.dropOps(info.tableId)])]);
      for (const info of infos) await this.forgetTable(info);
      this.log.info({ database: db, tables: tables.length }, 'database dropped');
    });
  }

  // ------------------------------------------------------------------ KV snapshots

  /** Registers a bucket leader's complete KV snapshot (CommitKvSnapshot, or the node's own tablet server), fenced by the epochs. */
  commitKvSnapshot(request: KvSnapshotCommit): Promise<void> {
    return this.kvSnapshots.commit(request, this.kvSnapshotFence);
  }

  /** Registers a bucket leader's uploaded remote log manifest (CommitRemoteLogManifest, or the node's own tablet server), fenced as KV snapshots are; then tells its replicas. */
  async commitRemoteLogManifest(request: RemoteLogCommit): Promise<void> {
    await this.remoteLogs.commit(request, this.kvSnapshotFence);
    this.lifecycle?.remoteLogCommitted?.(request.bucket, request.manifest);
  }

  // ------------------------------------------------------------------ tables

  /**
   * CREATE TABLE; returns the table id. `creationToken` names this one creation: a client sending
   * it again (its first request's answer was lost with the coordinator that committed it) gets the
   * table it created, instead of TABLE_ALREADY_EXIST.
   */
  createTable(path: TablePath, descriptor: TableDescriptor, ignoreIfExists: boolean, creationToken?: string): Promise<number> {
    return this.serially(async () => {
      validateIdentifier('table', path.table);
      this.requireDatabase(path.database);
      const existing = this.store.get<TableRegistration>(tablePath(path));
      if (existing) {
        if (ignoreIfExists || isRetryOf(existing, creationToken)) return existing.table_id;
        throw new TributaryError('TABLE_ALREADY_EXIST', `table '${tablePathString(path)}' already exists`);
      }
      const { schema, registration } = this.validateDescriptor(descriptor);
      this.disk?.checkWritable();
      const tableId = await this.store.nextId('table_id');
      const now = Date.now();
      const reg: TableRegistration = { ...registration, table_id: tableId, schema_id: 0, created_time: now, modified_time: now, ...(creationToken ? { creation_token: creationToken } : {}) };
      const info = this.toTableInfo(path, reg, schema);
      const placement = this.placement.placeBuckets(info);
      await this.syncLakeTable(info);
      this.tablesWithoutBuckets.add(tableId);
      try {
        await this.store.commit([
          { op: 'put', path: tablePath(path), value: reg },
          { op: 'put', path: `${tablePath(path)}/schemas/0`, value: schemaToJson(schema) },
          ...placement,
        ]);
        this.pathsById.set(tableId, path);
        if (info.partitionKeys.length === 0) await this.lifecycle?.createBuckets(info);
      } finally {
        this.tablesWithoutBuckets.delete(tableId);
      }
      this.tiering.tableChanged(info);
      this.log.info({ table: tablePathString(path), tableId, buckets: info.bucketCount, partitionKeys: info.partitionKeys }, 'table created');
      await this.autoPartition(info);
      return tableId;
    });
  }

  /**
   * DROP TABLE. The table's lake table stays (the lake keeps its history, readable by any Iceberg
   * engine; a table of the same name can be lake-enabled again only once it is gone: DROP LAKE
   * TABLE) unless `purge`, which deletes it too, after the table is gone and tiering has let go.
   */
  dropTable(path: TablePath, ignoreIfNotExists: boolean, purge = false): Promise<void> {
    return this.serially(async () => {
      if (!this.tableExists(path)) {
        if (ignoreIfNotExists) return;
        this.getTableInfo(path); // throws the precise error: database or table missing
      }
      const info = this.getTableInfo(path);
      await this.store.commit([{ op: 'delete', path: tablePath(path), recursive: true }, ...this.kvSnapshots.dropOps(info.tableId), ...this.remoteLogs.dropOps(info.tableId)]);
      await this.forgetTable(info);
      // Only the table's own lake table: never a namesake's left by an earlier drop.
      const purged = purge && this.lakeCatalog !== undefined && (await this.lakeCatalog.describeTable(path))?.tableId === info.tableId;
      if (purged) await this.lakeCatalog!.dropTable(path);
      this.log.info({ table: tablePathString(path), tableId: info.tableId, lakeTablePurged: purged }, 'table dropped');
    });
  }

  /** The lake tables of the warehouse, each with whether a live table owns it (SHOW LAKE TABLES). */
  async listLakeTables(): Promise<{ warehouse: string; tables: LakeTableListing[] }> {
    const lake = this.requireLake();
    const tables = await lake.listTables();
    return { warehouse: lake.warehouse, tables: tables.map((t) => ({ ...t, owned: this.ownsLakeTable(t) })) };
  }

  /** Deletes a lake table that no live table owns (DROP LAKE TABLE): LAKE_TABLE_IN_USE otherwise. */
  dropLakeTable(path: TablePath, ignoreIfNotExists: boolean): Promise<void> {
    return this.serially(async () => {
      const lake = this.requireLake();
      const entry = await lake.describeTable(path);
      if (!entry) {
        if (ignoreIfNotExists) return;
        throw new TributaryError('LAKE_TABLE_NOT_EXIST', `the lake holds no table ${tablePathString(path)}`);
      }
      if (this.ownsLakeTable(entry)) {
        throw new TributaryError('LAKE_TABLE_IN_USE', `lake table ${tablePathString(path)} belongs to table ${tablePathString(path)} (id ${entry.tableId}): drop that table with PURGE instead`);
      }
      await lake.dropTable(path);
      this.log.info({ table: tablePathString(path), tableId: entry.tableId }, 'lake table dropped');
    });
  }

  private ownsLakeTable(entry: LakeTableEntry): boolean {
    return entry.tableId !== undefined && this.store.get<TableRegistration>(tablePath(entry.path))?.table_id === entry.tableId;
  }

  private requireLake(): LakeCatalog {
    if (!this.lakeCatalog) throw new TributaryError('LAKE_STORAGE_NOT_CONFIGURED_EXCEPTION', 'this server has no lake configured (datalake.format)');
    return this.lakeCatalog;
  }

  /**
   * ALTER TABLE: SET/RESET of options (`value` undefined resets one to its default) and ADD COLUMN
   * (a new schema id whose added columns get the next field ids). The lake table follows first,
   * then one store commit holds the new schema, schema id, options and modified time.
   */
  alterTable(path: TablePath, changes: TableChanges, ignoreIfNotExists: boolean): Promise<void> {
    return this.serially(async () => {
      if (!this.tableExists(path) && ignoreIfNotExists) return;
      const before = this.getTableInfo(path); // throws the precise error: database or table missing
      const reg = { ...this.store.get<TableRegistration>(tablePath(path))! };
      const props = { ...reg.properties };
      for (const { key, value } of changes.options ?? []) {
        const def = optionDef(key);
        const isTableOption = def?.scope === 'table' || key.startsWith('table.') || key.startsWith('bucket.');
        if (isTableOption && !def?.alterable) {
          throw new TributaryError('INVALID_ALTER_TABLE_EXCEPTION', `option '${key}' cannot be changed after the table is created`);
        }
        if (value === undefined) delete props[key];
        else props[key] = value;
      }
      validateTableProperties(props);
      reg.properties = props;
      reg.modified_time = Date.now();
      const ops: MetadataOp[] = [];
      let schema = before.schema;
      if (changes.addColumns && changes.addColumns.length > 0) {
        if (reg.schema_id >= MAX_SCHEMA_ID) throw new TributaryError('INVALID_ALTER_TABLE_EXCEPTION', `table '${tablePathString(path)}' has reached the last schema id ${MAX_SCHEMA_ID}`);
        schema = addColumns(before.schema, changes.addColumns);
        reg.schema_id += 1;
        ops.push({ op: 'put', path: `${tablePath(path)}/schemas/${reg.schema_id}`, value: schemaToJson(schema) });
      }
      await this.syncLakeTable(this.toTableInfo(path, reg, schema));
      await this.store.commit([...ops, { op: 'put', path: tablePath(path), value: reg }]);
      const altered = this.toTableInfo(path, reg, schema);
      this.lifecycle?.tableAltered(altered);
      this.tiering.tableChanged(altered);
      const added = changes.addColumns?.map((c) => c.name);
      this.log.info({ table: tablePathString(path), options: changes.options, ...(added ? { addColumns: added, schemaId: reg.schema_id } : {}) }, 'table altered');
      await this.autoPartition(altered);
    });
  }

  // ------------------------------------------------------------------ partitions

  /** CREATE PARTITION; returns the partition id. `creationToken` as createTable's. */
  createPartition(path: TablePath, spec: Record<string, string>, ignoreIfExists: boolean, creationToken?: string): Promise<number> {
    return this.serially(() => this.addPartition(this.getTableInfo(path), spec, ignoreIfExists, creationToken));
  }

  dropPartition(path: TablePath, spec: Record<string, string>, ignoreIfNotExists: boolean): Promise<void> {
    return this.serially(async () => {
      const info = this.getTableInfo(path);
      this.requirePartitioned(info);
      const { name } = parsePartitionSpec(info.partitionKeys, spec);
      const reg = this.store.get<PartitionRegistration>(`${tablePath(path)}/partitions/${name}`);
      if (!reg) {
        if (ignoreIfNotExists) return;
        throw new TributaryError('PARTITION_NOT_EXISTS', `partition '${name}' of table '${tablePathString(path)}' does not exist`);
      }
      await this.removePartition(info, { partitionId: reg.partition_id, partitionName: name, spec: reg.spec });
    });
  }

  // ------------------------------------------------------------------ writers

  /**
   * A writer id no writer had before. Ids are reserved in the store WRITER_ID_BLOCK at a time, so
   * most writers need no metadata write (and get one on a full disk); the ids of a block not used
   * up before a restart are never handed out.
   */
  async allocateWriterId(): Promise<bigint> {
    while (this.writerIds.next >= this.writerIds.end) {
      this.reservingWriterIds ??= this.store.nextId('writer_id', WRITER_ID_BLOCK).then(
        (first) => {
          this.writerIds = { next: BigInt(first), end: BigInt(first + WRITER_ID_BLOCK) };
          this.reservingWriterIds = undefined;
        },
        (err: unknown) => {
          this.reservingWriterIds = undefined;
          throw err;
        },
      );
      await this.reservingWriterIds;
    }
    return this.writerIds.next++;
  }

  // ------------------------------------------------------------------ internals

  private serially<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(task, task);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private requireDatabase(db: string): void {
    if (!this.databaseExists(db)) throw new TributaryError('DATABASE_NOT_EXIST', `database '${db}' does not exist`);
  }

  private requirePartitioned(info: TableInfo): void {
    if (info.partitionKeys.length === 0) {
      throw new TributaryError('TABLE_NOT_PARTITIONED_EXCEPTION', `table '${tablePathString(info.path)}' is not partitioned`);
    }
  }

  private validateDescriptor(d: TableDescriptor): { schema: Schema; registration: Omit<TableRegistration, 'table_id' | 'schema_id' | 'created_time' | 'modified_time'> } {
    const schema = buildSchema(d.columns, d.primaryKey);
    const properties = { ...(d.properties ?? {}) };
    validateTableProperties(properties);
    const partitionKeys = d.partitionKeys ?? [];
    const bucketKeyOption = properties['bucket.key'];
    const declaredBucketKeys = d.bucketKeys ?? (bucketKeyOption ? bucketKeyOption.split(',').map((s) => s.trim()).filter(Boolean) : []);
    let bucketKeys = declaredBucketKeys;
    if (schema.primaryKey) {
      bucketKeys = validatePrimaryKeyTable(schema, partitionKeys, declaredBucketKeys, properties);
    } else {
      validateKeys(schema, partitionKeys, bucketKeys);
      validateLogTableOptions(properties);
    }
    const bucketCount = d.bucketCount ?? (properties['bucket.num'] ? Number(properties['bucket.num']) : this.options.int('default.bucket.number'));
    const maxBuckets = this.options.int('max.bucket.num');
    if (!Number.isInteger(bucketCount) || bucketCount < 1) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `bucket count must be a positive integer, got ${bucketCount}`);
    if (bucketCount > maxBuckets) throw new TributaryError('BUCKET_MAX_NUM_EXCEPTION', `bucket count ${bucketCount} exceeds max.bucket.num ${maxBuckets}`);
    delete properties['bucket.num'];
    delete properties['bucket.key'];
    // Bucketing is fixed at creation: a table born lake-enabled buckets like its lake (Iceberg's bucket transform).
    if (properties['table.datalake.enabled'] === 'true' && !properties['table.datalake.format']) properties['table.datalake.format'] = this.options.string('datalake.format')!;
    autoPartitionStrategy({ schema, partitionKeys, properties }); // validates the auto-partition options
    return {
      schema,
      registration: { partition_keys: partitionKeys, bucket_count: bucketCount, bucket_keys: bucketKeys, properties, ...(d.comment ? { comment: d.comment } : {}) },
    };
  }

  /** Creates or evolves the lake table of a lake-enabled table before its metadata is committed. */
  private async syncLakeTable(info: TableInfo): Promise<void> {
    if (!isLakeEnabled(info)) return;
    await this.requireLake().syncTable(info);
  }

  private toTableInfo(path: TablePath, reg: TableRegistration, schema = schemaFromJson(this.store.get(`${tablePath(path)}/schemas/${reg.schema_id}`))): TableInfo {
    return {
      path,
      tableId: reg.table_id,
      schemaId: reg.schema_id,
      schema,
      partitionKeys: reg.partition_keys,
      bucketCount: reg.bucket_count,
      bucketKeys: reg.bucket_keys,
      properties: reg.properties,
      ...(reg.comment ? { comment: reg.comment } : {}),
      createdTime: reg.created_time,
      modifiedTime: reg.modified_time,
    };
  }

  private async forgetTable(info: TableInfo): Promise<void> {
    this.pathsById.delete(info.tableId);
    this.tiering.tableDropped(info.tableId);
    for (const [id, p] of this.partitionsById) if (p.tableId === info.tableId) this.partitionsById.delete(id);
    await this.lifecycle?.dropBuckets(info);
  }

  private async addPartition(info: TableInfo, spec: Record<string, string>, ignoreIfExists: boolean, creationToken?: string): Promise<number> {
    this.requirePartitioned(info);
    const { values, name } = parsePartitionSpec(info.partitionKeys, spec);
    const regPath = `${tablePath(info.path)}/partitions/${name}`;
    const existing = this.store.get<PartitionRegistration>(regPath);
    if (existing) {
      if (ignoreIfExists || isRetryOf(existing, creationToken)) return existing.partition_id;
      throw new TributaryError('PARTITION_ALREADY_EXISTS', `partition '${name}' of table '${tablePathString(info.path)}' already exists`);
    }
    const max = this.options.int('max.partition.num');
    if (this.store.children(`${tablePath(info.path)}/partitions`).length >= max) {
      throw new TributaryError('PARTITION_MAX_NUM_EXCEPTION', `table '${tablePathString(info.path)}' already has max.partition.num = ${max} partitions`);
    }
    this.disk?.checkWritable();
    const partitionId = await this.store.nextId('partition_id');
    const normalized = Object.fromEntries(info.partitionKeys.map((k, i) => [k, values[i]]));
    const partition = { partitionId, partitionName: name, spec: normalized };
    await this.store.commit([
      { op: 'put', path: regPath, value: { partition_id: partitionId, spec: normalized, created_time: Date.now(), ...(creationToken ? { creation_token: creationToken } : {}) } satisfies PartitionRegistration },
      ...this.placement.placeBuckets(info, partition),
    ]);
    await this.lifecycle?.createBuckets(info, partition);
    this.partitionsById.set(partitionId, { ...partition, tableId: info.tableId });
    this.log.info({ table: tablePathString(info.path), partition: name, partitionId }, 'partition created');
    return partitionId;
  }

  private async removePartition(info: TableInfo, partition: PartitionInfo): Promise<void> {
    await this.store.commit([{ op: 'delete', path: `${tablePath(info.path)}/partitions/${partition.partitionName}` } satisfies MetadataOp, ...this.kvSnapshots.dropOps(info.tableId, partition.partitionId), ...this.remoteLogs.dropOps(info.tableId, partition.partitionId)]);
    this.partitionsById.delete(partition.partitionId);
    await this.lifecycle?.dropBuckets(info, partition);
    this.log.info({ table: tablePathString(info.path), partition: partition.partitionName }, 'partition dropped');
  }

  /** Creates the partitions ahead and drops the expired ones of one auto-partitioned table. */
  private async autoPartition(info: TableInfo, nowMs = Date.now()): Promise<void> {
    const strategy = autoPartitionStrategy(info);
    if (!strategy) return;
    const existing = this.listPartitions(info.path);
    const plan = autoPartitionPlan(strategy, nowMs, existing.map((p) => p.spec[strategy.key]));
    for (const value of plan.toCreate) await this.addPartition(info, { [strategy.key]: value }, true);
    const drop = new Set(plan.toDrop);
    for (const p of existing) if (drop.has(p.spec[strategy.key])) await this.removePartition(info, p);
  }

  private async runAutoPartitioning(): Promise<void> {
    for (const path of [...this.pathsById.values()]) {
      await this.serially(async () => {
        if (!this.tableExists(path)) return;
        const info = this.getTableInfo(path);
        await this.autoPartition(info);
      });
    }
  }
}
