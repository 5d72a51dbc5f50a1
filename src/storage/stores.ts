/**
 * The store of a location: S3 for `s3://` and `s3a://`, else the local store. A process sets its
 * S3 settings once (`configureObjectStorage`, from its options: the servers, `tributary tiering`,
 * `tributary lake`); a process that does not (a client, the SQL shell) reads them from the AWS
 * environment variables (s3-settings.ts). Locations are what Iceberg metadata and remote manifests
 * hold, so every reader finds the store of a file from the file's own name, as Hadoop's
 * FileSystem.get does.
 */
import type { Options } from '../common/config.js';
import { LocalObjectStore } from './local-store.js';
import { isS3Location, type ObjectStore } from './object-store.js';
import { type S3Settings, s3SettingsOf } from './s3-settings.js';
import { S3ObjectStore } from './s3-store.js';

const local = new LocalObjectStore();
let settings: S3Settings | undefined;
let s3: S3ObjectStore | undefined;

/** Uses the `s3.*` options (else the environment) for this process's S3 locations from now on. */
export function configureObjectStorage(options: Options | undefined): void {
  settings = s3SettingsOf(options);
  s3 = undefined;
}

/** The S3 settings in force in this process. */
export function objectStorageSettings(): S3Settings {
  return (settings ??= s3SettingsOf(undefined));
}

/** The store holding `location`. */
export function objectStoreFor(location: string): ObjectStore {
  if (!isS3Location(location)) return local;
  return (s3 ??= new S3ObjectStore(objectStorageSettings()));
}
