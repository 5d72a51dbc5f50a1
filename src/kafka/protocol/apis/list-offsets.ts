/**
 * ListOffsets (key 2), versions 1-7 (0 returns several offsets per partition), flexible from 6.
 *
 *   request   ReplicaId int32, IsolationLevel int8 (v2+),
 *             Topics [Name string, Partitions [PartitionIndex int32, CurrentLeaderEpoch int32 (v4+),
 *                                              Timestamp int64]]
 *   response  ThrottleTimeMs int32 (v2+),
 *             Topics [Name string, Partitions [PartitionIndex int32, ErrorCode int16,
 *                                              Timestamp int64, Offset int64, LeaderEpoch int32 (v4+)]]
 *
 * Timestamp -1 asks for the latest offset (the high watermark), -2 the earliest, -3 (v7+) the
 * offset of the record with the largest timestamp; any other value the first offset whose record
 * timestamp is at or after it.
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export const LATEST_TIMESTAMP = -1n;
export const EARLIEST_TIMESTAMP = -2n;
export const MAX_TIMESTAMP = -3n;

export interface ListOffsetsRequest {
  replicaId: number;
  isolationLevel: number;
  topics: { name: string; partitions: { partitionIndex: number; currentLeaderEpoch: number; timestamp: bigint }[] }[];
}

export interface ListOffsetsPartitionResponse {
  partitionIndex: number;
  errorCode: number;
  timestamp: bigint;
  offset: bigint;
  leaderEpoch: number;
}

export interface ListOffsetsResponse {
  throttleTimeMs: number;
  topics: { name: string; partitions: ListOffsetsPartitionResponse[] }[];
}

export const ListOffsets = kafkaApi<ListOffsetsRequest, ListOffsetsResponse>(
  2,
  'ListOffsets',
  1,
  7,
  message('ListOffsetsRequest', '6+', [
    f('ReplicaId', 'int32', '0+'),
    f('IsolationLevel', 'int8', '2+'),
    f('Topics', { array: [f('Name', 'string', '0+'), f('Partitions', { array: [f('PartitionIndex', 'int32', '0+'), f('CurrentLeaderEpoch', 'int32', '4+', { default: -1 }), f('Timestamp', 'int64', '0+')] }, '0+')] }, '0+'),
  ]),
  message('ListOffsetsResponse', '6+', [
    f('ThrottleTimeMs', 'int32', '2+'),
    f(
      'Topics',
      {
        array: [
          f('Name', 'string', '0+'),
          f(
            'Partitions',
            {
              array: [
                f('PartitionIndex', 'int32', '0+'),
                f('ErrorCode', 'int16', '0+'),
                f('Timestamp', 'int64', '1+', { default: -1n }),
                f('Offset', 'int64', '1+', { default: -1n }),
                f('LeaderEpoch', 'int32', '4+', { default: -1 }),
              ],
            },
            '0+',
          ),
        ],
      },
      '0+',
    ),
  ]),
  { response: 'topics', request: 'topics', keys: { name: 'name' }, items: { response: 'partitions', request: 'partitions', keys: { partitionIndex: 'partitionIndex' } } },
);
