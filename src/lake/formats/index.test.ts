import assert from 'node:assert/strict';
import { test } from 'node:test';
import { optionDef } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import { LAKE_FORMATS, lakeFormat } from './index.js';

test('every datalake.format value the option takes has a format, and the default is one', () => {
  const def = optionDef('datalake.format')!;
  assert.deepEqual([...def.enumValues!].sort(), [...LAKE_FORMATS].sort());
  assert.equal(lakeFormat(def.default!).name, def.default);
});

test('a format name from elsewhere (a server, a flag) that is no format fails with INVALID_CONFIG_EXCEPTION naming the supported ones', () => {
  for (const name of ['paimon', 'ICEBERG', '', 'constructor']) {
    assert.throws(
      () => lakeFormat(name),
      (err: unknown) => err instanceof TributaryError && err.errorName === 'INVALID_CONFIG_EXCEPTION' && err.message === `datalake.format '${name}' is not supported; supported: iceberg`,
      name,
    );
  }
});
