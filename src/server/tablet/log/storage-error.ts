/** I/O failures of the log become LOG_STORAGE_EXCEPTION, with the failing file in the message. */
import { TributaryError } from '../../../common/errors.js';

export function storageError(what: string, err: unknown): TributaryError {
  if (err instanceof TributaryError) return err;
  return new TributaryError('LOG_STORAGE_EXCEPTION', `${what}: ${(err as Error).message}`, { cause: err });
}
