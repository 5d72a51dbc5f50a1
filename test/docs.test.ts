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

test('docs/dependencies.md says why each package of package.json is there', () => {
  const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as Record<string, Record<string, string>>;
  const doc = fs.readFileSync(new URL('../docs/dependencies.md', import.meta.url), 'utf8');
  for (const name of [...Object.keys(pkg.dependencies), ...Object.keys(pkg.devDependencies)]) {
    assert.ok(doc.includes(`| \`${name}\` | ${pkg.dependencies[name] ?? pkg.devDependencies[name]} |`), `${name} is documented with its pinned version`);
  }
});
