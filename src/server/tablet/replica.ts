/**
 * A bucket hosted by this tablet server: its identity, its table and its log. On one node every
 * replica is the leader, with leader epoch 0; the epoch travels in every batch so that replication can
 * be added without touching storage. Primary-key tables will add a KvTablet here.
 */
import type { PartitionInfo, TableInfo } from '../../common/schema.js';
import type { KvTablet } from './kv/kv-tablet.js';
import type { LogTablet } from './log/log-tablet.js';

export interface TableBucket {
  tableId: number;
  partitionId?: number;
  bucket: number;
}

export function bucketKey(b: TableBucket): string {
  return `${b.tableId}/${b.partitionId ?? '-'}/${b.bucket}`;
}

export interface Replica {
  bucket: TableBucket;
  table: TableInfo;
  partition?: PartitionInfo;
  log: LogTablet;
  /** The bucket's current state, for primary-key tables. */
  kv?: KvTablet;
  leaderEpoch: number;
  /** First log offset the lake does not hold (lake-enabled tables); retention keeps everything from it. */
  lakeEndOffset?: bigint;
}
