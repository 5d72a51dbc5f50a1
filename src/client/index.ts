/**
 * The TypeScript client of Tributary. It talks to servers over the wire like any program and never
 * imports server code (may import: common, record, rpc, and lake: the lake interface and the format
 * registry, lake/formats, through which the LogScanner reads a lake-enabled table's past).
 */
export { Connection } from './connection.js';
export { Admin, type OffsetSpec, type KvSnapshot, type LakeTieringStatus, type BucketStorageInfo, type TabletServerInfo, type BucketInfo, type BucketStatus, type RebalanceProgress, type RebalanceGoal, type RebalanceStatus, type ServerTag } from './admin.js';
export type { LakeSnapshot, LakeBucketOffset } from '../common/lake.js';
export { Table, Scan, UpsertBuilder, LookupBuilder } from './table.js';
export { AppendWriter } from './append-writer.js';
export { UpsertWriter } from './upsert-writer.js';
export { Lookuper } from './lookuper.js';
export { BatchScanner } from './batch-scanner.js';
export { LogScanner, type ScanRecord, type BucketRef } from './log-scanner.js';
export type { ScanBatch } from './scan-batch.js';
export { TableFollower, type FollowFrom } from './table-follower.js';
export type { ChangeType } from '../common/change-type.js';
export { TributaryError, type ErrorName, ErrorCodes } from '../common/errors.js';
export { Timestamp, type Row } from '../common/values.js';
export type { TableDescriptor, TableInfo, TablePath, ColumnSpec, PartitionInfo, Schema } from '../common/schema.js';
