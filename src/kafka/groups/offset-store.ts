/**
 * Committed offsets, stored durably as rows of a primary-key table of `kafka.database`, as Kafka
 * keeps them in its `__consumer_offsets` topic:
 *
 *   __consumer_offsets (group STRING, topic STRING, partition INT,          primary key
 *                       offset BIGINT, leader_epoch INT, metadata STRING,
 *                       commit_time TIMESTAMP_LTZ(3))
 *   bucket key: group, `kafka.group.offsets-buckets` buckets
 *
 * A commit is one PutKv to the bucket of its group with acks=all, answered once the changelog
 * holds it, so an acknowledged commit survives a kill -9 like any write; the KV state is what a
 * coordinator reads back (ScanKv of its buckets) when it starts. Being a table, the offsets are
 * also readable with SQL. The bucket of a group is what places the group: its coordinator is the
 * leader of that bucket (group-coordinator.ts).
 */
import { TributaryError, errorNameOf } from '../../common/errors.js';
import { BucketAssigner } from '../../common/bucketing.js';
import { CompactedKeyEncoder } from '../../common/key-encoder.js';
import { CompactedRowEncoder, KvValueDecoder, primaryKeyLayout } from '../../common/row-encoder.js';
import { type ColumnSpec, tableInfoFromJson, type TableInfo } from '../../common/schema.js';
import { buildKvBatch } from '../../record/kv-batch.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import type { TributaryBackend } from '../backend.js';

export const OFFSETS_TABLE = '__consumer_offsets';

const COLUMNS: ColumnSpec[] = [
  { name: 'group', type: 'STRING', nullable: false },
  { name: 'topic', type: 'STRING', nullable: false },
  { name: 'partition', type: 'INT', nullable: false },
  { name: 'offset', type: 'BIGINT', nullable: false },
  { name: 'leader_epoch', type: 'INT', nullable: true },
  { name: 'metadata', type: 'STRING', nullable: true },
  { name: 'commit_time', type: 'TIMESTAMP_LTZ(3)', nullable: false },
];

export interface CommittedOffset {
  offset: bigint;
  /** -1 when the consumer did not say. */
  leaderEpoch: number;
  metadata: string | null;
  commitTimeMs: number;
}

export interface OffsetEntry {
  topic: string;
  partition: number;
  committed: CommittedOffset;
}

const SCAN_PAGE_BYTES = 1 << 20;

export class OffsetStore {
  private table!: TableInfo;
  private rows!: CompactedRowEncoder;
  private keys!: CompactedKeyEncoder;
  private buckets!: BucketAssigner;

  constructor(
    private readonly backend: TributaryBackend,
    private readonly database: string,
    private readonly bucketCount: number,
  ) {}

  /** Creates the table (and its database) when it is missing and reads its layout. */
  async open(): Promise<void> {
    const tablePath = { databaseName: this.database, tableName: OFFSETS_TABLE };
    await this.backend.call(ApiKeys.CreateDatabase, { databaseName: this.database, databaseJson: '{}', ignoreIfExists: true });
    await this.backend.call(ApiKeys.CreateTable, {
      tablePath,
      tableJson: JSON.stringify({ columns: COLUMNS, primaryKey: ['group', 'topic', 'partition'], bucketKeys: ['group'], bucketCount: this.bucketCount, comment: 'committed offsets of Kafka consumer groups' }),
      ignoreIfExists: true,
    });
    const info = await this.backend.call(ApiKeys.GetTableInfo, { tablePath });
    this.table = tableInfoFromJson(JSON.parse(info.tableJson));
    this.rows = new CompactedRowEncoder(this.table.schema.columns.map((c) => c.type));
    this.keys = CompactedKeyEncoder.forColumns(this.table.schema, primaryKeyLayout(this.table.schema, this.table.bucketKeys));
    this.buckets = new BucketAssigner(this.table);
  }

  /** The table's id once it is open. */
  get tableId(): number | undefined {
    return (this.table as TableInfo | undefined)?.tableId;
  }

  /** The bucket that holds a group's offsets. */
  bucketOf(group: string): number {
    return this.buckets.bucketOf([group]);
  }

  /** Stores the commits of one group; throws the bucket's named error when the write fails. */
  async commit(group: string, entries: OffsetEntry[]): Promise<void> {
    const records = entries.map(({ topic, partition, committed: c }) => {
      const row = [group, topic, partition, c.offset, c.leaderEpoch < 0 ? null : c.leaderEpoch, c.metadata, BigInt(c.commitTimeMs) * 1000n];
      return { key: this.keys.encode(row), row: this.rows.encode(row) };
    });
    const bucketId = this.bucketOf(group);
    const resp = await this.backend.call(ApiKeys.PutKv, {
      acks: -1,
      tableId: BigInt(this.table.tableId),
      timeoutMs: 30_000,
      bucketsReq: [{ bucketId, records: buildKvBatch({ schemaId: this.table.schemaId, records }) }],
    });
    const b = resp.bucketsResp[0];
    if (b?.errorCode !== undefined) throw new TributaryError(errorNameOf(b.errorCode), b.errorMessage ?? 'offset commit failed');
  }

  /** Every committed offset of the given buckets, by group. */
  async load(bucketIds: number[]): Promise<Map<string, OffsetEntry[]>> {
    const decoder = new KvValueDecoder(this.table.schema, this.table.schemaId, () => undefined);
    const out = new Map<string, OffsetEntry[]>();
    for (const bucketId of bucketIds) {
      let scannerId: Uint8Array | undefined;
      for (;;) {
        const page = await this.backend.call(ApiKeys.ScanKv, { tableId: BigInt(this.table.tableId), bucketId, batchSizeBytes: SCAN_PAGE_BYTES, closeScanner: false, ...(scannerId ? { scannerId } : {}) });
        if (page.errorCode !== undefined) throw new TributaryError(errorNameOf(page.errorCode), page.errorMessage ?? 'reading committed offsets failed');
        for (const value of page.values) {
          const [group, topic, partition, offset, leaderEpoch, metadata, commitTime] = decoder.decode(value) as [string, string, number, bigint, number | null, string | null, bigint];
          let list = out.get(group);
          if (!list) out.set(group, (list = []));
          list.push({ topic, partition, committed: { offset, leaderEpoch: leaderEpoch ?? -1, metadata, commitTimeMs: Number(commitTime / 1000n) } });
        }
        if (!page.hasMoreResults) break;
        scannerId = page.scannerId;
      }
    }
    return out;
  }
}
