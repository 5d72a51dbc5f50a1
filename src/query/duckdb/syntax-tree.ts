/**
 * The syntax tree DuckDB's parser gives as JSON (`json_serialize_sql`), read without losing
 * integers: DuckDB writes BIGINT and HUGEINT literals as bare JSON numbers, which JSON.parse would
 * round beyond 2^53, so every integer of 16 or more digits is read as a string of digits instead.
 * (No other part of the tree holds such numbers except `query_location`, which nothing here uses.)
 */

export type Json = { [key: string]: unknown };

export const isObject = (x: unknown): x is Json => typeof x === 'object' && x !== null && !Array.isArray(x);

/** The tree of one statement, and whether a leading EXPLAIN [ANALYZE] was looked through. */
export interface SyntaxTree {
  /** The `json_serialize_sql` output: `{ error: false, statements: [{ node: ... }] }`. */
  json: unknown;
  explain: boolean;
}

/** JSON.parse, with integers of 16 digits or more read as strings of digits. */
export function parseSerializedSql(text: string): unknown {
  let out = '';
  let copied = 0;
  for (let i = 0; i < text.length; ) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // Skip the string: a quote inside it is always escaped.
      i++;
      while (i < text.length && text.charCodeAt(i) !== 0x22) i += text.charCodeAt(i) === 0x5c /* \ */ ? 2 : 1;
      i++;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      let end = i + 1;
      while (end < text.length && /[0-9.eE+-]/.test(text[end])) end++;
      const number = text.slice(i, end);
      if (/^-?\d{16,}$/.test(number)) {
        out += `${text.slice(copied, i)}"${number}"`;
        copied = end;
      }
      i = end;
    } else i++;
  }
  return JSON.parse(copied === 0 ? text : out + text.slice(copied));
}
