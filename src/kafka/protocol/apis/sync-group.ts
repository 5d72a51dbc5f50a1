/**
 * SyncGroup (key 14), versions 0-3 (4 is the first flexible one), the second step of a rebalance.
 *
 *   request   GroupId string, GenerationId int32, MemberId string,
 *             GroupInstanceId nullable string (v3+), Assignments [MemberId string, Assignment bytes]
 *   response  ThrottleTimeMs int32 (v1+), ErrorCode int16, Assignment bytes
 *
 * The leader sends every member's assignment (the others send none); each member gets its own.
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface SyncGroupRequest {
  groupId: string;
  generationId: number;
  memberId: string;
  groupInstanceId: string | null;
  assignments: { memberId: string; assignment: Buffer }[];
}

export interface SyncGroupResponse {
  throttleTimeMs: number;
  errorCode: number;
  assignment: Buffer;
}

export const SyncGroup = kafkaApi<SyncGroupRequest, SyncGroupResponse>(
  14,
  'SyncGroup',
  0,
  3,
  message('SyncGroupRequest', '4+', [
    f('GroupId', 'string', '0+'),
    f('GenerationId', 'int32', '0+'),
    f('MemberId', 'string', '0+'),
    f('GroupInstanceId', 'string', '3+', { nullableVersions: '3+', default: null }),
    f('Assignments', { array: [f('MemberId', 'string', '0+'), f('Assignment', 'bytes', '0+')] }, '0+'),
  ]),
  message('SyncGroupResponse', '4+', [f('ThrottleTimeMs', 'int32', '1+'), f('ErrorCode', 'int16', '0+'), f('Assignment', 'bytes', '0+')]),
);
