/**
 * DeleteTopics (key 20), versions 0-5 (6 names topics by id), flexible from 4.
 *
 *   request   TopicNames [string], TimeoutMs int32
 *   response  ThrottleTimeMs int32 (v1+),
 *             Responses [Name string, ErrorCode int16, ErrorMessage nullable string (v5+)]
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface DeleteTopicsRequest {
  topicNames: string[];
  timeoutMs: number;
}

export interface DeleteTopicsResponse {
  throttleTimeMs: number;
  responses: { name: string; errorCode: number; errorMessage: string | null }[];
}

export const DeleteTopics = kafkaApi<DeleteTopicsRequest, DeleteTopicsResponse>(
  20,
  'DeleteTopics',
  0,
  5,
  message('DeleteTopicsRequest', '4+', [f('TopicNames', { array: 'string' }, '0+'), f('TimeoutMs', 'int32', '0+')]),
  message('DeleteTopicsResponse', '4+', [
    f('ThrottleTimeMs', 'int32', '1+'),
    f('Responses', { array: [f('Name', 'string', '0+'), f('ErrorCode', 'int16', '0+'), f('ErrorMessage', 'string', '5+', { nullableVersions: '5+', default: null })] }, '0+'),
  ]),
  { response: 'responses', request: 'topicNames', keys: { name: '' } },
);
