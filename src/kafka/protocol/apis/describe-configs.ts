/**
 * DescribeConfigs (key 32), versions 0-2.
 *
 *   request   Resources [ResourceType int8, ResourceName string, ConfigurationKeys nullable [string]],
 *             IncludeSynonyms bool (v1+)
 *   response  ThrottleTimeMs int32,
 *             Results [ErrorCode int16, ErrorMessage nullable string, ResourceType int8, ResourceName string,
 *                      Configs [Name string, Value nullable string, ReadOnly bool, IsDefault bool (v0),
 *                               ConfigSource int8 (v1+), IsSensitive bool,
 *                               Synonyms [Name string, Value nullable string, Source int8] (v1+)]]
 *
 * Resource types: 2 topic, 4 broker.
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export const RESOURCE_TOPIC = 2;
export const RESOURCE_BROKER = 4;
/** ConfigSource values. */
export const SOURCE_TOPIC_CONFIG = 1;
export const SOURCE_STATIC_BROKER_CONFIG = 4;
export const SOURCE_DEFAULT_CONFIG = 5;

export interface DescribeConfigsRequest {
  resources: { resourceType: number; resourceName: string; configurationKeys: string[] | null }[];
  includeSynonyms: boolean;
}

export interface DescribedConfig {
  name: string;
  value: string | null;
  readOnly: boolean;
  isDefault: boolean;
  configSource: number;
  isSensitive: boolean;
  synonyms: { name: string; value: string | null; source: number }[];
}

export interface DescribeConfigsResponse {
  throttleTimeMs: number;
  results: { errorCode: number; errorMessage: string | null; resourceType: number; resourceName: string; configs: DescribedConfig[] }[];
}

export const DescribeConfigs = kafkaApi<DescribeConfigsRequest, DescribeConfigsResponse>(
  32,
  'DescribeConfigs',
  0,
  2,
  message('DescribeConfigsRequest', 'none', [
    f('Resources', { array: [f('ResourceType', 'int8', '0+'), f('ResourceName', 'string', '0+'), f('ConfigurationKeys', { array: 'string' }, '0+', { nullableVersions: '0+' })] }, '0+'),
    f('IncludeSynonyms', 'bool', '1+'),
  ]),
  message('DescribeConfigsResponse', 'none', [
    f('ThrottleTimeMs', 'int32', '0+'),
    f(
      'Results',
      {
        array: [
          f('ErrorCode', 'int16', '0+'),
          f('ErrorMessage', 'string', '0+', { nullableVersions: '0+', default: null }),
          f('ResourceType', 'int8', '0+'),
          f('ResourceName', 'string', '0+'),
          f(
            'Configs',
            {
              array: [
                f('Name', 'string', '0+'),
                f('Value', 'string', '0+', { nullableVersions: '0+' }),
                f('ReadOnly', 'bool', '0+'),
                f('IsDefault', 'bool', '0'),
                f('ConfigSource', 'int8', '1+', { default: -1 }),
                f('IsSensitive', 'bool', '0+'),
                f('Synonyms', { array: [f('Name', 'string', '1+'), f('Value', 'string', '1+', { nullableVersions: '0+' }), f('Source', 'int8', '1+')] }, '1+'),
              ],
            },
            '0+',
          ),
        ],
      },
      '0+',
    ),
  ]),
  { response: 'results', request: 'resources', keys: { resourceType: 'resourceType', resourceName: 'resourceName' } },
);
