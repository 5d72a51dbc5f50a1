/**
 * The one place that maps a `datalake.format` name to a lake format (lake-format.ts). It sits
 * beside the formats, not in lake/ itself: every format imports the interface from lake/, so lake/
 * importing a format would close a loop. Its callers are the wiring layers above: the server, the
 * tiering worker, the query layer, the client's backfill and the lake CLI. The server's option is
 * checked against its declaration (common/config.ts) at start; workers and clients get the name
 * from the server with the warehouse.
 */
import { TributaryError } from '../../common/errors.js';
import { ICEBERG, IcebergFormat } from '../iceberg/iceberg-format.js';
import type { LakeFormat, LakeFormatOptions } from '../lake-format.js';

const FORMATS = new Map<string, (options: LakeFormatOptions) => LakeFormat>([[ICEBERG, (options) => new IcebergFormat(options)]]);

/** The names of the formats there are. */
export const LAKE_FORMATS: readonly string[] = [...FORMATS.keys()];

/** The lake format named `name`; INVALID_CONFIG_EXCEPTION naming the supported ones for any other. */
export function lakeFormat(name: string, options: LakeFormatOptions = {}): LakeFormat {
  const make = FORMATS.get(name);
  if (!make) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `datalake.format '${name}' is not supported; supported: ${LAKE_FORMATS.join(', ')}`);
  return make(options);
}
