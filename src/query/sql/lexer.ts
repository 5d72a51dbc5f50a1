/**
 * Tokens of Tributary's SQL dialect (Flink SQL DDL as Fluss users know it) and the splitting of a
 * script into statements.
 *
 * Lexical grammar:
 *
 *   word     = (letter | '_') (letter | digit | '_' | '$')*        keywords are words, compared upper-cased
 *   quoted   = '`' (char | '``')* '`'  |  '"' (char | '""')* '"'    an identifier exactly as written
 *   string   = "'" (char | "''")* "'"
 *   number   = digit+ ['.' digit*] [('e' | 'E') ['+' | '-'] digit+]
 *   symbol   = any other single character
 *   comment  = '--' to the end of the line  |  '/*' ... '*' '/'       skipped, like whitespace
 *
 * The lexer is lazy: the parser pulls tokens only as far as it needs, so the text of a query
 * handed on to DuckDB is never tokenised here beyond its first word. (`splitStatements` does read
 * whole scripts: DuckDB's E'...' escapes and $$-quoted strings are not recognised there.)
 */
import { TributaryError } from '../../common/errors.js';

export type TokenKind = 'word' | 'quoted' | 'string' | 'number' | 'symbol' | 'eof';

export interface Token {
  kind: TokenKind;
  /** Words as written; quoted identifiers and strings unescaped; the character of a symbol. */
  text: string;
  /** Upper-cased text of a word (for keyword tests); empty for other kinds. */
  upper: string;
  /** Offsets of the token in the source: [start, end). */
  start: number;
  end: number;
}

/** A 1-based line and column. */
export interface SourcePosition {
  line: number;
  column: number;
}

const WORD_START = /[\p{L}_]/u;
const WORD_PART = /[\p{L}\p{N}_$]/u;

export class Lexer {
  private offset = 0;
  private readonly lookahead: Token[] = [];
  private lineStarts?: number[];
  /** Set when lexing failed on a literal, quoted identifier or comment that the source leaves open. */
  unterminated = false;

  /** `origin` is where `source` begins inside a larger script, so positions name the script's lines. */
  constructor(
    readonly source: string,
    private readonly origin: SourcePosition = { line: 1, column: 1 },
  ) {}

  /** The token `ahead` places after the next one, without consuming anything. */
  peek(ahead = 0): Token {
    while (this.lookahead.length <= ahead) this.lookahead.push(this.scan());
    return this.lookahead[ahead];
  }

  next(): Token {
    return this.lookahead.length > 0 ? (this.lookahead.shift() as Token) : this.scan();
  }

  /** Line and column of a source offset, shifted by the origin. */
  position(offset: number): SourcePosition {
    if (!this.lineStarts) {
      this.lineStarts = [0];
      for (let i = 0; i < this.source.length; i++) if (this.source.charCodeAt(i) === 10) this.lineStarts.push(i + 1);
    }
    let lo = 0;
    let hi = this.lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.lineStarts[mid] <= offset) lo = mid;
      else hi = mid - 1;
    }
    const column = offset - this.lineStarts[lo] + 1;
    return lo === 0 ? { line: this.origin.line, column: this.origin.column + column - 1 } : { line: this.origin.line + lo, column };
  }

  /** `line L, column C` of an offset, the prefix of every parse error. */
  where(offset: number): string {
    const p = this.position(offset);
    return `line ${p.line}, column ${p.column}`;
  }

  private error(offset: number, message: string): TributaryError {
    return new TributaryError('SQL_PARSE_ERROR', `${this.where(offset)}: ${message}`);
  }

  private unterminatedError(offset: number, what: string): TributaryError {
    this.unterminated = true;
    return this.error(offset, `unterminated ${what}`);
  }

  private skipBlanks(): void {
    const s = this.source;
    for (;;) {
      const c = s[this.offset];
      if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f') this.offset++;
      else if (c === '-' && s[this.offset + 1] === '-') {
        const nl = s.indexOf('\n', this.offset);
        this.offset = nl < 0 ? s.length : nl + 1;
      } else if (c === '/' && s[this.offset + 1] === '*') {
        const close = s.indexOf('*/', this.offset + 2);
        if (close < 0) throw this.unterminatedError(this.offset, 'comment');
        this.offset = close + 2;
      } else return;
    }
  }

  /** Reads a quoted run closed by `quote`, where a doubled quote stands for one. */
  private quotedRun(quote: string, what: string): string {
    const s = this.source;
    const start = this.offset;
    let text = '';
    let from = start + 1;
    for (;;) {
      const close = s.indexOf(quote, from);
      if (close < 0) throw this.unterminatedError(start, what);
      text += s.slice(from, close);
      if (s[close + 1] === quote) {
        text += quote;
        from = close + 2;
      } else {
        this.offset = close + 1;
        return text;
      }
    }
  }

  private scan(): Token {
    this.skipBlanks();
    const s = this.source;
    const start = this.offset;
    if (start >= s.length) return { kind: 'eof', text: '', upper: '', start, end: start };
    const c = s[start];
    let kind: TokenKind;
    let text: string;
    if (c === "'") {
      kind = 'string';
      text = this.quotedRun("'", 'string literal');
    } else if (c === '`' || c === '"') {
      kind = 'quoted';
      text = this.quotedRun(c, 'quoted identifier');
      if (text === '') throw this.error(start, 'empty quoted identifier');
    } else if (WORD_START.test(c)) {
      let i = start + 1;
      while (i < s.length && WORD_PART.test(s[i])) i++;
      kind = 'word';
      text = s.slice(start, i);
      this.offset = i;
    } else if (c >= '0' && c <= '9') {
      const m = /^\d+(?:\.\d*)?(?:[eE][+-]?\d+)?/.exec(s.slice(start, start + 400)) as RegExpExecArray;
      kind = 'number';
      text = m[0];
      this.offset = start + text.length;
    } else {
      kind = 'symbol';
      text = c;
      this.offset = start + 1;
    }
    return { kind, text, upper: kind === 'word' ? text.toUpperCase() : '', start, end: this.offset };
  }
}

/** One statement of a script: its text and where that text starts in the script. */
export interface StatementText extends SourcePosition {
  sql: string;
}

/**
 * Splits a script on `;` outside string literals, quoted identifiers and comments. Statements
 * that hold only blanks or comments are dropped; each text runs from its first token to its last.
 */
export function splitStatements(script: string): StatementText[] {
  const lexer = new Lexer(script);
  const out: StatementText[] = [];
  let first: Token | undefined;
  let last: Token | undefined;
  for (;;) {
    const t = lexer.next();
    if (t.kind === 'eof' || (t.kind === 'symbol' && t.text === ';')) {
      if (first && last) out.push({ sql: script.slice(first.start, last.end), ...lexer.position(first.start) });
      if (t.kind === 'eof') return out;
      first = last = undefined;
    } else {
      first ??= t;
      last = t;
    }
  }
}

/**
 * Whether a script read so far ends with a complete statement: its last token is a `;` outside
 * string literals, quoted identifiers and comments. A literal or comment left open may close on a
 * later line: not complete. Any other lexing error is complete, for the statement to report.
 */
export function endsWithStatement(script: string): boolean {
  const lexer = new Lexer(script);
  let last: Token | undefined;
  try {
    for (let t = lexer.next(); t.kind !== 'eof'; t = lexer.next()) last = t;
  } catch {
    return !lexer.unterminated;
  }
  return last?.kind === 'symbol' && last.text === ';';
}
