/**
 * FindCoordinator (key 10), versions 0-3 (4 asks for several keys at once), flexible from 3.
 *
 *   request   Key string, KeyType int8 (v1+: 0 group, 1 transaction)
 *   response  ThrottleTimeMs int32 (v1+), ErrorCode int16, ErrorMessage nullable string (v1+),
 *             NodeId int32, Host string, Port int32
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export const KEY_TYPE_GROUP = 0;

export interface FindCoordinatorRequest {
  key: string;
  keyType: number;
}

export interface FindCoordinatorResponse {
  throttleTimeMs: number;
  errorCode: number;
  errorMessage: string | null;
  nodeId: number;
  host: string;
  port: number;
}

export const FindCoordinator = kafkaApi<FindCoordinatorRequest, FindCoordinatorResponse>(
  10,
  'FindCoordinator',
  0,
  3,
  message('FindCoordinatorRequest', '3+', [f('Key', 'string', '0+'), f('KeyType', 'int8', '1+')]),
  message('FindCoordinatorResponse', '3+', [
    f('ThrottleTimeMs', 'int32', '1+'),
    f('ErrorCode', 'int16', '0+'),
    f('ErrorMessage', 'string', '1+', { nullableVersions: '1+', default: null }),
    f('NodeId', 'int32', '0+'),
    f('Host', 'string', '0+'),
    f('Port', 'int32', '0+'),
  ]),
);
