/**
 * Iceberg v2 manifest files (spec "Manifests"): an Avro container file (see avro.ts) of
 * `manifest_entry` records, one per data or delete file, for one partition spec.
 *
 *   manifest_entry                                       (? = optional: union with null, default null)
 *     0 status int (0 existing, 1 added, 2 deleted)
 *     1 snapshot_id long?  3 sequence_number long?  4 file_sequence_number long?   (null: inherited)
 *     2 data_file record r2
 *       134 content int (0 data, 1 position deletes, 2 equality deletes)
 *       100 file_path string  101 file_format string
 *       102 partition record r102: one optional field per partition field, with the partition
 *           field's id (1000+) and name, typed by the transform's result type (below)
 *       103 record_count long  104 file_size_in_bytes long
 *       108 column_sizes map<117 int, 118 long>?     109 value_counts map<119 int, 120 long>?
 *       110 null_value_counts map<121 int, 122 long>? 137 nan_value_counts map<138 int, 139 long>?
 *       125 lower_bounds map<126 int, 127 bytes>?     128 upper_bounds map<129 int, 130 bytes>?
 *       131 key_metadata bytes?  132 split_offsets list<133 long>?  135 equality_ids list<136 int>?
 *       140 sort_order_id int?
 *   map<k, v> := array of record k<k>_v<v> {key, value} with logicalType "map"; list<e> := array, element-id e
 *   header metadata: schema (table schema JSON), schema-id, partition-spec (JSON of the spec's fields
 *     array), partition-spec-id, format-version "2", content "data" | "deletes"
 *
 * Partition values in Avro (spec Appendix A): boolean, int, long, float, double, string as such;
 * date → int (logicalType date); time → long (time-micros); timestamp, timestamptz → long
 * (timestamp-micros, adjust-to-utc false / true); binary → bytes; fixed[L] → fixed L; uuid → fixed 16
 * (uuid); decimal(P,S) → fixed of the fewest bytes holding P digits (logicalType decimal), the
 * unscaled value in big-endian two's complement. Named fixed types are defined once and referenced
 * by name after that, as Avro requires.
 */
import { TributaryError } from '../../common/errors.js';
import {
  type AvroSchema,
  decodeAvroFile,
  encodeAvroFile,
  fromAvroBytes,
  listOf,
  mapOf,
  optionalField,
  requiredField,
  toAvroBytes,
} from './avro.js';
import {
  type DataFile,
  FileContent,
  ManifestContent,
  type ManifestEntry,
  type ManifestEntryStatus,
  type PartitionFieldType,
  type PartitionValue,
} from './data-file.js';
import { type IcebergSchema, decimalOf, fixedLengthOf } from './types.js';

export interface Manifest {
  schema: IcebergSchema;
  specId: number;
  /** The partition spec's JSON form (`{ "spec-id", fields }`) or its fields array. */
  partitionSpec: object;
  partitionType: PartitionFieldType[];
  content: ManifestContent;
  entries: ManifestEntry[];
}

/** The Avro form of a manifest entry, as written and as read back. */
interface AvroEntry {
  status: number;
  snapshot_id: bigint | null;
  sequence_number: bigint | null;
  file_sequence_number: bigint | null;
  data_file: AvroDataFile;
}

interface AvroDataFile {
  content: number;
  file_path: string;
  file_format: string;
  partition: Record<string, unknown>;
  record_count: bigint | number;
  file_size_in_bytes: bigint | number;
  column_sizes: KeyValue<number | bigint>[] | null;
  value_counts: KeyValue<number | bigint>[] | null;
  null_value_counts: KeyValue<number | bigint>[] | null;
  nan_value_counts: KeyValue<number | bigint>[] | null;
  lower_bounds: KeyValue<Buffer>[] | null;
  upper_bounds: KeyValue<Buffer>[] | null;
  key_metadata: Buffer | null;
  split_offsets: (number | bigint)[] | null;
  equality_ids: number[] | null;
  sort_order_id: number | null;
}

interface KeyValue<V> {
  key: number;
  value: V;
}

export async function encodeManifest(m: Manifest): Promise<Uint8Array> {
  const fields = Array.isArray(m.partitionSpec) ? m.partitionSpec : (m.partitionSpec as { fields?: unknown }).fields;
  if (!Array.isArray(fields)) throw new TributaryError('INVALID_ARGUMENT', 'the partition spec has no fields array');
  const partition = m.partitionType.map(partitionCodec);
  const toAvro = (entry: ManifestEntry, i: number): AvroEntry => {
    const df = entry.dataFile;
    if ((df.content === FileContent.DATA) !== (m.content === ManifestContent.DATA)) {
      throw new TributaryError('INVALID_ARGUMENT', `entry ${i}: a ${contentName(m.content)} manifest cannot hold ${df.filePath} (content ${df.content})`);
    }
    if (df.partition.length !== partition.length) {
      throw new TributaryError('INVALID_ARGUMENT', `entry ${i}: ${df.filePath} has ${df.partition.length} partition values for ${partition.length} partition fields`);
    }
    const tuple: Record<string, unknown> = {};
    for (let f = 0; f < partition.length; f++) {
      const value = df.partition[f];
      tuple[partition[f].name] = value === null ? null : partition[f].toAvro(value);
    }
    return {
      status: entry.status,
      snapshot_id: entry.snapshotId,
      sequence_number: entry.sequenceNumber,
      file_sequence_number: entry.fileSequenceNumber,
      data_file: {
        content: df.content,
        file_path: df.filePath,
        file_format: df.fileFormat,
        partition: tuple,
        record_count: df.recordCount,
        file_size_in_bytes: df.fileSizeInBytes,
        column_sizes: toKeyValues(df.columnSizes, asIs),
        value_counts: toKeyValues(df.valueCounts, asIs),
        null_value_counts: toKeyValues(df.nullValueCounts, asIs),
        nan_value_counts: toKeyValues(df.nanValueCounts, asIs),
        lower_bounds: toKeyValues(df.lowerBounds, toAvroBytes),
        upper_bounds: toKeyValues(df.upperBounds, toAvroBytes),
        key_metadata: null,
        split_offsets: df.splitOffsets ?? null,
        equality_ids: df.equalityIds ?? null,
        sort_order_id: df.sortOrderId ?? null,
      },
    };
  };
  // Each record is built just before it is encoded, so it dies young.
  function* records() {
    for (let i = 0; i < m.entries.length; i++) yield toAvro(m.entries[i], i);
  }
  return encodeAvroFile({
    schema: manifestSchema(m.partitionType),
    metadata: {
      schema: JSON.stringify(m.schema),
      'schema-id': String(m.schema['schema-id']),
      'partition-spec': JSON.stringify(fields),
      'partition-spec-id': String(m.specId),
      'format-version': '2',
      content: contentName(m.content),
    },
    records: records(),
  });
}

/**
 * Reads a manifest back. Inherited values stay null (the manifest list entry supplies them); the
 * partition type comes from the file's own header schema.
 */
export async function decodeManifest(
  bytes: Uint8Array,
): Promise<{ entries: ManifestEntry[]; metadata: Record<string, string>; partitionType: PartitionFieldType[] }> {
  const file = await decodeAvroFile(bytes);
  const partitionType = partitionTypeOf(file.schema);
  const partition = partitionType.map(partitionCodec);
  const entries = Array.from(file.records as Iterable<AvroEntry>, (e): ManifestEntry => {
    const df = e.data_file;
    const format = df.file_format.toUpperCase();
    if (format !== 'PARQUET') throw new TributaryError('STORAGE_EXCEPTION', `data file ${df.file_path} has unsupported format ${df.file_format}`);
    const dataFile: DataFile = {
      content: df.content as FileContent,
      filePath: df.file_path,
      fileFormat: format,
      partition: partition.map((p) => {
        const value = df.partition[p.name];
        return value === null ? null : p.fromAvro(value);
      }),
      recordCount: Number(df.record_count),
      fileSizeInBytes: Number(df.file_size_in_bytes),
    };
    if (df.column_sizes != null) dataFile.columnSizes = fromKeyValues(df.column_sizes, Number);
    if (df.value_counts != null) dataFile.valueCounts = fromKeyValues(df.value_counts, Number);
    if (df.null_value_counts != null) dataFile.nullValueCounts = fromKeyValues(df.null_value_counts, Number);
    if (df.nan_value_counts != null) dataFile.nanValueCounts = fromKeyValues(df.nan_value_counts, Number);
    if (df.lower_bounds != null) dataFile.lowerBounds = fromKeyValues(df.lower_bounds, fromAvroBytes);
    if (df.upper_bounds != null) dataFile.upperBounds = fromKeyValues(df.upper_bounds, fromAvroBytes);
    if (df.split_offsets != null) dataFile.splitOffsets = df.split_offsets.map(Number);
    if (df.equality_ids != null) dataFile.equalityIds = df.equality_ids;
    if (df.sort_order_id != null) dataFile.sortOrderId = df.sort_order_id;
    return {
      status: e.status as ManifestEntryStatus,
      snapshotId: e.snapshot_id,
      sequenceNumber: e.sequence_number,
      fileSequenceNumber: e.file_sequence_number,
      dataFile,
    };
  });
  return { entries, metadata: file.metadata, partitionType };
}

function contentName(content: ManifestContent): string {
  return content === ManifestContent.DELETES ? 'deletes' : 'data';
}

function toKeyValues<V, A>(map: Map<number, V> | undefined, toAvro: (v: V) => A): KeyValue<A>[] | null {
  if (map === undefined) return null;
  const out: KeyValue<A>[] = [];
  for (const [key, value] of map) out.push({ key, value: toAvro(value) });
  return out;
}

const asIs = <T>(value: T) => value;

function fromKeyValues<A, V>(pairs: KeyValue<A>[], fromAvro: (a: A) => V): Map<number, V> {
  const map = new Map<number, V>();
  for (const pair of pairs) map.set(pair.key, fromAvro(pair.value));
  return map;
}

function manifestSchema(partitionType: PartitionFieldType[]): AvroSchema {
  const definedNames = new Set<string>();
  const partition = {
    type: 'record',
    name: 'r102',
    fields: partitionType.map((p) => optionalField(p.name, p.fieldId, partitionAvroType(p.type, definedNames))),
  };
  const counts = (keyId: number) => mapOf(keyId, 'int', keyId + 1, 'long');
  return {
    type: 'record',
    name: 'manifest_entry',
    fields: [
      requiredField('status', 0, 'int'),
      optionalField('snapshot_id', 1, 'long'),
      optionalField('sequence_number', 3, 'long'),
      optionalField('file_sequence_number', 4, 'long'),
      requiredField('data_file', 2, {
        type: 'record',
        name: 'r2',
        fields: [
          requiredField('content', 134, 'int'),
          requiredField('file_path', 100, 'string'),
          requiredField('file_format', 101, 'string'),
          requiredField('partition', 102, partition),
          requiredField('record_count', 103, 'long'),
          requiredField('file_size_in_bytes', 104, 'long'),
          optionalField('column_sizes', 108, counts(117)),
          optionalField('value_counts', 109, counts(119)),
          optionalField('null_value_counts', 110, counts(121)),
          optionalField('nan_value_counts', 137, counts(138)),
          optionalField('lower_bounds', 125, mapOf(126, 'int', 127, 'bytes')),
          optionalField('upper_bounds', 128, mapOf(129, 'int', 130, 'bytes')),
          optionalField('key_metadata', 131, 'bytes'),
          optionalField('split_offsets', 132, listOf(133, 'long')),
          optionalField('equality_ids', 135, listOf(136, 'int')),
          optionalField('sort_order_id', 140, 'int'),
        ],
      }),
    ],
  };
}

const SAME_IN_AVRO = new Set(['boolean', 'int', 'long', 'float', 'double', 'string']);

/** The Avro type of a partition field's result type; a named type already defined is referenced by name. */
function partitionAvroType(type: string, definedNames: Set<string>): AvroSchema {
  if (SAME_IN_AVRO.has(type)) return type;
  const named = (name: string, schema: AvroSchema): AvroSchema => {
    if (definedNames.has(name)) return name;
    definedNames.add(name);
    return schema;
  };
  const decimal = decimalOf(type);
  if (decimal) {
    const name = `decimal_${decimal.precision}_${decimal.scale}`;
    return named(name, { type: 'fixed', name, size: decimalBytes(decimal.precision), logicalType: 'decimal', ...decimal });
  }
  const length = fixedLengthOf(type);
  if (length !== undefined) return named(`fixed_${length}`, { type: 'fixed', name: `fixed_${length}`, size: length });
  switch (type) {
    case 'date':
      return { type: 'int', logicalType: 'date' };
    case 'time':
      return { type: 'long', logicalType: 'time-micros' };
    case 'timestamp':
    case 'timestamptz':
      return { type: 'long', logicalType: 'timestamp-micros', 'adjust-to-utc': type === 'timestamptz' };
    case 'binary':
      return 'bytes';
    case 'uuid':
      return named('uuid_fixed', { type: 'fixed', name: 'uuid_fixed', size: 16, logicalType: 'uuid' });
  }
  throw new TributaryError('INVALID_ARGUMENT', `partition type ${type} has no Avro form`);
}

/** The partition fields of a manifest's header schema: data_file (field 2) → partition (field 102). */
function partitionTypeOf(schema: AvroSchema): PartitionFieldType[] {
  const dataFile = fieldById(schema, 2);
  const partition = fieldById(dataFile.type as AvroSchema, 102);
  const names = new Map<string, AvroSchema>();
  return (partition.type as { fields: AvroField[] }).fields.map((f) => {
    const branches = Array.isArray(f.type) ? f.type.filter((t) => t !== 'null') : [f.type];
    if (branches.length !== 1 || typeof f['field-id'] !== 'number') {
      throw new TributaryError('STORAGE_EXCEPTION', `manifest partition field ${f.name} is not an optional primitive with a field id`);
    }
    return { fieldId: f['field-id'], name: f.name, type: icebergTypeOf(branches[0], names) };
  });
}

interface AvroField {
  name: string;
  type: AvroSchema;
  'field-id'?: number;
}

function fieldById(record: AvroSchema, fieldId: number): AvroField {
  const fields = (record as { fields?: AvroField[] }).fields;
  const field = Array.isArray(fields) ? fields.find((f) => f['field-id'] === fieldId) : undefined;
  if (field === undefined) throw new TributaryError('STORAGE_EXCEPTION', `manifest schema has no field with id ${fieldId}`);
  return field;
}

/** The Iceberg type of a partition value's Avro type: the inverse of partitionAvroType. */
function icebergTypeOf(avroType: AvroSchema, names: Map<string, AvroSchema>): string {
  if (typeof avroType === 'string') {
    if (SAME_IN_AVRO.has(avroType)) return avroType;
    if (avroType === 'bytes') return 'binary';
    const defined = names.get(avroType);
    if (defined !== undefined) return icebergTypeOf(defined, names);
  } else if (!Array.isArray(avroType)) {
    const t = avroType as { type: AvroSchema; name?: string; size?: number; logicalType?: string; precision?: number; scale?: number };
    if (t.type === 'fixed' && t.name !== undefined) names.set(t.name, t);
    switch (t.logicalType) {
      case 'date':
        return 'date';
      case 'time-micros':
        return 'time';
      case 'timestamp-micros':
        return (avroType as { 'adjust-to-utc'?: boolean })['adjust-to-utc'] === true ? 'timestamptz' : 'timestamp';
      case 'decimal':
        return `decimal(${t.precision},${t.scale})`;
      case 'uuid':
        return 'uuid';
    }
    return t.type === 'fixed' ? `fixed[${t.size}]` : icebergTypeOf(t.type, names);
  }
  throw new TributaryError('STORAGE_EXCEPTION', `manifest partition type ${JSON.stringify(avroType)} is not supported`);
}

/** How one partition field's values cross into and out of Avro. */
interface PartitionCodec {
  name: string;
  toAvro(value: Exclude<PartitionValue, null>): unknown;
  fromAvro(value: unknown): PartitionValue;
}

function partitionCodec(p: PartitionFieldType): PartitionCodec {
  const decimal = decimalOf(p.type);
  if (decimal) {
    const size = decimalBytes(decimal.precision);
    return {
      name: p.name,
      toAvro: (value) => decimalToFixed(BigInt(value as bigint | number), size, p),
      fromAvro: (value) => fixedToDecimal(value as Buffer),
    };
  }
  if (p.type === 'binary' || p.type === 'uuid' || fixedLengthOf(p.type) !== undefined) {
    return { name: p.name, toAvro: (value) => toAvroBytes(value as Uint8Array), fromAvro: (value) => fromAvroBytes(value as Buffer) };
  }
  return { name: p.name, toAvro: asIs, fromAvro: (value) => value as PartitionValue };
}

/** Bytes of the fixed type that stores decimal(P, _): the fewest whose two's complement holds 10^P - 1. */
function decimalBytes(precision: number): number {
  const limit = 10n ** BigInt(precision);
  let size = 1;
  while (1n << BigInt(8 * size - 1) < limit) size++;
  return size;
}

function decimalToFixed(unscaled: bigint, size: number, p: PartitionFieldType): Buffer {
  const bits = 8 * size;
  if (BigInt.asIntN(bits, unscaled) !== unscaled) {
    throw new TributaryError('INVALID_ARGUMENT', `unscaled value ${unscaled} does not fit partition field ${p.name} (${p.type})`);
  }
  const out = Buffer.alloc(size);
  let rest = BigInt.asUintN(bits, unscaled);
  for (let i = size - 1; i >= 0; i--) {
    out[i] = Number(rest & 0xffn);
    rest >>= 8n;
  }
  return out;
}

function fixedToDecimal(bytes: Buffer): bigint {
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  return BigInt.asIntN(8 * bytes.length, value);
}
