/**
 * How the client turns rows of a primary-key table into what the server stores and back: the
 * encoded primary key (bucket key first), the bucket and partition of a key, and KV values. Values
 * written with another schema id of the table (before or after an ADD COLUMN) are read in this
 * table info's schema, the schema fetched once through the metadata cache.
 */
import { BucketAssigner } from '../common/bucketing.js';
import { TributaryError } from '../common/errors.js';
import { CompactedKeyEncoder } from '../common/key-encoder.js';
import { PartitionGetter } from '../common/partitions.js';
import { CompactedRowEncoder, KvValueDecoder, primaryKeyLayout, readKvValue } from '../common/row-encoder.js';
import type { TableInfo } from '../common/schema.js';
import { type Row, RowReader, toExternal } from '../common/values.js';
import type { MetadataCache } from './metadata-cache.js';

export class KvEncoding {
  readonly keyEncoder: CompactedKeyEncoder;
  readonly bucketKeyEncoder: CompactedKeyEncoder;
  readonly rowEncoder: CompactedRowEncoder;
  private readonly valueDecoder: KvValueDecoder;
  readonly assigner: BucketAssigner;
  readonly partitions?: PartitionGetter;
  private readonly keyColumns: Set<string>;
  private readonly reader: RowReader;

  constructor(
    readonly table: TableInfo,
    private readonly metadata: MetadataCache,
  ) {
    const schema = table.schema;
    if (!schema.primaryKey) throw new TributaryError('NON_PRIMARY_KEY_TABLE_EXCEPTION', `table '${table.path.database}.${table.path.table}' has no primary key`);
    this.keyEncoder = CompactedKeyEncoder.forColumns(schema, primaryKeyLayout(schema, table.bucketKeys, table.partitionKeys));
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

  /** The primary-key (and partition) columns of a row, the rest null. */
  keyRow(row: Row): unknown[] {
    return this.internalRow(row, this.keyColumns);
  }

  /** Stored KV values as rows of external values, in this table info's schema. */
  async decodeValues(values: readonly Uint8Array[]): Promise<Row[]> {
    const unknown = new Set<number>();
    for (const v of values) {
      const { schemaId } = readKvValue(v);
      if (!this.valueDecoder.knows(schemaId)) unknown.add(schemaId);
    }
    for (const schemaId of unknown) await this.metadata.schema(this.table, schemaId);
    const columns = this.table.schema.columns;
    const internal: unknown[] = [];
    return values.map((v) => {
      this.valueDecoder.decode(v, internal);
      const out: Row = {};
      for (let i = 0; i < columns.length; i++) out[columns[i].name] = toExternal(columns[i].type, internal[i]);
      return out;
    });
  }
}
