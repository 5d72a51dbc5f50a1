/**
 * The one place that maps the `datalake.format` option to a lake format (lake-format.ts). It sits
 * beside the formats, not in lake/ itself: every format imports the interface from lake/, so lake/
 * importing a format would close a loop. Its callers are the wiring layers: the server, the tiering
 * worker, the query layer, the client's backfill and the lake CLI.
 */
import { TributaryError } from '../../common/errors.js';
import { ICEBERG, IcebergFormat } from '../iceberg/iceberg-format.js';
import type { LakeFormat } from '../lake-format.js';

/** The formats by their `datalake.format` name. */
const FORMATS: Readonly<Record<string, () => LakeFormat>> = {
  [ICEBERG]: () => new IcebergFormat(),
};

/** The lake format named `name`; INVALID_CONFIG_EXCEPTION naming the supported ones for any other. */
export function lakeFormat(name: string): LakeFormat {
  const make = FORMATS[name.trim().toLowerCase()];
  if (!make) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `datalake.format '${name}' is not supported; supported: ${Object.keys(FORMATS).join(', ')}`);
  return make();
}
