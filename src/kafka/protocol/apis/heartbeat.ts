/**
 * Heartbeat (key 12), versions 0-3 (4 is the first flexible one).
 *
 *   request   GroupId string, GenerationId int32, MemberId string, GroupInstanceId nullable string (v3+)
 *   response  ThrottleTimeMs int32 (v1+), ErrorCode int16
 *
 * REBALANCE_IN_PROGRESS tells a member of the current generation to join again.
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface HeartbeatRequest {
  groupId: string;
  generationId: number;
  memberId: string;
  groupInstanceId: string | null;
}

export interface HeartbeatResponse {
  throttleTimeMs: number;
  errorCode: number;
}

export const Heartbeat = kafkaApi<HeartbeatRequest, HeartbeatResponse>(
  12,
  'Heartbeat',
  0,
  3,
  message('HeartbeatRequest', '4+', [
    f('GroupId', 'string', '0+'),
    f('GenerationId', 'int32', '0+'),
    f('MemberId', 'string', '0+'),
    f('GroupInstanceId', 'string', '3+', { nullableVersions: '3+', default: null }),
  ]),
  message('HeartbeatResponse', '4+', [f('ThrottleTimeMs', 'int32', '1+'), f('ErrorCode', 'int16', '0+')]),
);
