/**
 * OffsetCommit (key 8), versions 0-7 (8 is the first flexible one).
 *
 *   request   GroupId string, GenerationId int32 (v1+), MemberId string (v1+),
 *             GroupInstanceId nullable string (v7+), RetentionTimeMs int64 (v2-4),
 *             Topics [Name string, Partitions [PartitionIndex int32, CommittedOffset int64,
 *                     CommittedLeaderEpoch int32 (v6+), CommitTimestamp int64 (v1 only),
 *                     CommittedMetadata nullable string]]
 *   response  ThrottleTimeMs int32 (v3+), Topics [Name string, Partitions [PartitionIndex int32, ErrorCode int16]]
 *
 * GenerationId -1 with an empty MemberId is a commit from outside group management (a consumer
 * that assigns itself partitions), taken while the group has no members.
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface OffsetCommitPartition {
  partitionIndex: number;
  committedOffset: bigint;
  committedLeaderEpoch: number;
  committedMetadata: string | null;
}

export interface OffsetCommitRequest {
  groupId: string;
  generationId: number;
  memberId: string;
  groupInstanceId: string | null;
  topics: { name: string; partitions: OffsetCommitPartition[] }[];
}

export interface OffsetCommitResponse {
  throttleTimeMs: number;
  topics: { name: string; partitions: { partitionIndex: number; errorCode: number }[] }[];
}

export const OffsetCommit = kafkaApi<OffsetCommitRequest, OffsetCommitResponse>(
  8,
  'OffsetCommit',
  0,
  7,
  message('OffsetCommitRequest', '8+', [
    f('GroupId', 'string', '0+'),
    f('GenerationId', 'int32', '1+', { default: -1 }),
    f('MemberId', 'string', '1+'),
    f('GroupInstanceId', 'string', '7+', { nullableVersions: '7+', default: null }),
    f('RetentionTimeMs', 'int64', '2-4', { default: -1n }),
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
                f('CommittedLeaderEpoch', 'int32', '6+', { default: -1 }),
                f('CommitTimestamp', 'int64', '1', { default: -1n }),
                f('CommittedMetadata', 'string', '0+', { nullableVersions: '0+' }),
              ],
            },
            '0+',
          ),
        ],
      },
      '0+',
    ),
  ]),
  message('OffsetCommitResponse', '8+', [
    f('ThrottleTimeMs', 'int32', '3+'),
    f('Topics', { array: [f('Name', 'string', '0+'), f('Partitions', { array: [f('PartitionIndex', 'int32', '0+'), f('ErrorCode', 'int16', '0+')] }, '0+')] }, '0+'),
  ]),
  { response: 'topics', request: 'topics', keys: { name: 'name' }, items: { response: 'partitions', request: 'partitions', keys: { partitionIndex: 'partitionIndex' } } },
);
