/**
 * ListGroups (key 16), versions 0-4, flexible from 3.
 *
 *   request   StatesFilter [string] (v4+: empty = every state)
 *   response  ThrottleTimeMs int32 (v1+), ErrorCode int16,
 *             Groups [GroupId string, ProtocolType string, GroupState string (v4+)]
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface ListGroupsRequest {
  statesFilter: string[];
}

export interface ListGroupsResponse {
  throttleTimeMs: number;
  errorCode: number;
  groups: { groupId: string; protocolType: string; groupState: string }[];
}

export const ListGroups = kafkaApi<ListGroupsRequest, ListGroupsResponse>(
  16,
  'ListGroups',
  0,
  4,
  message('ListGroupsRequest', '3+', [f('StatesFilter', { array: 'string' }, '4+')]),
  message('ListGroupsResponse', '3+', [
    f('ThrottleTimeMs', 'int32', '1+'),
    f('ErrorCode', 'int16', '0+'),
    f('Groups', { array: [f('GroupId', 'string', '0+'), f('ProtocolType', 'string', '0+'), f('GroupState', 'string', '4+')] }, '0+'),
  ]),
);
