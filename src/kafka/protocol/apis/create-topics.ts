/**
 * CreateTopics (key 19), versions 0-4 (5 adds per-topic configs to the response and flexible
 * encoding).
 *
 *   request   Topics [Name string, NumPartitions int32, ReplicationFactor int16,
 *                     Assignments [PartitionIndex int32, BrokerIds [int32]],
 *                     Configs [Name string, Value nullable string]],
 *             TimeoutMs int32, ValidateOnly bool (v1+)
 *   response  ThrottleTimeMs int32 (v2+),
 *             Topics [Name string, ErrorCode int16, ErrorMessage nullable string (v1+)]
 *
 * NumPartitions and ReplicationFactor -1 take the broker's defaults.
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface CreatableTopic {
  name: string;
  numPartitions: number;
  replicationFactor: number;
  assignments: { partitionIndex: number; brokerIds: number[] }[];
  configs: { name: string; value: string | null }[];
}

export interface CreateTopicsRequest {
  topics: CreatableTopic[];
  timeoutMs: number;
  validateOnly: boolean;
}

export interface CreateTopicsResponse {
  throttleTimeMs: number;
  topics: { name: string; errorCode: number; errorMessage: string | null }[];
}

export const CreateTopics = kafkaApi<CreateTopicsRequest, CreateTopicsResponse>(
  19,
  'CreateTopics',
  0,
  4,
  message('CreateTopicsRequest', 'none', [
    f(
      'Topics',
      {
        array: [
          f('Name', 'string', '0+'),
          f('NumPartitions', 'int32', '0+'),
          f('ReplicationFactor', 'int16', '0+'),
          f('Assignments', { array: [f('PartitionIndex', 'int32', '0+'), f('BrokerIds', { array: 'int32' }, '0+')] }, '0+'),
          f('Configs', { array: [f('Name', 'string', '0+'), f('Value', 'string', '0+', { nullableVersions: '0+' })] }, '0+'),
        ],
      },
      '0+',
    ),
    f('TimeoutMs', 'int32', '0+'),
    f('ValidateOnly', 'bool', '1+'),
  ]),
  message('CreateTopicsResponse', 'none', [
    f('ThrottleTimeMs', 'int32', '2+'),
    f('Topics', { array: [f('Name', 'string', '0+'), f('ErrorCode', 'int16', '0+'), f('ErrorMessage', 'string', '1+', { nullableVersions: '0+', default: null })] }, '0+'),
  ]),
  { response: 'topics', request: 'topics', keys: { name: 'name' } },
);
