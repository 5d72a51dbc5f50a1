/**
 * How the client turns rows of a primary-key table into what the server stores and back: the
 * encoded primary key (bucket key first), the bucket and partition of a key, and KV values. Values
 * written with another schema id of the table (before or after an ADD COLUMN) are read in this
 * table info's schema, the schema fetched once through the metadata cache.
 */
import { BucketAssigner, FlussBucketingFunction, icebergBucketColumn } from '../common/bucketing.js';
import { TributaryError } from '../common/errors.js';
import { CompactedKeyEncoder } from '../common/key-encoder.js';
import { PartitionGetter } from '../common/partitions.js';
import { CompactedRowEncoder, KvValueDecoder, kvValueSchemaId, primaryKeyLayout } from '../common/row-encoder.js';
import type { TableInfo } from '../common/schema.js';
import { type Row, RowReader, toExternal } from '../common/values.js';
import type { MetadataCache } from './metadata-cache.js';

export class KvEncoding {
  readonly keyEncoder: CompactedKeyEncoder;
  readonly bucketKeyEncoder: CompactedKeyEncoder;
  readonly rowEncoder: CompactedRowEncoder;
  private readonly valueDecoder: KvValueDecoder;
  readonly assigner: BucketAssigner;
  /** Set when a row's bucket is the hash of its encoded primary key. */
  private readonly keyBucketing?: FlussBucketingFunction;
  readonly partitions?: PartitionGetter;
  private readonly keyColumns: Set<string>;
  private readonly reader: RowReader;
  /** Internal values of the row being decoded. */
  private readonly internal: unknown[] = [];

  constructor(
    readonly table: TableInfo,
    private readonly metadata: MetadataCache,
  ) {
    const schema = table.schema;
    if (!schema.primaryKey) throw new TributaryError('NON_PRIMARY_KEY_TABLE_EXCEPTION', `table '${table.path.database}.${table.path.table}' has no primary key`);
    const layout = primaryKeyLayout(schema, table.bucketKeys, table.partitionKeys);
    this.keyEncoder = CompactedKeyEncoder.forColumns(schema, layout);
    // The primary key starts with the bucket key: when it is nothing more, Fluss's bucketing hashes its bytes.
    if (layout.length === table.bucketKeys.length && !icebergBucketColumn(table)) this.keyBucketing = new FlussBucketingFunction();
    this.bucketKeyEncoder = CompactedKeyEncoder.forColumns(schema, table.bucketKeys);
    const types = schema.columns.map((c) => c.type);
    this.rowEncoder = new CompactedRowEncoder(types);
    this.valueDecoder = new KvValueDecoder(schema, table.schemaId, (id) => metadata.cachedSchema(table, id));
    this.assigner = new BucketAssigner(table);
    if (table.partitionKeys.length > 0) this.partitions = new PartitionGetter(schema, table.partitionKeys);
    this.keyColumns = new Set([...schema.primaryKey, ...table.partitionKeys]);
    this.reader = new RowReader(schema.columns);
  }

  /**
   * Internal values of a row in column order. With `only`, just those columns are read (and must
   * have values) and the others are null: a key row for deletes and lookups, a prefix for prefix
   * lookups. Primary-key and partition columns always need values.
   */
  internalRow(row: Row, only?: ReadonlySet<string>): unknown[] {
    return this.reader.read(row, undefined, only, only ?? this.keyColumns);
  }

  /** The bucket of a row (internal values) whose encoded primary key is `key`. */
  bucketOfKey(values: readonly unknown[], key: Uint8Array): number {
    return this.keyBucketing ? this.keyBucketing.bucket(key, this.table.bucketCount) : this.assigner.bucketOf(values);
  }

  /** The primary-key (and partition) columns of a row, the rest null. */
  keyRow(row: Row): unknown[] {
    return this.internalRow(row, this.keyColumns);
  }

  /** Whether the schema of a value is known here, so that `decodeValue` takes it without a fetch. */
  decodesNow(value: Uint8Array): boolean {
    return this.valueDecoder.knows(kvValueSchemaId(value));
  }

  /** A stored KV value as a row of external values, in this table info's schema; its schema must be known (`decodesNow`). */
  decodeValue(value: Uint8Array): Row {
    const internal = this.valueDecoder.decode(value, this.internal);
    const columns = this.table.schema.columns;
    const out: Row = {};
    for (let i = 0; i < columns.length; i++) out[columns[i].name] = toExternal(columns[i].type, internal[i]);
    return out;
  }

  /** Stored KV values as rows of external values, in this table info's schema; fetches the schemas it lacks. */
  async decodeValues(values: readonly Uint8Array[]): Promise<Row[]> {
    const unknown = new Set<number>();
    for (const v of values) if (!this.decodesNow(v)) unknown.add(kvValueSchemaId(v));
    for (const schemaId of unknown) await this.metadata.schema(this.table, schemaId);
    return values.map((v) => this.decodeValue(v));
  }
}
