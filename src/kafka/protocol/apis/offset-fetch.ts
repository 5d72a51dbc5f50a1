/**
 * OffsetFetch (key 9), versions 0-7 (8 asks for several groups at once), flexible from 6.
 *
 *   request   GroupId string, Topics [Name string, PartitionIndexes [int32]] (nullable from v2:
 *             null = every partition the group committed), RequireStable bool (v7+)
 *   response  ThrottleTimeMs int32 (v3+),
 *             Topics [Name string, Partitions [PartitionIndex int32, CommittedOffset int64,
 *                     CommittedLeaderEpoch int32 (v5+), Metadata nullable string, ErrorCode int16]],
 *             ErrorCode int16 (v2+)
 *
 * A partition without a committed offset answers offset -1 and no error.
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface OffsetFetchPartition {
  partitionIndex: number;
  committedOffset: bigint;
  committedLeaderEpoch: number;
  metadata: string | null;
  errorCode: number;
}

export interface OffsetFetchRequest {
  groupId: string;
  topics: { name: string; partitionIndexes: number[] }[] | null;
  requireStable: boolean;
}

export interface OffsetFetchResponse {
  throttleTimeMs: number;
  topics: { name: string; partitions: OffsetFetchPartition[] }[];
  errorCode: number;
}

export const OffsetFetch = kafkaApi<OffsetFetchRequest, OffsetFetchResponse>(
  9,
  'OffsetFetch',
  0,
  7,
  message('OffsetFetchRequest', '6+', [
    f('GroupId', 'string', '0+'),
    f('Topics', { array: [f('Name', 'string', '0+'), f('PartitionIndexes', { array: 'int32' }, '0+')] }, '0+', { nullableVersions: '2+' }),
    f('RequireStable', 'bool', '7+'),
  ]),
  message('OffsetFetchResponse', '6+', [
    f('ThrottleTimeMs', 'int32', '3+'),
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
                f('CommittedOffset', 'int64', '0+'),
                f('CommittedLeaderEpoch', 'int32', '5+', { default: -1 }),
                f('Metadata', 'string', '0+', { nullableVersions: '0+' }),
                f('ErrorCode', 'int16', '0+'),
              ],
            },
            '0+',
          ),
        ],
      },
      '0+',
    ),
    f('ErrorCode', 'int16', '2+'),
  ]),
  { response: 'topics', request: 'topics', keys: { name: 'name' }, items: { response: 'partitions', request: 'partitionIndexes', keys: { partitionIndex: '' } } },
);
