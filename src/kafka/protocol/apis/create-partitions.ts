/**
 * CreatePartitions (key 37), versions 0-3, flexible from 2.
 *
 *   request   Topics [Name string, Count int32, Assignments nullable [BrokerIds [int32]]],
 *             TimeoutMs int32, ValidateOnly bool
 *   response  ThrottleTimeMs int32, Results [Name string, ErrorCode int16, ErrorMessage nullable string]
 *
 * Tributary refuses every request: a table's bucket count is fixed at creation.
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface CreatePartitionsRequest {
  topics: { name: string; count: number; assignments: { brokerIds: number[] }[] | null }[];
  timeoutMs: number;
  validateOnly: boolean;
}

export interface CreatePartitionsResponse {
  throttleTimeMs: number;
  results: { name: string; errorCode: number; errorMessage: string | null }[];
}

export const CreatePartitions = kafkaApi<CreatePartitionsRequest, CreatePartitionsResponse>(
  37,
  'CreatePartitions',
  0,
  3,
  message('CreatePartitionsRequest', '2+', [
    f('Topics', { array: [f('Name', 'string', '0+'), f('Count', 'int32', '0+'), f('Assignments', { array: [f('BrokerIds', { array: 'int32' }, '0+')] }, '0+', { nullableVersions: '0+' })] }, '0+'),
    f('TimeoutMs', 'int32', '0+'),
    f('ValidateOnly', 'bool', '0+'),
  ]),
  message('CreatePartitionsResponse', '2+', [
    f('ThrottleTimeMs', 'int32', '0+'),
    f('Results', { array: [f('Name', 'string', '0+'), f('ErrorCode', 'int16', '0+'), f('ErrorMessage', 'string', '0+', { nullableVersions: '0+', default: null })] }, '0+'),
  ]),
  { response: 'results', request: 'topics', keys: { name: 'name' } },
);
