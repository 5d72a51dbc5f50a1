/** The package version, sent in ApiVersions by both sides (the file sits two levels below the package root in src/ and in dist/). */
import { createRequire } from 'node:module';

export const SOFTWARE_VERSION: string = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
