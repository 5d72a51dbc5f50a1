/**
 * docs/configuration.md is generated from the option declaration; this fails when someone changes
 * an option without regenerating it (`npm run docs:config`).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { CONFIGURATION_DOC, renderConfigurationDocs } from '../scripts/gen-config-docs.js';
import { OPTIONS } from '../src/common/config.js';

test('docs/configuration.md matches the option declaration', () => {
  const expected = renderConfigurationDocs();
  for (const o of OPTIONS) assert.ok(expected.includes(`| \`${o.key}\` |`), `the generated text documents ${o.key}`);
  assert.equal(fs.readFileSync(CONFIGURATION_DOC, 'utf8'), expected, 'docs/configuration.md is stale: run `npm run docs:config`');
});
