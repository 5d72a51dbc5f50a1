/**
 * `BatchScanner`: reads the current state of a primary-key table, bounded, bucket by bucket.
 *
 *   const scanner = table.newScan().createBatchScanner();
 *   for (let rows = await scanner.pollBatch(); rows; rows = await scanner.pollBatch()) use(rows);
 *
 * Each bucket is read through one server-side scanner (ScanKv), which pages through a consistent
 * read of the bucket's committed state; `offsets()` tells, per bucket, the changelog offset that
 * state corresponds to, so a reader can continue with the changelog from there without a gap or a
 * repeat.
 */
import { TributaryError } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import type { Row } from '../common/values.js';
import { ApiKeys } from '../rpc/api-keys.js';
import type { ScanKvResponse } from '../rpc/gen/tributary_pb.js';
import type { ConnectionCore } from './connection-core.js';
import { KvEncoding } from './kv-encoding.js';
import type { BucketRef } from './log-scanner.js';
import { requestLeaders } from './leader-requests.js';
import { throwIfError } from './responses.js';

const PAGE_BYTES = 4 * 1024 * 1024;

interface Target {
  partition?: { name: string; id: number };
  bucket: number;
}

export class BatchScanner {
  private readonly encoding: KvEncoding;
  private targets?: Target[];
  /** The bucket being read: its server-side scanner and the tablet server holding it, once opened. */
  private current?: { target: Target; scannerId: Uint8Array; leader?: number };
  private readonly stateOffsets = new Map<string, bigint>();

  constructor(
    private readonly conn: ConnectionCore,
    private readonly table: TableInfo,
    private readonly projection: number[] | undefined,
    /** Only these buckets (every bucket when absent), read in this order. */
    private readonly buckets?: readonly BucketRef[],
  ) {
    if (!table.schema.primaryKey) {
      throw new TributaryError('NON_PRIMARY_KEY_TABLE_EXCEPTION', `table '${table.path.database}.${table.path.table}' has no primary key: read its log with a LogScanner`);
    }
    this.encoding = new KvEncoding(table, conn.metadata);
  }

  /** The next page of rows, or null when every bucket has been read. */
  async pollBatch(): Promise<Row[] | null> {
    this.targets ??= await this.listTargets();
    for (;;) {
      if (!this.current) {
        const target = this.targets.shift();
        if (!target) return null;
        this.current = { target, scannerId: new Uint8Array(0) };
      }
      const { target, scannerId } = this.current;
      const page = { tableId: BigInt(this.table.tableId), ...(target.partition ? { partitionId: BigInt(target.partition.id) } : {}), bucketId: target.bucket, batchSizeBytes: PAGE_BYTES };
      let resp: ScanKvResponse;
      if (this.current.leader === undefined) {
        // A bucket's first page opens its scanner at the leader, wherever the leader is now.
        const address = { ...(target.partition ? { partitionId: target.partition.id } : {}), bucket: target.bucket };
        let opened = -1;
        [resp] = await requestLeaders(this.conn, this.table, [address], async (rpc, _, leader) => {
          opened = leader;
          return [await rpc.request(ApiKeys.ScanKv, page)];
        });
        this.current.leader = opened;
      } else {
        // The scanner lives on the server that opened it: later pages go there, or the read fails.
        resp = await (await this.conn.tabletServer(this.current.leader)).request(ApiKeys.ScanKv, { ...page, scannerId });
      }
      throwIfError(resp, 'scan');
      this.stateOffsets.set(label(target), resp.logOffset);
      this.current = resp.hasMoreResults ? { target, scannerId: resp.scannerId, leader: this.current.leader } : undefined;
      if (resp.values.length > 0) return (await this.encoding.decodeValues(resp.values)).map((row) => this.project(row));
    }
  }

  /** Every row of the current state. */
  async readAll(): Promise<Row[]> {
    const out: Row[] = [];
    for (let rows = await this.pollBatch(); rows; rows = await this.pollBatch()) out.push(...rows);
    return out;
  }

  /** Per bucket read so far (`<partition>/<bucket>` or `<bucket>`): the changelog offset its state corresponds to. */
  offsets(): Map<string, bigint> {
    return new Map(this.stateOffsets);
  }

  private project(row: Row): Row {
    if (!this.projection) return row;
    const out: Row = {};
    for (const i of this.projection) {
      const name = this.table.schema.columns[i].name;
      out[name] = row[name];
    }
    return out;
  }

  private async listTargets(): Promise<Target[]> {
    const partitioned = this.table.partitionKeys.length > 0;
    const partitions = partitioned ? await this.conn.metadata.listPartitions(this.table.path) : [];
    const idOf = new Map(partitions.map((p) => [p.partitionName, p.partitionId]));
    if (this.buckets) {
      return this.buckets.map((ref) => {
        const bucket = typeof ref === 'number' ? ref : ref.bucket;
        if (!Number.isInteger(bucket) || bucket < 0 || bucket >= this.table.bucketCount) {
          throw new TributaryError('UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', `bucket ${bucket} does not exist: the table has ${this.table.bucketCount} bucket(s)`);
        }
        if (typeof ref === 'number') {
          if (partitioned) throw new TributaryError('PARTITION_NOT_EXISTS', 'the table is partitioned: name buckets as { partition, bucket }');
          return { bucket };
        }
        const id = idOf.get(ref.partition);
        if (id === undefined) throw new TributaryError('PARTITION_NOT_EXISTS', `partition '${ref.partition}' does not exist`);
        return { partition: { name: ref.partition, id }, bucket };
      });
    }
    const buckets = Array.from({ length: this.table.bucketCount }, (_, b) => b);
    if (!partitioned) return buckets.map((bucket) => ({ bucket }));
    return partitions.flatMap((p) => buckets.map((bucket) => ({ partition: { name: p.partitionName, id: p.partitionId }, bucket })));
  }
}

function label(t: Target): string {
  return t.partition ? `${t.partition.name}/${t.bucket}` : String(t.bucket);
}
