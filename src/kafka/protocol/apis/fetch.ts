/**
 * Fetch (key 1), versions 4-12 (4 is the first with record batch v2; 13 names topics by id),
 * flexible from 12.
 *
 *   request   ReplicaId int32, MaxWaitMs int32, MinBytes int32, MaxBytes int32,
 *             IsolationLevel int8, SessionId int32 (v7+), SessionEpoch int32 (v7+),
 *             Topics [Topic string, Partitions [Partition int32, CurrentLeaderEpoch int32 (v9+),
 *                     FetchOffset int64, LogStartOffset int64 (v5+), PartitionMaxBytes int32]],
 *             ForgottenTopicsData [Topic string, Partitions [int32]] (v7+),
 *             RackId string (v11+)
 *   response  ThrottleTimeMs int32, ErrorCode int16 (v7+), SessionId int32 (v7+),
 *             Responses [Topic string,
 *                        Partitions [PartitionIndex int32, ErrorCode int16, HighWatermark int64,
 *                                    LastStableOffset int64, LogStartOffset int64 (v5+),
 *                                    DivergingEpoch (tag 0, v12+), CurrentLeader (tag 1, v12+),
 *                                    SnapshotId (tag 2, v12+),
 *                                    AbortedTransactions nullable [ProducerId int64, FirstOffset int64],
 *                                    PreferredReadReplica int32 (v11+), Records nullable records]]
 *
 * Tributary keeps no fetch sessions: SessionId is always 0 (a full fetch every time).
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface FetchRequest {
  replicaId: number;
  maxWaitMs: number;
  minBytes: number;
  maxBytes: number;
  isolationLevel: number;
  sessionId: number;
  sessionEpoch: number;
  topics: { topic: string; partitions: { partition: number; currentLeaderEpoch: number; fetchOffset: bigint; logStartOffset: bigint; partitionMaxBytes: number }[] }[];
}

export interface FetchPartitionResponse {
  partitionIndex: number;
  errorCode: number;
  highWatermark: bigint;
  lastStableOffset: bigint;
  logStartOffset: bigint;
  abortedTransactions: { producerId: bigint; firstOffset: bigint }[] | null;
  preferredReadReplica: number;
  records: Uint8Array | null;
}

export interface FetchResponse {
  throttleTimeMs: number;
  errorCode: number;
  sessionId: number;
  responses: { topic: string; partitions: FetchPartitionResponse[] }[];
}

export const Fetch = kafkaApi<FetchRequest, FetchResponse>(
  1,
  'Fetch',
  4,
  12,
  message('FetchRequest', '12+', [
    f('ReplicaId', 'int32', '0+'),
    f('MaxWaitMs', 'int32', '0+'),
    f('MinBytes', 'int32', '0+'),
    f('MaxBytes', 'int32', '3+', { default: 0x7fffffff }),
    f('IsolationLevel', 'int8', '4+'),
    f('SessionId', 'int32', '7+'),
    f('SessionEpoch', 'int32', '7+', { default: -1 }),
    f(
      'Topics',
      {
        array: [
          f('Topic', 'string', '0+'),
          f(
            'Partitions',
            {
              array: [
                f('Partition', 'int32', '0+'),
                f('CurrentLeaderEpoch', 'int32', '9+', { default: -1 }),
                f('FetchOffset', 'int64', '0+'),
                f('LogStartOffset', 'int64', '5+', { default: -1n }),
                f('PartitionMaxBytes', 'int32', '0+'),
              ],
            },
            '0+',
          ),
        ],
      },
      '0+',
    ),
    f('ForgottenTopicsData', { array: [f('Topic', 'string', '7+'), f('Partitions', { array: 'int32' }, '7+')] }, '7+'),
    f('RackId', 'string', '11+'),
  ]),
  message('FetchResponse', '12+', [
    f('ThrottleTimeMs', 'int32', '1+'),
    f('ErrorCode', 'int16', '7+'),
    f('SessionId', 'int32', '7+'),
    f(
      'Responses',
      {
        array: [
          f('Topic', 'string', '0+'),
          f(
            'Partitions',
            {
              array: [
                f('PartitionIndex', 'int32', '0+'),
                f('ErrorCode', 'int16', '0+'),
                f('HighWatermark', 'int64', '0+', { default: -1n }),
                f('LastStableOffset', 'int64', '4+', { default: -1n }),
                f('LogStartOffset', 'int64', '5+', { default: -1n }),
                f('DivergingEpoch', { struct: [f('Epoch', 'int32', '12+', { default: -1 }), f('EndOffset', 'int64', '12+', { default: -1n })] }, '12+', { taggedVersions: '12+', tag: 0 }),
                f('CurrentLeader', { struct: [f('LeaderId', 'int32', '12+', { default: -1 }), f('LeaderEpoch', 'int32', '12+', { default: -1 })] }, '12+', { taggedVersions: '12+', tag: 1 }),
                f('SnapshotId', { struct: [f('EndOffset', 'int64', '0+', { default: -1n }), f('Epoch', 'int32', '0+', { default: -1 })] }, '12+', { taggedVersions: '12+', tag: 2 }),
                f('AbortedTransactions', { array: [f('ProducerId', 'int64', '4+'), f('FirstOffset', 'int64', '4+')] }, '4+', { nullableVersions: '4+' }),
                f('PreferredReadReplica', 'int32', '11+', { default: -1 }),
                f('Records', 'records', '0+', { nullableVersions: '0+' }),
              ],
            },
            '0+',
          ),
        ],
      },
      '0+',
    ),
  ]),
  { response: 'responses', request: 'topics', keys: { topic: 'topic' }, items: { response: 'partitions', request: 'partitions', keys: { partitionIndex: 'partition' } } },
);
