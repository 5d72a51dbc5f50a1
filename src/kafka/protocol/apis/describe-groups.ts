/**
 * DescribeGroups (key 15), versions 0-4 (5 is the first flexible one).
 *
 *   request   Groups [string], IncludeAuthorizedOperations bool (v3+)
 *   response  ThrottleTimeMs int32 (v1+),
 *             Groups [ErrorCode int16, GroupId string, GroupState string, ProtocolType string,
 *                     ProtocolData string (the chosen protocol),
 *                     Members [MemberId string, GroupInstanceId nullable string (v4+),
 *                              ClientId string, ClientHost string, MemberMetadata bytes,
 *                              MemberAssignment bytes],
 *                     AuthorizedOperations int32 (v3+)]
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface DescribedMember {
  memberId: string;
  groupInstanceId: string | null;
  clientId: string;
  clientHost: string;
  memberMetadata: Buffer;
  memberAssignment: Buffer;
}

export interface DescribedGroup {
  errorCode: number;
  groupId: string;
  groupState: string;
  protocolType: string;
  protocolData: string;
  members: DescribedMember[];
}

export interface DescribeGroupsRequest {
  groups: string[];
  includeAuthorizedOperations: boolean;
}

export interface DescribeGroupsResponse {
  throttleTimeMs: number;
  groups: DescribedGroup[];
}

const UNKNOWN_OPERATIONS = -2147483648;

export const DescribeGroups = kafkaApi<DescribeGroupsRequest, DescribeGroupsResponse>(
  15,
  'DescribeGroups',
  0,
  4,
  message('DescribeGroupsRequest', '5+', [f('Groups', { array: 'string' }, '0+'), f('IncludeAuthorizedOperations', 'bool', '3+')]),
  message('DescribeGroupsResponse', '5+', [
    f('ThrottleTimeMs', 'int32', '1+'),
    f(
      'Groups',
      {
        array: [
          f('ErrorCode', 'int16', '0+'),
          f('GroupId', 'string', '0+'),
          f('GroupState', 'string', '0+'),
          f('ProtocolType', 'string', '0+'),
          f('ProtocolData', 'string', '0+'),
          f(
            'Members',
            {
              array: [
                f('MemberId', 'string', '0+'),
                f('GroupInstanceId', 'string', '4+', { nullableVersions: '4+', default: null }),
                f('ClientId', 'string', '0+'),
                f('ClientHost', 'string', '0+'),
                f('MemberMetadata', 'bytes', '0+'),
                f('MemberAssignment', 'bytes', '0+'),
              ],
            },
            '0+',
          ),
          f('AuthorizedOperations', 'int32', '3+', { default: UNKNOWN_OPERATIONS }),
        ],
      },
      '0+',
    ),
  ]),
  { response: 'groups', request: 'groups', keys: { groupId: '' } },
);
