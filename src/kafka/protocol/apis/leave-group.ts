/**
 * LeaveGroup (key 13), versions 0-3 (4 is the first flexible one).
 *
 *   request   GroupId string, MemberId string (v0-2),
 *             Members [MemberId string, GroupInstanceId nullable string] (v3+)
 *   response  ThrottleTimeMs int32 (v1+), ErrorCode int16,
 *             Members [MemberId string, GroupInstanceId nullable string, ErrorCode int16] (v3+)
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface LeaveGroupRequest {
  groupId: string;
  memberId: string;
  members: { memberId: string; groupInstanceId: string | null }[];
}

export interface LeaveGroupResponse {
  throttleTimeMs: number;
  errorCode: number;
  members: { memberId: string; groupInstanceId: string | null; errorCode: number }[];
}

export const LeaveGroup = kafkaApi<LeaveGroupRequest, LeaveGroupResponse>(
  13,
  'LeaveGroup',
  0,
  3,
  message('LeaveGroupRequest', '4+', [
    f('GroupId', 'string', '0+'),
    f('MemberId', 'string', '0-2'),
    f('Members', { array: [f('MemberId', 'string', '3+'), f('GroupInstanceId', 'string', '3+', { nullableVersions: '3+', default: null })] }, '3+'),
  ]),
  message('LeaveGroupResponse', '4+', [
    f('ThrottleTimeMs', 'int32', '1+'),
    f('ErrorCode', 'int16', '0+'),
    f('Members', { array: [f('MemberId', 'string', '3+'), f('GroupInstanceId', 'string', '3+', { nullableVersions: '3+', default: null }), f('ErrorCode', 'int16', '3+')] }, '3+'),
  ]),
);
