/**
 * The DuckDB SQL of an Iceberg table's reads (LakeTable, lake-format.ts): the rows of a snapshot
 * with its delete files applied (`table$lake`, union reads, compaction), the table's snapshots
 * (`table$lake$snapshots`, LAKE_SNAPSHOT_COLUMNS) and the live files of a snapshot
 * (`table$lake$files`, LAKE_FILE_COLUMNS). DuckDB has no Iceberg extension offline, so the scan is
 * planned here (scan.ts) and DuckDB gets plain file lists. The SQL of a snapshot's rows:
 *
 *   WITH files(file, path, location) AS (VALUES (0, '<path>', '<location>'), ...)
 *            -- every data and delete file: its index, the path DuckDB opens and, for position
 *            -- deletes, the location as the manifest wrote it
 *      , applies AS (...)      -- (data_path, data_location, delete_path) per delete file that
 *                              -- applies to a data file, from VALUES (data file, first, last
 *                              -- delete file index) ranges that planScan's lists compress into
 *      , eq0 AS (SELECT a.data_path, r.f<id>... FROM read_parquet([<equality delete files>], ...) AS r
 *                JOIN applies AS a ON a.delete_path = r.filename)   -- one per equality id set
 *      , pos AS (SELECT a.data_path, r.f2147483545 AS pos FROM read_parquet([<position delete files>], ...) AS r
 *                JOIN applies AS a ON a.delete_path = r.filename AND a.data_location = r.f2147483546)
 *   SELECT d.f<id> AS "<column>", ... FROM read_parquet([<data files>], ...) AS d
 *     ANTI JOIN eq0 ON eq0.data_path = d.filename AND eq0.f<id> IS NOT DISTINCT FROM d.f<id> ...
 *     ANTI JOIN pos ON pos.data_path = d.filename AND pos.pos = d.file_row_number
 *
 * Every read_parquet resolves columns by Iceberg field id, `schema = map{<id>: {name: 'f<id>',
 * type: '<DuckDB type>', default_value: NULL}, ...}`, so renamed columns read right and a column
 * added after a file was written reads as NULL from it; `hive_partitioning = false` keeps the
 * partition directories (`__bucket=0/`) from adding columns. DuckDB reads such a scan on one
 * thread, though, so when names alone are as good as ids it reads by name instead:
 *   (SELECT CAST("<column>" AS <type>) AS f<id>, ..., filename FROM read_parquet([...], union_by_name = true, ...))
 * which is when every schema of the table gives each of its field ids one name and each name one
 * id (no renames, no name reused: Tributary only adds columns), and every file's metrics say which
 * field ids it holds (a field no file holds reads as a NULL constant; one that some files lack is
 * NULL from those, by union_by_name). Equality deletes compare NULL-safely
 * (spec: NULL equals NULL). Without delete files the SELECT reads the data files alone; without
 * data files it is an empty table of the schema's columns.
 *
 * Paths are passed as the manifests hold them (`file:` URIs become paths), or as the caller's
 * local copies of remote files (`pathOf`), as quoted literals.
 * DuckDB expands `*`, `?` and `[` in a path as a glob, so such paths are refused.
 */
import { TributaryError } from '../../common/errors.js';
import { LAKE_FILE_COLUMNS, LAKE_SNAPSHOT_COLUMNS } from '../lake-format.js';
import { SUMMARY_BUCKET_OFFSETS, SUMMARY_TIERING_EPOCH } from '../tiered-offsets.js';
import { type DataFile, FileContent } from './data-file.js';
import { isLive, localPath, readManifest, readManifestList, type ScanTask } from './scan.js';
import { currentSchema, currentSnapshot, partitionSpecById, snapshotById, type TableMetadata } from './table-metadata.js';
import { decimalOf, fixedLengthOf, type IcebergField, type IcebergPrimitive, type IcebergSchema } from './types.js';

/** Field ids of position delete files (spec: "Reserved Field IDs"). */
const DELETE_FILE_PATH_ID = 2147483546;
const DELETE_POS_ID = 2147483545;

const literal = (s: string): string => `'${s.replaceAll("'", "''")}'`;
const identifier = (name: string): string => `"${name.replaceAll('"', '""')}"`;
/** The name a field has inside the query: never one of read_parquet's `filename`, `file_row_number`. */
const inner = (id: number): string => `f${id}`;

/** DuckDB's type for an Iceberg primitive. */
export function duckTypeOfIceberg(type: IcebergPrimitive): string {
  switch (type) {
    case 'boolean':
      return 'BOOLEAN';
    case 'int':
      return 'INTEGER';
    case 'long':
      return 'BIGINT';
    case 'float':
      return 'FLOAT';
    case 'double':
      return 'DOUBLE';
    case 'date':
      return 'DATE';
    case 'time':
      return 'TIME';
    case 'timestamp':
      return 'TIMESTAMP';
    case 'timestamptz':
      return 'TIMESTAMPTZ';
    case 'string':
      return 'VARCHAR';
    case 'binary':
      return 'BLOB';
    case 'uuid':
      return 'UUID';
  }
  const decimal = decimalOf(type);
  if (decimal) return `DECIMAL(${decimal.precision},${decimal.scale})`;
  if (fixedLengthOf(type) !== undefined) return 'BLOB';
  throw new TributaryError('INVALID_TYPE', `lake column type ${type} cannot be read`);
}

/**
 * The SQL whose result is the rows of some scan tasks of one planned scan (e.g. one partition's),
 * their delete files applied, in `schema` (the current one by default).
 */
/**
 * `pathOf` gives the local path DuckDB opens for a file's location: by default the location
 * itself (a local warehouse), else the file cache's copy (storage/stores.ts localCopies).
 */
export function scanTasksSql(metadata: TableMetadata, tasks: readonly ScanTask[], options: { schema?: IcebergSchema; columns?: Iterable<string>; pathOf?: (location: string) => string } = {}): string {
  const schema = options.schema ?? currentSchema(metadata);
  const fields = chosenFields(schema, options.columns);
  if (tasks.length === 0) {
    return `SELECT ${fields.map((f) => `CAST(NULL AS ${duckTypeOfIceberg(f.type)}) AS ${identifier(f.name)}`).join(', ')} LIMIT 0`;
  }
  return new ScanSql(metadata, schema, fields, tasks, options.pathOf ?? localPath).sql();
}

/** The SQL whose result is one row per snapshot of a lake table (LAKE_SNAPSHOT_COLUMNS), oldest first. */
export function lakeSnapshotsSql(metadata: TableMetadata): string {
  const count = (summary: Record<string, string>, key: string, absent: string): string => (/^\d+$/.test(summary[key] ?? '') ? summary[key] : absent);
  const optionalText = (v: string | undefined): string => (v === undefined ? 'NULL' : literal(v));
  const rows = [...metadata.snapshots]
    .sort((a, b) => (a.sequenceNumber < b.sequenceNumber ? -1 : a.sequenceNumber > b.sequenceNumber ? 1 : 0))
    .map((s) => [
      String(s.snapshotId),
      s.parentSnapshotId === null ? 'NULL' : String(s.parentSnapshotId),
      String(s.sequenceNumber),
      literal(new Date(s.timestampMs).toISOString()),
      literal(s.summary.operation),
      // The spec's summary leaves out added metrics that are zero; a missing total is unknown.
      count(s.summary, 'added-records', '0'),
      count(s.summary, 'total-records', 'NULL'),
      count(s.summary, 'added-data-files', '0'),
      count(s.summary, 'added-delete-files', '0'),
      count(s.summary, SUMMARY_TIERING_EPOCH, 'NULL'),
      optionalText(s.summary[SUMMARY_BUCKET_OFFSETS]),
      s.snapshotId === metadata.currentSnapshotId ? 'TRUE' : 'FALSE',
    ]);
  const select = (value: (i: number) => string) => LAKE_SNAPSHOT_COLUMNS.map(([column, type], i) => `CAST(${value(i)} AS ${type}) AS ${identifier(column)}`).join(', ');
  if (rows.length === 0) return `SELECT ${select(() => 'NULL')} LIMIT 0`;
  const aliases = LAKE_SNAPSHOT_COLUMNS.map((_, i) => `c${i}`);
  return `SELECT ${select((i) => aliases[i])} FROM (VALUES ${rows.map((r) => `(${r.join(', ')})`).join(', ')}) AS v(${aliases.join(', ')})`;
}

const CONTENT_NAMES: Record<FileContent, string> = {
  [FileContent.DATA]: 'data',
  [FileContent.POSITION_DELETES]: 'position_deletes',
  [FileContent.EQUALITY_DELETES]: 'equality_deletes',
};

/**
 * The SQL whose result is one row per live file (data and delete files) of a snapshot of lake
 * table `db.table` with `metadata` (the current snapshot by default), LAKE_FILE_COLUMNS, in manifest order. `partition` is JSON:
 * partition field name → value (long values beyond 2^53 as strings, binary values as hex).
 */
export async function lakeFilesSql(metadata: TableMetadata, db: string, table: string, snapshotId?: bigint): Promise<string> {
  const snapshot = snapshotId === undefined ? currentSnapshot(metadata) : snapshotById(metadata, snapshotId);
  if (snapshotId !== undefined && !snapshot) throw new TributaryError('LAKE_SNAPSHOT_NOT_EXIST', `lake snapshot ${snapshotId} is not in lake table ${db}.${table}`);
  const json = (v: unknown): unknown => (typeof v === 'bigint' ? (Number.isSafeInteger(Number(v)) ? Number(v) : String(v)) : v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v);
  const rows: string[] = [];
  for (const manifest of snapshot ? await readManifestList(snapshot.manifestList) : []) {
    const names = partitionSpecById(metadata, manifest.partitionSpecId).fields.map((f) => f.name);
    for (const e of (await readManifest(manifest)).entries) {
      if (!isLive(e)) continue;
      const file = e.dataFile;
      const partition = JSON.stringify(Object.fromEntries(names.map((n, i) => [n, json(file.partition[i])])));
      rows.push(`(${[literal(file.filePath), literal(CONTENT_NAMES[file.content]), literal(partition), file.recordCount, file.fileSizeInBytes, e.sequenceNumber, e.snapshotId].join(', ')})`);
    }
  }
  const select = (value: (i: number) => string) => LAKE_FILE_COLUMNS.map(([column, type], i) => `CAST(${value(i)} AS ${type}) AS ${identifier(column)}`).join(', ');
  if (rows.length === 0) return `SELECT ${select(() => 'NULL')} LIMIT 0`;
  const aliases = LAKE_FILE_COLUMNS.map((_, i) => `c${i}`);
  return `SELECT ${select((i) => aliases[i])} FROM (VALUES ${rows.join(', ')}) AS v(${aliases.join(', ')})`;
}

/**
 * The snapshot a time-travel read at `epochMicros` reads: the last one to become current at or
 * before then (the snapshot log), still in the metadata.
 */
export function snapshotAsOf(metadata: TableMetadata, epochMicros: bigint, table: string): bigint {
  const at = [...metadata.snapshotLog].reverse().find((e) => BigInt(e.timestampMs) * 1000n <= epochMicros && snapshotById(metadata, e.snapshotId));
  if (!at) throw new TributaryError('LAKE_SNAPSHOT_NOT_EXIST', `the lake table of '${table}' has no snapshot at or before ${new Date(Number(epochMicros / 1000n)).toISOString()}`);
  return at.snapshotId;
}

/** A time-travel read uses the schema of its snapshot; the current snapshot, the current schema. */
export function schemaOf(metadata: TableMetadata, snapshotId: bigint | undefined): IcebergSchema {
  const schemaId = snapshotId === undefined ? undefined : snapshotById(metadata, snapshotId)?.schemaId;
  return metadata.schemas.find((s) => s['schema-id'] === schemaId) ?? currentSchema(metadata);
}

/** The fields named in `columns`; at least one, so that row counts survive a read of no column. */
export function chosenFields(schema: IcebergSchema, columns: Iterable<string> | undefined): IcebergField[] {
  if (schema.fields.length === 0) throw new TributaryError('INVALID_TABLE_EXCEPTION', 'the lake table has no columns');
  if (columns === undefined) return schema.fields;
  const wanted = new Set([...columns].map((c) => c.toLowerCase()));
  const chosen = schema.fields.filter((f) => wanted.has(f.name.toLowerCase()));
  if (chosen.length > 0) return chosen;
  return [schema.fields.find((f) => f.type !== 'string' && f.type !== 'binary') ?? schema.fields[0]];
}

/** Builds the SQL of one planned scan (see the header). */
class ScanSql {
  /** Index by path of every file named in the `files` list. */
  private readonly fileIndex = new Map<string, number>();
  private readonly files: DataFile[] = [];
  /** Data file index, first and last delete file index: the `applies` ranges. */
  private readonly ranges: [number, number, number][] = [];
  /** Equality delete files by their sorted equality field ids. */
  private readonly equality = new Map<string, { ids: number[]; files: DataFile[] }>();
  private readonly positional: DataFile[] = [];
  /** Every schema of the table names each field id alike and each name has one id: a name is as good as an id. */
  private readonly namesAreIds: boolean;

  constructor(
    private readonly metadata: TableMetadata,
    private readonly schema: IcebergSchema,
    private readonly fields: IcebergField[],
    private readonly tasks: readonly ScanTask[],
    private readonly pathOf: (location: string) => string,
  ) {
    this.namesAreIds = namesAreIds(metadata);
    // Older files first: their delete lists are the longer ones, which newer files of the same
    // partition share the tail of, so indices handed out in this order form few ranges.
    const ordered = [...tasks].sort((a, b) => (a.dataSequenceNumber < b.dataSequenceNumber ? -1 : a.dataSequenceNumber > b.dataSequenceNumber ? 1 : 0));
    for (const task of ordered) {
      if (task.deletes.length === 0) continue;
      const dataIndex = this.indexOf(task.file);
      const indices = task.deletes.map((d) => this.indexOf(d)).sort((a, b) => a - b);
      let first = indices[0];
      for (let i = 1; i <= indices.length; i++) {
        if (i < indices.length && indices[i] === indices[i - 1] + 1) continue;
        this.ranges.push([dataIndex, first, indices[i - 1]]);
        first = indices[i];
      }
    }
  }

  sql(): string {
    const dataIds = new Set(this.fields.map((f) => f.id));
    for (const group of this.equality.values()) for (const id of group.ids) dataIds.add(id);
    const dataFields = [...dataIds].map((id) => this.field(id));
    const select = `SELECT ${this.fields.map((f) => `d.${inner(f.id)} AS ${identifier(f.name)}`).join(', ')}`;
    const dataFiles = this.tasks.map((t) => t.file);
    if (this.files.length === 0) return `${select} FROM ${this.readParquet(dataFiles, dataFields, [])} AS d`;

    const ctes = [
      `files(file, path, location) AS (VALUES ${this.files.map((f, i) => `(${i}, ${literal(this.pathOf(f.filePath))}, ${literal(f.filePath)})`).join(', ')})`,
      'applies AS (SELECT d.path AS data_path, d.location AS data_location, x.path AS delete_path ' +
        'FROM (SELECT data_file, unnest(range(first_delete, last_delete + 1)) AS delete_file ' +
        `FROM (VALUES ${this.ranges.map((r) => `(${r.join(', ')})`).join(', ')}) AS r(data_file, first_delete, last_delete)) AS r ` +
        'JOIN files AS d ON d.file = r.data_file JOIN files AS x ON x.file = r.delete_file)',
    ];
    const antiJoins: string[] = [];
    [...this.equality.values()].forEach(({ ids, files }, i) => {
      const name = `eq${i}`;
      const keys = ids.map((id) => this.field(id));
      ctes.push(
        `${name} AS (SELECT a.data_path, ${keys.map((k) => `r.${inner(k.id)}`).join(', ')} ` +
          `FROM ${this.readParquet(files, keys, ['filename'])} AS r JOIN applies AS a ON a.delete_path = r.filename)`,
      );
      antiJoins.push(`ANTI JOIN ${name} ON ${name}.data_path = d.filename${keys.map((k) => ` AND ${name}.${inner(k.id)} IS NOT DISTINCT FROM d.${inner(k.id)}`).join('')}`);
    });
    if (this.positional.length > 0) {
      const positionFields: IcebergField[] = [
        { id: DELETE_FILE_PATH_ID, name: 'file_path', required: true, type: 'string' },
        { id: DELETE_POS_ID, name: 'pos', required: true, type: 'long' },
      ];
      ctes.push(
        `pos AS (SELECT a.data_path, r.${inner(DELETE_POS_ID)} AS pos ` +
          `FROM ${this.readParquet(this.positional, positionFields, ['filename'])} AS r ` +
          `JOIN applies AS a ON a.delete_path = r.filename AND a.data_location = r.${inner(DELETE_FILE_PATH_ID)})`,
      );
      antiJoins.push('ANTI JOIN pos ON pos.data_path = d.filename AND pos.pos = d.file_row_number');
    }
    const data = this.readParquet(dataFiles, dataFields, this.positional.length > 0 ? ['filename', 'file_row_number'] : ['filename']);
    return `WITH ${ctes.join(',\n')}\n${select} FROM ${data} AS d\n${antiJoins.join('\n')}`;
  }

  private indexOf(file: DataFile): number {
    let index = this.fileIndex.get(file.filePath);
    if (index !== undefined) return index;
    index = this.files.length;
    this.fileIndex.set(file.filePath, index);
    this.files.push(file);
    if (file.content === FileContent.POSITION_DELETES) this.positional.push(file);
    if (file.content === FileContent.EQUALITY_DELETES) {
      const ids = [...(file.equalityIds ?? [])].sort((a, b) => a - b);
      if (ids.length === 0) throw new TributaryError('INVALID_TABLE_EXCEPTION', `equality delete file ${file.filePath} has no equality field ids`);
      const key = ids.join(',');
      const group = this.equality.get(key);
      if (group) group.files.push(file);
      else this.equality.set(key, { ids, files: [file] });
    }
    return index;
  }

  /** read_parquet of `files` as the fields `f<id>` (see the header), by name when that is as good as by id. */
  private readParquet(files: readonly DataFile[], fields: readonly IcebergField[], extra: readonly FileColumn[]): string {
    const held = files.every((f) => f.valueCounts && f.valueCounts.size > 0) ? new Set(files.flatMap((f) => [...f.valueCounts!.keys()])) : undefined;
    const locations = files.map((f) => f.filePath);
    if (!held || !this.namesAreIds) return readParquetById(parquetPaths(locations, this.pathOf), fields, extra);
    const columns = fields.map((f) => `CAST(${held.has(f.id) ? identifier(f.name) : 'NULL'} AS ${duckTypeOfIceberg(f.type)}) AS ${inner(f.id)}`);
    const options = extra.map((c) => `, ${c} = true`).join('');
    return `(SELECT ${[...columns, ...extra].join(', ')} FROM read_parquet([${parquetPaths(locations, this.pathOf).join(', ')}], union_by_name = true, hive_partitioning = false${options}))`;
  }

  /** A field by id: from the read schema, else (a delete key column dropped since) the newest schema that has it. */
  private field(id: number): IcebergField {
    const found = this.schema.fields.find((f) => f.id === id) ?? [...this.metadata.schemas].reverse().flatMap((s) => s.fields).find((f) => f.id === id);
    if (!found) throw new TributaryError('INVALID_TABLE_EXCEPTION', `field id ${id} of a delete file is in no schema of the lake table`);
    return found;
  }
}

/** read_parquet's columns that say where a row comes from. */
type FileColumn = 'filename' | 'file_row_number';

/** Paths as DuckDB literals; a path DuckDB would expand as a glob is refused. */
function parquetPaths(locations: readonly string[], pathOf: (location: string) => string): string[] {
  return locations.map((location) => {
    const path = pathOf(location);
    if (/[*?[]/.test(path)) throw new TributaryError('STORAGE_EXCEPTION', `cannot read lake file ${path}: DuckDB would take its * ? or [ as a glob`);
    return literal(path);
  });
}

/** read_parquet of the files, columns resolved by field id (see the header). */
function readParquetById(paths: readonly string[], fields: readonly IcebergField[], extra: readonly FileColumn[]): string {
  const schema = fields.map((f) => `${f.id}: {name: '${inner(f.id)}', type: ${literal(duckTypeOfIceberg(f.type))}, default_value: NULL}`).join(', ');
  return `read_parquet([${paths.join(', ')}], schema = map{${schema}}, hive_partitioning = false${extra.map((c) => `, ${c} = true`).join('')})`;
}

/** True when every schema gives each top-level field id one name and each name (in any case) one id, and no field is nested. */
function namesAreIds(metadata: TableMetadata): boolean {
  const nameOf = new Map<number, string>();
  const idOf = new Map<string, number>();
  for (const schema of metadata.schemas) {
    for (const f of schema.fields) {
      if (typeof f.type !== 'string') return false;
      // DuckDB matches names case-insensitively.
      const name = f.name.toLowerCase();
      if ((nameOf.get(f.id) ?? name) !== name || (idOf.get(name) ?? f.id) !== f.id) return false;
      nameOf.set(f.id, name);
      idOf.set(name, f.id);
    }
  }
  return true;
}
