/**
 * ApiVersions (key 18), versions 0-3, flexible from 3.
 *
 *   request   v3+: ClientSoftwareName compact string, ClientSoftwareVersion compact string
 *   response  ErrorCode int16, ApiKeys [ApiKey int16, MinVersion int16, MaxVersion int16],
 *             ThrottleTimeMs int32 (v1+)
 *
 * A request at a version the broker does not know is answered at version 0 with
 * UNSUPPORTED_VERSION and the broker's ApiKeys, so that the client can pick a version it shares.
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface ApiVersionsRequest {
  clientSoftwareName: string;
  clientSoftwareVersion: string;
}

export interface ApiVersionsResponse {
  errorCode: number;
  apiKeys: { apiKey: number; minVersion: number; maxVersion: number }[];
  throttleTimeMs?: number;
}

export const ApiVersions = kafkaApi<ApiVersionsRequest, ApiVersionsResponse>(
  18,
  'ApiVersions',
  0,
  3,
  message('ApiVersionsRequest', '3+', [f('ClientSoftwareName', 'string', '3+'), f('ClientSoftwareVersion', 'string', '3+')]),
  message('ApiVersionsResponse', '3+', [
    f('ErrorCode', 'int16', '0+'),
    f('ApiKeys', { array: [f('ApiKey', 'int16', '0+'), f('MinVersion', 'int16', '0+'), f('MaxVersion', 'int16', '0+')] }, '0+'),
    f('ThrottleTimeMs', 'int32', '1+'),
  ]),
);
