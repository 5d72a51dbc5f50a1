/**
 * Metadata (key 3), versions 0-9, flexible from 9.
 *
 *   request   Topics [Name string] (nullable from v1: null = every topic; in v0 an empty array is),
 *             AllowAutoTopicCreation bool (v4+), IncludeClusterAuthorizedOperations bool (v8+),
 *             IncludeTopicAuthorizedOperations bool (v8+)
 *   response  ThrottleTimeMs int32 (v3+),
 *             Brokers [NodeId int32, Host string, Port int32, Rack nullable string (v1+)],
 *             ClusterId nullable string (v2+), ControllerId int32 (v1+),
 *             Topics [ErrorCode int16, Name string, IsInternal bool (v1+),
 *                     Partitions [ErrorCode int16, PartitionIndex int32, LeaderId int32,
 *                                 LeaderEpoch int32 (v7+), ReplicaNodes [int32], IsrNodes [int32],
 *                                 OfflineReplicas [int32] (v5+)],
 *                     TopicAuthorizedOperations int32 (v8+)],
 *             ClusterAuthorizedOperations int32 (v8+)
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface MetadataRequest {
  topics: { name: string }[] | null;
  allowAutoTopicCreation: boolean;
}

export interface MetadataPartition {
  errorCode: number;
  partitionIndex: number;
  leaderId: number;
  leaderEpoch: number;
  replicaNodes: number[];
  isrNodes: number[];
  offlineReplicas: number[];
}

export interface MetadataTopic {
  errorCode: number;
  name: string;
  isInternal: boolean;
  partitions: MetadataPartition[];
}

export interface MetadataResponse {
  brokers: { nodeId: number; host: string; port: number; rack: string | null }[];
  clusterId: string | null;
  controllerId: number;
  topics: MetadataTopic[];
}

const UNKNOWN_OPERATIONS = -2147483648;

export const Metadata = kafkaApi<MetadataRequest, MetadataResponse>(
  3,
  'Metadata',
  0,
  9,
  message('MetadataRequest', '9+', [
    f('Topics', { array: [f('Name', 'string', '0+')] }, '0+', { nullableVersions: '1+' }),
    f('AllowAutoTopicCreation', 'bool', '4+', { default: true }),
    f('IncludeClusterAuthorizedOperations', 'bool', '8+'),
    f('IncludeTopicAuthorizedOperations', 'bool', '8+'),
  ]),
  message('MetadataResponse', '9+', [
    f('ThrottleTimeMs', 'int32', '3+'),
    f('Brokers', { array: [f('NodeId', 'int32', '0+'), f('Host', 'string', '0+'), f('Port', 'int32', '0+'), f('Rack', 'string', '1+', { nullableVersions: '1+', default: null })] }, '0+'),
    f('ClusterId', 'string', '2+', { nullableVersions: '2+', default: null }),
    f('ControllerId', 'int32', '1+', { default: -1 }),
    f(
      'Topics',
      {
        array: [
          f('ErrorCode', 'int16', '0+'),
          f('Name', 'string', '0+'),
          f('IsInternal', 'bool', '1+'),
          f(
            'Partitions',
            {
              array: [
                f('ErrorCode', 'int16', '0+'),
                f('PartitionIndex', 'int32', '0+'),
                f('LeaderId', 'int32', '0+'),
                f('LeaderEpoch', 'int32', '7+', { default: -1 }),
                f('ReplicaNodes', { array: 'int32' }, '0+'),
                f('IsrNodes', { array: 'int32' }, '0+'),
                f('OfflineReplicas', { array: 'int32' }, '5+'),
              ],
            },
            '0+',
          ),
          f('TopicAuthorizedOperations', 'int32', '8+', { default: UNKNOWN_OPERATIONS }),
        ],
      },
      '0+',
    ),
    f('ClusterAuthorizedOperations', 'int32', '8+', { default: UNKNOWN_OPERATIONS }),
  ]),
  { response: 'topics', request: 'topics', keys: { name: 'name' } },
);
