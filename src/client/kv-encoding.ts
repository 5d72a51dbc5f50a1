/**
 * How the client turns rows of a primary-key table into what the server stores and back: the
 * encoded primary key (bucket key first), the bucket and partition of a key, and KV values.
 */
import { BucketAssigner } from '../common/bucketing.js';
import { TributaryError } from '../common/errors.js';
import { CompactedKeyEncoder } from '../common/key-encoder.js';
import { PartitionGetter } from '../common/partitions.js';
import { CompactedRowDecoder, CompactedRowEncoder, primaryKeyLayout, readKvValue } from '../common/row-encoder.js';
import type { TableInfo } from '../common/schema.js';
import { type Row, RowReader, toExternal } from '../common/values.js';

export class KvEncoding {
  readonly keyEncoder: CompactedKeyEncoder;
  readonly bucketKeyEncoder: CompactedKeyEncoder;
  readonly rowEncoder: CompactedRowEncoder;
  private readonly rowDecoder: CompactedRowDecoder;
  readonly assigner: BucketAssigner;
  readonly partitions?: PartitionGetter;
  private readonly keyColumns: Set<string>;
  private readonly reader: RowReader;

  constructor(readonly table: TableInfo) {
    const schema = table.schema;
    if (!schema.primaryKey) throw new TributaryError('NON_PRIMARY_KEY_TABLE_EXCEPTION', `table '${table.path.database}.${table.path.table}' has no primary key`);
    this.keyEncoder = CompactedKeyEncoder.forColumns(schema, primaryKeyLayout(schema, table.bucketKeys, table.partitionKeys));
    this.bucketKeyEncoder = CompactedKeyEncoder.forColumns(schema, table.bucketKeys);
    const types = schema.columns.map((c) => c.type);
    this.rowEncoder = new CompactedRowEncoder(types);
    this.rowDecoder = new CompactedRowDecoder(types);
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

  /** A stored KV value as a row of external values. */
  decodeValue(value: Uint8Array): Row {
    const internal = this.rowDecoder.decode(readKvValue(value).row);
    const out: Row = {};
    this.table.schema.columns.forEach((c, i) => (out[c.name] = toExternal(c.type, internal[i])));
    return out;
  }
}
