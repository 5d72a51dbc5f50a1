/**
 * JoinGroup (key 11), versions 0-5 (6 is the first flexible one), the first step of a rebalance.
 *
 *   request   GroupId string, SessionTimeoutMs int32, RebalanceTimeoutMs int32 (v1+; v0: the
 *             session timeout), MemberId string, GroupInstanceId nullable string (v5+),
 *             ProtocolType string, Protocols [Name string, Metadata bytes]
 *   response  ThrottleTimeMs int32 (v2+), ErrorCode int16, GenerationId int32, ProtocolName string,
 *             Leader string, MemberId string,
 *             Members [MemberId string, GroupInstanceId nullable string (v5+), Metadata bytes]
 *
 * The coordinator answers once the rebalance's join phase ends; only the leader gets Members, each
 * with its metadata of the chosen protocol, which the coordinator never reads.
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface JoinGroupRequest {
  groupId: string;
  sessionTimeoutMs: number;
  rebalanceTimeoutMs: number;
  memberId: string;
  groupInstanceId: string | null;
  protocolType: string;
  protocols: { name: string; metadata: Buffer }[];
}

export interface JoinGroupResponse {
  throttleTimeMs: number;
  errorCode: number;
  generationId: number;
  protocolName: string;
  leader: string;
  memberId: string;
  members: { memberId: string; groupInstanceId: string | null; metadata: Buffer }[];
}

export const JoinGroup = kafkaApi<JoinGroupRequest, JoinGroupResponse>(
  11,
  'JoinGroup',
  0,
  5,
  message('JoinGroupRequest', '6+', [
    f('GroupId', 'string', '0+'),
    f('SessionTimeoutMs', 'int32', '0+'),
    f('RebalanceTimeoutMs', 'int32', '1+', { default: -1 }),
    f('MemberId', 'string', '0+'),
    f('GroupInstanceId', 'string', '5+', { nullableVersions: '5+', default: null }),
    f('ProtocolType', 'string', '0+'),
    f('Protocols', { array: [f('Name', 'string', '0+'), f('Metadata', 'bytes', '0+')] }, '0+'),
  ]),
  message('JoinGroupResponse', '6+', [
    f('ThrottleTimeMs', 'int32', '2+'),
    f('ErrorCode', 'int16', '0+'),
    f('GenerationId', 'int32', '0+', { default: -1 }),
    f('ProtocolName', 'string', '0+'),
    f('Leader', 'string', '0+'),
    f('MemberId', 'string', '0+'),
    f('Members', { array: [f('MemberId', 'string', '0+'), f('GroupInstanceId', 'string', '5+', { nullableVersions: '5+', default: null }), f('Metadata', 'bytes', '0+')] }, '0+'),
  ]),
);
