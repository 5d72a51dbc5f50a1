/**
 * Change types of log records (DESIGN.md §2): the byte stored per record in changelog batches and
 * the short name users see. Log tables write only `+A`; primary-key tables write their changelog
 * with the other four.
 */
export type ChangeType = '+A' | '+I' | '-U' | '+U' | '-D';

const BY_BYTE: readonly ChangeType[] = ['+A', '+I', '-U', '+U', '-D'];

export const CHANGE_TYPE_BYTE: Readonly<Record<ChangeType, number>> = { '+A': 0, '+I': 1, '-U': 2, '+U': 3, '-D': 4 };

/** The change type of a stored byte, or undefined for a byte no writer produces. */
export function changeTypeOf(byte: number): ChangeType | undefined {
  return BY_BYTE[byte];
}
