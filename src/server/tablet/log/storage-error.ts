/**
 * I/O failures of the log become LOG_STORAGE_EXCEPTION, with the failing file in the message; a
 * write that found the disk full becomes DISK_WRITE_LOCKED (retriable).
 */
import type { TributaryError } from '../../../common/errors.js';
import { ioError } from '../../../common/files.js';

export function storageError(what: string, err: unknown): TributaryError {
  return ioError('LOG_STORAGE_EXCEPTION', what, err);
}
