/**
 * Iceberg v2 table metadata (spec: "Table Metadata", "Snapshots", "Snapshot References" and
 * Appendix C), the JSON document a catalog stores as `metadata/v<N>.metadata.json`:
 *
 *   metadata := { "format-version": 2, "table-uuid": uuid, "location": string,
 *                 "last-sequence-number": long, "last-updated-ms": long, "last-column-id": int,
 *                 "current-schema-id": int, "schemas": [schema…],
 *                 "default-spec-id": int, "partition-specs": [spec…], "last-partition-id": int,
 *                 "default-sort-order-id": int, "sort-orders": [sort-order…],
 *                 "properties": {string: string},
 *                 "current-snapshot-id": long (-1 = none, as v2 writers put it),
 *                 "refs": {name: ref}, "snapshots": [snapshot…],
 *                 "snapshot-log": [{"timestamp-ms": long, "snapshot-id": long}…],
 *                 "metadata-log": [{"timestamp-ms": long, "metadata-file": string}…] }
 *   snapshot := { "snapshot-id": long, "parent-snapshot-id"?: long, "sequence-number": long,
 *                 "timestamp-ms": long, "manifest-list": string,
 *                 "summary": {"operation": "append"|"replace"|"overwrite"|"delete", string: string…},
 *                 "schema-id"?: int }
 *   ref      := { "snapshot-id": long, "type": "branch"|"tag", "min-snapshots-to-keep"?: int,
 *                 "max-snapshot-age-ms"?: long, "max-ref-age-ms"?: long }
 *   spec     := { "spec-id": int, "fields": [{"source-id": int, "field-id": int, "name": string,
 *                 "transform": string}…] }
 *   sort-order := { "order-id": int, "fields": [{"transform": string, "source-id": int,
 *                 "direction": "asc"|"desc", "null-order": "nulls-first"|"nulls-last"}…] }
 *   schema   := see types.ts
 *
 * Snapshot ids are random 63-bit numbers, beyond JavaScript's exact integers. They are bigint in
 * memory; the serializer writes them as exact JSON integers and the parser quotes long integer
 * literals before JSON.parse so that no digit is lost. Schemas, specs and sort orders stay in their
 * JSON form because manifests embed them verbatim.
 */
import crypto from 'node:crypto';
import { TributaryError } from '../../common/errors.js';
import type { IcebergSchema } from './types.js';

export const FORMAT_VERSION = 2;
/** Partition field ids start at 1000; an unpartitioned table's last partition id is 999. */
const UNPARTITIONED_LAST_PARTITION_ID = 999;
export const MAIN_BRANCH = 'main';

export interface PartitionField {
  'source-id': number;
  'field-id': number;
  name: string;
  transform: string;
}

export interface PartitionSpec {
  'spec-id': number;
  fields: PartitionField[];
}

export interface SortField {
  transform: string;
  'source-id': number;
  direction: 'asc' | 'desc';
  'null-order': 'nulls-first' | 'nulls-last';
}

export interface SortOrder {
  'order-id': number;
  fields: SortField[];
}

export type SnapshotOperation = 'append' | 'replace' | 'overwrite' | 'delete';

export type SnapshotSummary = { operation: SnapshotOperation } & Record<string, string>;

export interface Snapshot {
  snapshotId: bigint;
  parentSnapshotId: bigint | null;
  sequenceNumber: bigint;
  timestampMs: number;
  manifestList: string;
  summary: SnapshotSummary;
  schemaId?: number;
}

export interface SnapshotRef {
  snapshotId: bigint;
  type: 'branch' | 'tag';
  minSnapshotsToKeep?: number;
  maxSnapshotAgeMs?: number;
  maxRefAgeMs?: number;
}

export interface SnapshotLogEntry {
  timestampMs: number;
  snapshotId: bigint;
}

export interface MetadataLogEntry {
  timestampMs: number;
  metadataFile: string;
}

export interface TableMetadata {
  formatVersion: typeof FORMAT_VERSION;
  tableUuid: string;
  location: string;
  lastSequenceNumber: bigint;
  lastUpdatedMs: number;
  lastColumnId: number;
  schemas: IcebergSchema[];
  currentSchemaId: number;
  partitionSpecs: PartitionSpec[];
  defaultSpecId: number;
  lastPartitionId: number;
  properties: Record<string, string>;
  currentSnapshotId: bigint | null;
  snapshots: Snapshot[];
  snapshotLog: SnapshotLogEntry[];
  metadataLog: MetadataLogEntry[];
  sortOrders: SortOrder[];
  defaultSortOrderId: number;
  refs: Record<string, SnapshotRef>;
}

export interface NewTableOptions {
  location: string;
  schema: IcebergSchema;
  spec: PartitionSpec;
  sortOrder: SortOrder;
  properties?: Record<string, string>;
}

/** Metadata of a new table without snapshots; ids of schema, spec and sort order are kept. */
export function newTableMetadata(options: NewTableOptions): TableMetadata {
  const { location, schema, spec, sortOrder } = options;
  const fieldIds = new Set(schema.fields.map((f) => f.id));
  for (const f of spec.fields) {
    if (!fieldIds.has(f['source-id'])) invalid(`partition field ${f.name} has unknown source id ${f['source-id']}`);
  }
  for (const f of sortOrder.fields) {
    if (!fieldIds.has(f['source-id'])) invalid(`sort field has unknown source id ${f['source-id']}`);
  }
  if ((sortOrder['order-id'] === 0) !== (sortOrder.fields.length === 0)) {
    invalid('sort order id 0 is reserved for, and required by, the unsorted order');
  }
  return {
    formatVersion: FORMAT_VERSION,
    tableUuid: crypto.randomUUID(),
    location: location.replace(/\/+$/, ''),
    lastSequenceNumber: 0n,
    lastUpdatedMs: Date.now(),
    lastColumnId: Math.max(0, ...schema.fields.map((f) => f.id)),
    schemas: [schema],
    currentSchemaId: schema['schema-id'],
    partitionSpecs: [spec],
    defaultSpecId: spec['spec-id'],
    lastPartitionId: Math.max(UNPARTITIONED_LAST_PARTITION_ID, ...spec.fields.map((f) => f['field-id'])),
    properties: { ...options.properties },
    currentSnapshotId: null,
    snapshots: [],
    snapshotLog: [],
    metadataLog: [],
    sortOrders: [sortOrder],
    defaultSortOrderId: sortOrder['order-id'],
    refs: {},
  };
}

export function currentSnapshot(metadata: TableMetadata): Snapshot | undefined {
  return metadata.currentSnapshotId === null ? undefined : snapshotById(metadata, metadata.currentSnapshotId);
}

export function snapshotById(metadata: TableMetadata, snapshotId: bigint): Snapshot | undefined {
  return metadata.snapshots.find((s) => s.snapshotId === snapshotId);
}

/** The snapshot and its ancestors, newest first, as far as they are still in the metadata. */
export function ancestorsOf(metadata: TableMetadata, snapshotId: bigint | null): Snapshot[] {
  const byId = new Map(metadata.snapshots.map((s) => [s.snapshotId, s]));
  const out: Snapshot[] = [];
  for (let s = snapshotId === null ? undefined : byId.get(snapshotId); s; s = s.parentSnapshotId === null ? undefined : byId.get(s.parentSnapshotId)) {
    out.push(s);
  }
  return out;
}

export function currentSchema(metadata: TableMetadata): IcebergSchema {
  const schema = metadata.schemas.find((s) => s['schema-id'] === metadata.currentSchemaId);
  if (!schema) throw new TributaryError('INVALID_TABLE_EXCEPTION', `current schema ${metadata.currentSchemaId} is missing`);
  return schema;
}

export function partitionSpecById(metadata: TableMetadata, specId: number): PartitionSpec {
  const spec = metadata.partitionSpecs.find((s) => s['spec-id'] === specId);
  if (!spec) throw new TributaryError('INVALID_TABLE_EXCEPTION', `partition spec ${specId} is missing`);
  return spec;
}

/** A non-negative integer table property, or `fallback` when it is absent or malformed. */
export function intProperty(metadata: TableMetadata, key: string, fallback: number): number {
  const value = Number(metadata.properties[key] ?? Number.NaN);
  return Number.isSafeInteger(value) && value >= 0 ? value : fallback;
}

/** A fresh positive 63-bit snapshot id that no snapshot of the table uses. */
export function newSnapshotId(metadata: TableMetadata): bigint {
  for (;;) {
    const id = crypto.randomBytes(8).readBigUInt64BE() & 0x7fff_ffff_ffff_ffffn;
    if (id !== 0n && !snapshotById(metadata, id)) return id;
  }
}

/**
 * The metadata with `snapshot` added as the head of the main branch. `last-updated-ms` and the
 * metadata log are left for the catalog's commit to stamp.
 */
export function withSnapshot(metadata: TableMetadata, snapshot: Snapshot): TableMetadata {
  if (snapshot.sequenceNumber <= metadata.lastSequenceNumber) {
    invalid(`snapshot sequence number ${snapshot.sequenceNumber} is not above ${metadata.lastSequenceNumber}`);
  }
  return {
    ...metadata,
    lastSequenceNumber: snapshot.sequenceNumber,
    currentSnapshotId: snapshot.snapshotId,
    snapshots: [...metadata.snapshots, snapshot],
    snapshotLog: [...metadata.snapshotLog, { timestampMs: snapshot.timestampMs, snapshotId: snapshot.snapshotId }],
    refs: { ...metadata.refs, [MAIN_BRANCH]: { ...metadata.refs[MAIN_BRANCH], snapshotId: snapshot.snapshotId, type: 'branch' } },
  };
}

/** The metadata without the given snapshots (never the current one) and their snapshot-log entries. */
export function withoutSnapshots(metadata: TableMetadata, snapshotIds: ReadonlySet<bigint>): TableMetadata {
  if (metadata.currentSnapshotId !== null && snapshotIds.has(metadata.currentSnapshotId)) {
    invalid(`cannot remove the current snapshot ${metadata.currentSnapshotId}`);
  }
  return {
    ...metadata,
    snapshots: metadata.snapshots.filter((s) => !snapshotIds.has(s.snapshotId)),
    snapshotLog: metadata.snapshotLog.filter((e) => !snapshotIds.has(e.snapshotId)),
    refs: Object.fromEntries(Object.entries(metadata.refs).filter(([, r]) => !snapshotIds.has(r.snapshotId))),
  };
}

// ---- JSON ----

export function serializeTableMetadata(m: TableMetadata): string {
  const json = {
    'format-version': m.formatVersion,
    'table-uuid': m.tableUuid,
    location: m.location,
    'last-sequence-number': m.lastSequenceNumber,
    'last-updated-ms': m.lastUpdatedMs,
    'last-column-id': m.lastColumnId,
    'current-schema-id': m.currentSchemaId,
    schemas: m.schemas,
    'default-spec-id': m.defaultSpecId,
    'partition-specs': m.partitionSpecs,
    'last-partition-id': m.lastPartitionId,
    'default-sort-order-id': m.defaultSortOrderId,
    'sort-orders': m.sortOrders,
    properties: m.properties,
    'current-snapshot-id': m.currentSnapshotId ?? -1n,
    refs: Object.fromEntries(
      Object.entries(m.refs).map(([name, r]) => [
        name,
        {
          'snapshot-id': r.snapshotId,
          type: r.type,
          'min-snapshots-to-keep': r.minSnapshotsToKeep,
          'max-snapshot-age-ms': r.maxSnapshotAgeMs,
          'max-ref-age-ms': r.maxRefAgeMs,
        },
      ]),
    ),
    snapshots: m.snapshots.map((s) => ({
      'snapshot-id': s.snapshotId,
      'parent-snapshot-id': s.parentSnapshotId ?? undefined,
      'sequence-number': s.sequenceNumber,
      'timestamp-ms': s.timestampMs,
      'manifest-list': s.manifestList,
      summary: s.summary,
      'schema-id': s.schemaId,
    })),
    'snapshot-log': m.snapshotLog.map((e) => ({ 'timestamp-ms': e.timestampMs, 'snapshot-id': e.snapshotId })),
    'metadata-log': m.metadataLog.map((e) => ({ 'timestamp-ms': e.timestampMs, 'metadata-file': e.metadataFile })),
  };
  return `${stringify(json, '')}\n`;
}

/** JSON text with bigints as exact integers and undefined members left out; 2-space indent. */
function stringify(value: unknown, indent: string): string {
  if (typeof value === 'bigint') return value.toString();
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((v) => inner + stringify(v, inner)).join(',\n')}\n${indent}]`;
  }
  const members = Object.entries(value).filter(([, v]) => v !== undefined);
  if (members.length === 0) return '{}';
  return `{\n${members.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${stringify(v, inner)}`).join(',\n')}\n${indent}}`;
}

/**
 * Quotes integer literals of 16 or more digits (outside strings, not part of a fraction or
 * exponent) so that JSON.parse keeps them exact; `long` below reads them back as bigint.
 */
const STRING_OR_LONG_INTEGER = /"(?:[^"\\]|\\.)*"|(?<![\d.eE+-])-?\d{16,}(?![\d.eE])/g;

export function parseTableMetadata(text: string): TableMetadata {
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text.replace(STRING_OR_LONG_INTEGER, (t) => (t.startsWith('"') ? t : `"${t}"`)));
  } catch (err) {
    throw new TributaryError('INVALID_TABLE_EXCEPTION', `table metadata is not JSON: ${(err as Error).message}`, { cause: err });
  }
  if (!isObject(json)) throw corrupt('the document');
  const r = new Reader(json, 'table metadata');
  const formatVersion = r.int('format-version');
  if (formatVersion !== FORMAT_VERSION) {
    throw new TributaryError('INVALID_TABLE_EXCEPTION', `table format version ${formatVersion} is not supported (only ${FORMAT_VERSION})`);
  }
  const current = r.optionalLong('current-snapshot-id');
  return {
    formatVersion: FORMAT_VERSION,
    tableUuid: r.string('table-uuid'),
    location: r.string('location'),
    lastSequenceNumber: r.long('last-sequence-number'),
    lastUpdatedMs: r.int('last-updated-ms'),
    lastColumnId: r.int('last-column-id'),
    schemas: r.array('schemas') as IcebergSchema[],
    currentSchemaId: r.int('current-schema-id'),
    partitionSpecs: r.array('partition-specs') as PartitionSpec[],
    defaultSpecId: r.int('default-spec-id'),
    lastPartitionId: r.int('last-partition-id'),
    properties: r.stringMap('properties') ?? {},
    currentSnapshotId: current === undefined || current === -1n ? null : current,
    snapshots: r.objects('snapshots').map((s, i) => {
      const sr = new Reader(s, `snapshot ${i}`);
      const summary = sr.stringMap('summary');
      if (!summary || typeof summary.operation !== 'string') throw corrupt(`summary of snapshot ${i}`);
      return withoutUndefined({
        snapshotId: sr.long('snapshot-id'),
        parentSnapshotId: sr.optionalLong('parent-snapshot-id') ?? null,
        sequenceNumber: sr.long('sequence-number'),
        timestampMs: sr.int('timestamp-ms'),
        manifestList: sr.string('manifest-list'),
        summary: summary as SnapshotSummary,
        schemaId: sr.optionalInt('schema-id'),
      });
    }),
    snapshotLog: r.objects('snapshot-log').map((e, i) => {
      const er = new Reader(e, `snapshot-log entry ${i}`);
      return { timestampMs: er.int('timestamp-ms'), snapshotId: er.long('snapshot-id') };
    }),
    metadataLog: r.objects('metadata-log').map((e, i) => {
      const er = new Reader(e, `metadata-log entry ${i}`);
      return { timestampMs: er.int('timestamp-ms'), metadataFile: er.string('metadata-file') };
    }),
    sortOrders: r.array('sort-orders') as SortOrder[],
    defaultSortOrderId: r.int('default-sort-order-id'),
    refs: Object.fromEntries(
      Object.entries(r.optionalObject('refs') ?? {}).map(([name, ref]) => {
        if (!isObject(ref)) throw corrupt(`ref ${name}`);
        const rr = new Reader(ref, `ref ${name}`);
        const type = rr.string('type');
        if (type !== 'branch' && type !== 'tag') throw corrupt(`type of ref ${name}`);
        return [
          name,
          withoutUndefined({
            snapshotId: rr.long('snapshot-id'),
            type,
            minSnapshotsToKeep: rr.optionalInt('min-snapshots-to-keep'),
            maxSnapshotAgeMs: rr.optionalInt('max-snapshot-age-ms'),
            maxRefAgeMs: rr.optionalInt('max-ref-age-ms'),
          }),
        ];
      }),
    ),
  };
}

/** Typed access to the members of one parsed JSON object, naming the bad member on failure. */
class Reader {
  constructor(
    private readonly obj: Record<string, unknown>,
    private readonly what: string,
  ) {}

  private fail(key: string): never {
    throw corrupt(`"${key}" of ${this.what}`);
  }

  int(key: string): number {
    return this.optionalInt(key) ?? this.fail(key);
  }

  optionalInt(key: string): number | undefined {
    const v = this.obj[key];
    if (v === undefined || v === null) return undefined;
    return Number.isSafeInteger(v) ? (v as number) : this.fail(key);
  }

  long(key: string): bigint {
    return this.optionalLong(key) ?? this.fail(key);
  }

  /** A long is a safe-integer number or, when the pre-pass quoted it, a string of digits. */
  optionalLong(key: string): bigint | undefined {
    const v = this.obj[key];
    if (v === undefined || v === null) return undefined;
    if (Number.isSafeInteger(v)) return BigInt(v as number);
    if (typeof v === 'string' && /^-?\d+$/.test(v)) return BigInt(v);
    return this.fail(key);
  }

  string(key: string): string {
    const v = this.obj[key];
    return typeof v === 'string' ? v : this.fail(key);
  }

  array(key: string): unknown[] {
    const v = this.obj[key];
    return Array.isArray(v) ? v : this.fail(key);
  }

  objects(key: string): Record<string, unknown>[] {
    const v = this.obj[key] ?? [];
    if (!Array.isArray(v) || !v.every(isObject)) this.fail(key);
    return v as Record<string, unknown>[];
  }

  optionalObject(key: string): Record<string, unknown> | undefined {
    const v = this.obj[key];
    if (v === undefined || v === null) return undefined;
    return isObject(v) ? v : this.fail(key);
  }

  stringMap(key: string): Record<string, string> | undefined {
    const v = this.optionalObject(key);
    if (v && !Object.values(v).every((x) => typeof x === 'string')) this.fail(key);
    return v as Record<string, string> | undefined;
  }
}

/** Optional members that are absent stay absent, so parsed metadata equals what was written. */
function withoutUndefined<T extends object>(obj: T): T {
  for (const key of Object.keys(obj) as (keyof T)[]) if (obj[key] === undefined) delete obj[key];
  return obj;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function corrupt(what: string): TributaryError {
  return new TributaryError('INVALID_TABLE_EXCEPTION', `invalid table metadata: ${what}`);
}

function invalid(message: string): never {
  throw new TributaryError('INVALID_ARGUMENT', message);
}
