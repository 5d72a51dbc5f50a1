/**
 * Recursive-descent parser of Tributary's SQL dialect: Flink SQL DDL as Fluss users know it, plus
 * INSERT, UPDATE, DELETE and queries, whose queries, expressions and conditions are handed on to
 * DuckDB as text, untouched. Keywords are case-insensitive; identifiers keep the case they are
 * written in.
 *
 * Grammar ([x] optional, {x} repeated, | alternatives; `name` = word | quoted; `text` = string):
 *
 *   statement   = ( create | drop | show | use | set | describe | alter | call | insert | update | delete | query ) [';']
 *   create      = CREATE DATABASE [IF NOT EXISTS] name [COMMENT text]
 *               | CREATE TABLE [IF NOT EXISTS] table '(' element {',' element} ')'
 *                   [COMMENT text] [PARTITIONED BY names] [WITH options]
 *   element     = name type [NOT NULL | NULL] [[CONSTRAINT name] PRIMARY KEY NOT ENFORCED] [COMMENT text]
 *               | [CONSTRAINT name] PRIMARY KEY names NOT ENFORCED
 *   type        = the tokens up to NOT, NULL, PRIMARY, CONSTRAINT, COMMENT, FIRST, AFTER, ',' or ')' outside
 *                 parentheses and angle brackets, read by `parseDataType`
 *   drop        = DROP DATABASE [IF EXISTS] name [RESTRICT | CASCADE]
 *               | DROP TABLE [IF EXISTS] table [PURGE] | DROP LAKE TABLE [IF EXISTS] table
 *   show        = SHOW DATABASES | SHOW TABLES [(FROM | IN) name] | SHOW CREATE TABLE table
 *               | SHOW PARTITIONS table [PARTITION partition] | SHOW LAKE STATUS table | SHOW LAKE TABLES
 *               | SHOW TABLE STORAGE table
 *               | SHOW TABLET SERVERS
 *               | SHOW CONSUMER GROUPS
 *   use         = USE name
 *   set         = SET [text '=' text] | RESET [text]      session options; bare SET lists them
 *   describe    = (DESCRIBE | DESC) table
 *   alter       = ALTER TABLE table ( SET options | RESET '(' text {',' text} ')'
 *               | ADD [IF NOT EXISTS] PARTITION partition | DROP [IF EXISTS] PARTITION partition
 *               | ADD [COLUMN] added {',' ADD [COLUMN] added} | ADD '(' added {',' added} ')' )
 *   added       = name type [NOT NULL | NULL] [COMMENT text]      appended after the existing columns;
 *                 a PRIMARY KEY is INVALID_ALTER_TABLE_EXCEPTION, FIRST / AFTER SQL_UNSUPPORTED
 *   call        = CALL [name '.'] SYS '.' name '(' [argument {',' argument}] ')'
 *   argument    = [name '=>'] (text | number)            a procedure of procedures.ts, as Fluss's
 *   insert      = INSERT INTO table [names] query
 *   update      = UPDATE table SET name '=' expression {',' name '=' expression} [WHERE condition]
 *   delete      = DELETE FROM table [WHERE condition]
 *   expression  = tokens up to a ',' or WHERE outside parentheses and brackets, or the end
 *   condition   = <anything, kept as text>
 *   query       = (SELECT | WITH | VALUES | FROM | EXPLAIN | '(') <anything, kept as text> [EMIT CHANGES]
 *   table       = name ['.' name]
 *   names       = '(' name {',' name} ')'
 *   options     = '(' text '=' text {',' text '=' text} ')'
 *   partition   = '(' name '=' (text | number) {',' name '=' (text | number)} ')'
 *
 * Errors are SQL_PARSE_ERROR with `line L, column C: expected ..., found ...`, SQL_UNSUPPORTED for
 * statements recognised but not supported, and INVALID_TYPE (with the position) for column types.
 */
import { TributaryError } from '../../common/errors.js';
import type { ColumnSpec, TableDescriptor } from '../../common/schema.js';
import { parseDataType } from '../../common/types.js';
import type { PartitionSpec, Statement, TableName } from './ast.js';
import { Lexer, type SourcePosition, type Token } from './lexer.js';

const QUERY_START = new Set(['SELECT', 'WITH', 'VALUES', 'FROM']);
/** Words that end a column type. */
const TYPE_END = new Set(['NOT', 'NULL', 'PRIMARY', 'CONSTRAINT', 'COMMENT', 'FIRST', 'AFTER']);
/** Statements we recognise but do not run. */
const UNSUPPORTED = new Set(['MERGE', 'TRUNCATE', 'LOAD', 'UNLOAD']);

/**
 * Parses one statement. `origin` is where `sql` starts inside a larger script (see
 * `splitStatements`), so that error positions name the script's lines.
 */
/**
 * The values of each row of `VALUES (...), (...)`, as text: split at the commas outside nested
 * brackets. Undefined when the text is beyond this lexer (DuckDB's own literal syntax).
 */
function valuesRows(query: string): string[][] | undefined {
  const lx = new Lexer(query);
  const isSymbol = (t: Token, c: string): boolean => t.kind === 'symbol' && t.text === c;
  try {
    lx.next(); // VALUES
    const rows: string[][] = [];
    do {
      if (!isSymbol(lx.next(), '(')) return undefined;
      const row: string[] = [];
      let depth = 0;
      let value: { start: number; end: number } | undefined;
      for (let t = lx.next(); depth > 0 || !isSymbol(t, ')'); t = lx.next()) {
        if (t.kind === 'eof') return undefined;
        if (depth === 0 && isSymbol(t, ',')) {
          row.push(value ? query.slice(value.start, value.end) : '');
          value = undefined;
          continue;
        }
        if (t.kind === 'symbol' && '([{'.includes(t.text)) depth++;
        else if (t.kind === 'symbol' && ')]}'.includes(t.text)) depth--;
        value = { start: value?.start ?? t.start, end: t.end };
      }
      if (value || row.length > 0) row.push(value ? query.slice(value.start, value.end) : '');
      rows.push(row);
    } while (isSymbol(lx.peek(), ',') && lx.next());
    return rows;
  } catch {
    return undefined;
  }
}

export function parseStatement(sql: string, origin?: SourcePosition): Statement {
  return new Parser(new Lexer(sql, origin)).statement();
}

function describe(t: Token): string {
  switch (t.kind) {
    case 'eof':
      return 'end of input';
    case 'string':
      return `string '${t.text}'`;
    case 'quoted':
      return `identifier \`${t.text}\``;
    default:
      return `'${t.text}'`;
  }
}

class Parser {
  constructor(private readonly lx: Lexer) {}

  statement(): Statement {
    const t = this.lx.peek();
    if (t.kind === 'eof') throw this.error(t, 'empty statement');
    if ((t.kind === 'symbol' && t.text === '(') || QUERY_START.has(t.upper) || t.upper === 'EXPLAIN') {
      return this.query(t);
    }
    if (t.kind === 'word') {
      let s: Statement | undefined;
      switch (t.upper) {
        case 'CREATE':
          s = this.create();
          break;
        case 'DROP':
          s = this.drop();
          break;
        case 'SHOW':
          s = this.show();
          break;
        case 'USE':
          this.lx.next();
          s = { kind: 'useDatabase', database: this.name('a database name') };
          break;
        case 'DESCRIBE':
        case 'DESC':
          this.lx.next();
          s = { kind: 'describeTable', table: this.tableName() };
          break;
        case 'ALTER':
          s = this.alter();
          break;
        case 'CALL':
          s = this.call();
          break;
        case 'SET':
        case 'RESET':
          s = this.setOption();
          break;
        case 'INSERT':
          // The query part runs to the end: nothing follows it.
          return this.insert();
        case 'UPDATE':
          return this.update();
        case 'DELETE':
          return this.delete();
        default:
          if (UNSUPPORTED.has(t.upper)) throw this.unsupported(t, `${t.upper} is not supported yet`);
      }
      if (s) {
        this.end();
        return s;
      }
    }
    throw this.expected(t, 'a statement (SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, SHOW, DESCRIBE, USE or CALL)');
  }

  // --- statements ---------------------------------------------------------------------------

  private create(): Statement {
    this.lx.next();
    const what = this.lx.next();
    if (what.upper === 'DATABASE') {
      const ifNotExists = this.ifNotExists();
      const database = this.name('a database name');
      const comment = this.acceptWord('COMMENT') ? this.text('a comment') : undefined;
      return { kind: 'createDatabase', database, ifNotExists, ...(comment !== undefined ? { comment } : {}) };
    }
    if (what.upper === 'TABLE') return this.createTable();
    if (what.kind === 'word') throw this.unsupported(what, `CREATE ${what.upper} is not supported`);
    throw this.expected(what, 'DATABASE or TABLE');
  }

  private createTable(): Statement {
    const ifNotExists = this.ifNotExists();
    const table = this.tableName();
    const after = this.lx.peek();
    if (after.upper === 'AS' || after.upper === 'LIKE') throw this.unsupported(after, `CREATE TABLE ... ${after.upper} is not supported yet`);
    this.symbol('(');
    const columns: ColumnSpec[] = [];
    let primaryKey: string[] | undefined;
    const setPrimaryKey = (at: Token, key: string[]): void => {
      if (primaryKey) throw this.error(at, 'a table has at most one PRIMARY KEY');
      primaryKey = key;
    };
    do {
      const t = this.lx.peek();
      if (t.upper === 'PRIMARY' || t.upper === 'CONSTRAINT') {
        this.constraintName();
        this.word('PRIMARY');
        this.word('KEY');
        const key = this.names();
        this.notEnforced();
        setPrimaryKey(t, key);
      } else if (t.upper === 'WATERMARK' && this.lx.peek(1).upper === 'FOR') {
        throw this.unsupported(t, 'WATERMARK is not supported');
      } else {
        const column = this.column();
        if (column.primaryKey) setPrimaryKey(column.primaryKey, [column.spec.name]);
        columns.push(column.spec);
      }
    } while (this.acceptSymbol(','));
    this.symbol(')');
    const comment = this.acceptWord('COMMENT') ? this.text('a comment') : undefined;
    let partitionKeys: string[] | undefined;
    if (this.acceptWord('PARTITIONED')) {
      this.word('BY');
      partitionKeys = this.names();
    }
    const properties = this.acceptWord('WITH') ? this.options() : {};
    const descriptor: TableDescriptor = {
      columns,
      ...(primaryKey ? { primaryKey } : {}),
      ...(partitionKeys ? { partitionKeys } : {}),
      properties,
      ...(comment !== undefined ? { comment } : {}),
    };
    return { kind: 'createTable', table, ifNotExists, descriptor };
  }

  /** One column definition; `primaryKey` is the PRIMARY token of an inline key. */
  private column(what = 'a column name or PRIMARY KEY'): { spec: ColumnSpec; primaryKey?: Token } {
    const name = this.name(what);
    const typeStart = this.lx.peek();
    if (typeStart.upper === 'AS') throw this.unsupported(typeStart, 'computed columns are not supported');
    const type = this.dataType();
    let nullable = true;
    if (this.acceptWord('NOT')) {
      this.word('NULL');
      nullable = false;
    } else this.acceptWord('NULL');
    let primaryKey: Token | undefined;
    const t = this.lx.peek();
    if (t.upper === 'PRIMARY' || t.upper === 'CONSTRAINT') {
      this.constraintName();
      primaryKey = this.word('PRIMARY');
      this.word('KEY');
      this.notEnforced();
    }
    const comment = this.acceptWord('COMMENT') ? this.text('a comment') : undefined;
    return { spec: { name, type, nullable, ...(comment !== undefined ? { comment } : {}) }, ...(primaryKey ? { primaryKey } : {}) };
  }

  /** Collects the type's tokens (see the grammar) and reads them with `parseDataType`. */
  private dataType(): ColumnSpec['type'] {
    const first = this.lx.peek();
    if (first.kind !== 'word') throw this.expected(first, 'a column type');
    let text = '';
    let depth = 0;
    let prev = '';
    for (;;) {
      const t = this.lx.peek();
      if (t.kind === 'eof') break;
      if (depth === 0 && (TYPE_END.has(t.upper) || (t.kind === 'symbol' && (t.text === ',' || t.text === ')')))) break;
      this.lx.next();
      const raw = this.lx.source.slice(t.start, t.end);
      if (raw === '(' || raw === '<') depth++;
      else if ((raw === ')' || raw === '>') && depth > 0) depth--;
      // Canonical spacing, e.g. `DECIMAL(10, 2)` and `ARRAY<INT>`, whatever the input's spacing.
      const tight = raw === '(' || raw === ')' || raw === ',' || raw === '<' || raw === '>' || prev === '(' || prev === '<' || text === '';
      text += (tight ? '' : ' ') + raw;
      prev = raw;
    }
    try {
      return parseDataType(text);
    } catch (err) {
      if (err instanceof TributaryError) throw new TributaryError(err.errorName, `${this.lx.where(first.start)}: ${err.message}`);
      throw err;
    }
  }

  private constraintName(): void {
    if (this.acceptWord('CONSTRAINT')) this.name('a constraint name');
  }

  /** Flink enforces no key constraint, so a key must say so (Flink rejects it otherwise). */
  private notEnforced(): void {
    const t = this.lx.peek();
    if (t.upper === 'NOT') {
      this.lx.next();
      this.word('ENFORCED');
    } else if (t.upper === 'ENFORCED') {
      throw this.unsupported(t, 'ENFORCED primary keys are not supported: declare the key NOT ENFORCED');
    } else {
      throw this.error(t, `PRIMARY KEY must be declared NOT ENFORCED: add NOT ENFORCED after the key columns (found ${describe(t)})`);
    }
  }

  private drop(): Statement {
    this.lx.next();
    const what = this.lx.next();
    if (what.upper === 'DATABASE') {
      const ifExists = this.ifExists();
      const database = this.name('a database name');
      let cascade = false;
      if (this.acceptWord('CASCADE')) cascade = true;
      else this.acceptWord('RESTRICT');
      return { kind: 'dropDatabase', database, ifExists, cascade };
    }
    if (what.upper === 'TABLE') {
      const ifExists = this.ifExists();
      const table = this.tableName();
      return this.acceptWord('PURGE') ? { kind: 'dropTable', table, ifExists, purge: true } : { kind: 'dropTable', table, ifExists };
    }
    if (what.upper === 'LAKE') {
      this.word('TABLE');
      const ifExists = this.ifExists();
      return { kind: 'dropLakeTable', table: this.tableName(), ifExists };
    }
    if (what.kind === 'word') throw this.unsupported(what, `DROP ${what.upper} is not supported`);
    throw this.expected(what, 'DATABASE, TABLE or LAKE TABLE');
  }

  private show(): Statement {
    this.lx.next();
    const what = this.lx.next();
    switch (what.upper) {
      case 'DATABASES':
        return { kind: 'showDatabases' };
      case 'TABLES': {
        if (this.acceptWord('FROM') || this.acceptWord('IN')) return { kind: 'showTables', database: this.name('a database name') };
        return { kind: 'showTables' };
      }
      case 'CREATE':
        this.word('TABLE');
        return { kind: 'showCreateTable', table: this.tableName() };
      case 'PARTITIONS': {
        const table = this.tableName();
        if (this.acceptWord('PARTITION')) return { kind: 'showPartitions', table, partition: this.partitionSpec() };
        return { kind: 'showPartitions', table };
      }
      case 'TABLE':
        this.word('STORAGE');
        return { kind: 'showTableStorage', table: this.tableName() };
      case 'TABLET':
        this.word('SERVERS');
        return { kind: 'showTabletServers' };
      case 'CONSUMER':
        this.word('GROUPS');
        return { kind: 'showConsumerGroups' };
      case 'LAKE':
        if (this.acceptWord('TABLES')) return { kind: 'showLakeTables' };
        this.word('STATUS');
        return { kind: 'showLakeStatus', table: this.tableName() };
      default:
        if (what.kind === 'word') throw this.unsupported(what, `SHOW ${what.upper} is not supported`);
        throw this.expected(what, 'DATABASES, TABLES, PARTITIONS, CREATE TABLE, LAKE STATUS, LAKE TABLES, TABLE STORAGE, TABLET SERVERS or CONSUMER GROUPS');
    }
  }

  private alter(): Statement {
    this.lx.next();
    const what = this.lx.next();
    if (what.upper !== 'TABLE') {
      if (what.kind === 'word') throw this.unsupported(what, `ALTER ${what.upper} is not supported`);
      throw this.expected(what, 'TABLE');
    }
    const table = this.tableName();
    const action = this.lx.next();
    switch (action.upper) {
      case 'SET':
        return { kind: 'alterTableSet', table, properties: this.options() };
      case 'RESET': {
        this.symbol('(');
        const keys: string[] = [];
        do keys.push(this.text('an option key')); while (this.acceptSymbol(','));
        this.symbol(')');
        return { kind: 'alterTableReset', table, keys };
      }
      case 'ADD':
      case 'DROP': {
        const adding = action.upper === 'ADD';
        const t = this.lx.peek();
        if (adding && t.upper !== 'PARTITION' && t.upper !== 'IF') return { kind: 'addColumns', table, columns: this.addedColumns() };
        if (t.upper !== 'PARTITION' && t.upper !== 'IF') throw this.unsupported(t, `ALTER TABLE ... ${action.upper} ${t.kind === 'word' ? `${t.upper} ` : ''}is not supported yet`);
        const condition = adding ? this.ifNotExists() : this.ifExists();
        this.word('PARTITION');
        const partition = this.partitionSpec();
        return adding
          ? { kind: 'addPartition', table, ifNotExists: condition, partition }
          : { kind: 'dropPartition', table, ifExists: condition, partition };
      }
      default:
        if (action.kind === 'word') throw this.unsupported(action, `ALTER TABLE ... ${action.upper} is not supported`);
        throw this.expected(action, 'SET, RESET, ADD, ADD PARTITION or DROP PARTITION');
    }
  }

  /** The columns of ADD COLUMN, after its first ADD: `[COLUMN] added {, ADD [COLUMN] added}` or `(added {, added})`. */
  private addedColumns(): ColumnSpec[] {
    const columns: ColumnSpec[] = [];
    if (this.acceptSymbol('(')) {
      do columns.push(this.addedColumn()); while (this.acceptSymbol(','));
      this.symbol(')');
      return columns;
    }
    do {
      if (columns.length > 0) this.word('ADD');
      this.acceptWord('COLUMN');
      columns.push(this.addedColumn());
    } while (this.acceptSymbol(','));
    return columns;
  }

  private addedColumn(): ColumnSpec {
    const { spec, primaryKey } = this.column('a column name');
    if (primaryKey) {
      throw new TributaryError('INVALID_ALTER_TABLE_EXCEPTION', `${this.lx.where(primaryKey.start)}: ADD COLUMN cannot add a primary-key column: the primary key is fixed when the table is created`);
    }
    const position = this.lx.peek();
    if (position.upper === 'FIRST' || position.upper === 'AFTER') throw this.unsupported(position, `ADD COLUMN ... ${position.upper} is not supported: columns are added after the existing ones`);
    return spec;
  }

  private call(): Statement {
    this.lx.next();
    // [catalog.]sys.procedure: the catalog, if named, is this one.
    const parts = [this.name('a procedure name (sys.procedure)')];
    while (this.acceptSymbol('.')) parts.push(this.name('a procedure name'));
    const at = this.lx.peek();
    if (parts.length < 2 || parts.length > 3 || parts.at(-2)!.toLowerCase() !== 'sys') throw this.error(at, `a procedure is named sys.<procedure>, not ${parts.join('.')}`);
    this.symbol('(');
    const args: { name?: string; value: string }[] = [];
    if (!this.acceptSymbol(')')) {
      do {
        const first = this.lx.next();
        let name: string | undefined;
        let value = first;
        if ((first.kind === 'word' || first.kind === 'quoted') && this.acceptSymbol('=')) {
          this.symbol('>');
          name = first.text;
          value = this.lx.next();
        }
        if (value.kind !== 'string' && value.kind !== 'number') throw this.expected(value, "a procedure argument (a string, a number, or name => value)");
        args.push({ ...(name !== undefined ? { name } : {}), value: value.text });
      } while (this.acceptSymbol(','));
      this.symbol(')');
    }
    return { kind: 'call', procedure: parts.at(-1)!.toLowerCase(), args };
  }

  private setOption(): Statement {
    const verb = this.lx.next().upper;
    const t = this.lx.peek();
    if (t.kind === 'eof' || this.isSymbol(t, ';')) return verb === 'SET' ? { kind: 'showOptions' } : { kind: 'resetOption' };
    const key = this.text("an option key (SET 'key' = 'value')");
    if (verb === 'RESET') return { kind: 'resetOption', key };
    this.symbol('=');
    return { kind: 'setOption', key, value: this.text("an option value (SET 'key' = 'value')") };
  }

  private insert(): Statement {
    this.lx.next();
    const into = this.lx.next();
    if (into.upper === 'OVERWRITE') throw this.unsupported(into, 'INSERT OVERWRITE is not supported');
    if (into.upper !== 'INTO') throw this.expected(into, 'INTO');
    const table = this.tableName();
    let columns: string[] | undefined;
    if (this.isSymbol(this.lx.peek(), '(') && !this.startsQuery(this.lx.peek(1))) columns = this.names();
    const q = this.lx.peek();
    if (!this.startsQuery(q)) throw this.expected(q, 'VALUES, SELECT or WITH');
    const query = this.restOfStatement(q);
    const rows = q.upper === 'VALUES' ? valuesRows(query) : undefined;
    return { kind: 'insert', table, ...(columns ? { columns } : {}), query, ...(rows ? { rows } : {}) };
  }

  private update(): Statement {
    this.lx.next();
    const table = this.tableName();
    this.word('SET');
    const assignments: { column: string; expression: string }[] = [];
    do {
      const at = this.lx.peek();
      const column = this.name('a column name');
      if (assignments.some((a) => a.column === column)) throw this.error(at, `column '${column}' is set twice`);
      this.symbol('=');
      assignments.push({ column, expression: this.expression() });
    } while (this.acceptSymbol(','));
    const where = this.where();
    return { kind: 'update', table, assignments, ...(where !== undefined ? { where } : {}) };
  }

  private delete(): Statement {
    this.lx.next();
    this.word('FROM');
    const table = this.tableName();
    const where = this.where();
    return { kind: 'delete', table, ...(where !== undefined ? { where } : {}) };
  }

  // --- pieces -------------------------------------------------------------------------------

  /** The text of an expression (see the grammar). */
  private expression(): string {
    const first = this.lx.peek();
    let last: Token | undefined;
    let depth = 0;
    for (;;) {
      const t = this.lx.peek();
      if (t.kind === 'eof') break;
      if (t.kind === 'symbol' && (t.text === '(' || t.text === '[')) depth++;
      else if (t.kind === 'symbol' && (t.text === ')' || t.text === ']')) {
        if (depth === 0) break;
        depth--;
      } else if (depth === 0 && ((t.kind === 'symbol' && (t.text === ',' || t.text === ';')) || t.upper === 'WHERE')) break;
      last = this.lx.next();
    }
    if (!last) throw this.expected(first, 'an expression');
    return this.lx.source.slice(first.start, last.end);
  }

  /** `[WHERE condition]` to the end of the statement: the condition's text. */
  private where(): string | undefined {
    if (!this.acceptWord('WHERE')) {
      this.end();
      return undefined;
    }
    const t = this.lx.peek();
    if (t.kind === 'eof' || this.isSymbol(t, ';')) throw this.expected(t, 'a condition');
    return this.restOfStatement(t);
  }


  /** A query; a trailing EMIT CHANGES (not tokenised: the query stays DuckDB's text) makes it a streaming one. */
  private query(from: Token): Statement {
    const sql = this.restOfStatement(from);
    const emit = /\s+EMIT\s+CHANGES$/i.exec(sql);
    return emit ? { kind: 'query', sql: sql.slice(0, emit.index), emitChanges: true } : { kind: 'query', sql };
  }

  private startsQuery(t: Token): boolean {
    return QUERY_START.has(t.upper) || this.isSymbol(t, '(');
  }

  /** The source from `from` to the end, less a trailing `;` and blanks. */
  private restOfStatement(from: Token): string {
    return this.lx.source.slice(from.start).replace(/[\s;]+$/, '');
  }

  private tableName(): TableName {
    const first = this.name('a table name');
    if (!this.acceptSymbol('.')) return { table: first };
    const table = this.name('a table name');
    const t = this.lx.peek();
    if (this.isSymbol(t, '.')) throw this.error(t, 'a table name has at most two parts: database.table');
    return { database: first, table };
  }

  private names(): string[] {
    this.symbol('(');
    const out: string[] = [];
    do out.push(this.name('a column name')); while (this.acceptSymbol(','));
    this.symbol(')');
    return out;
  }

  private options(): Record<string, string> {
    const out: Record<string, string> = {};
    this.symbol('(');
    do {
      const at = this.lx.peek();
      const key = this.text("an option key (options are written 'key' = 'value')");
      this.symbol('=');
      const value = this.text("an option value (options are written 'key' = 'value')");
      if (Object.hasOwn(out, key)) throw this.error(at, `option '${key}' is given twice`);
      out[key] = value;
    } while (this.acceptSymbol(','));
    this.symbol(')');
    return out;
  }

  private partitionSpec(): PartitionSpec {
    const out: PartitionSpec = {};
    this.symbol('(');
    do {
      const at = this.lx.peek();
      const key = this.name('a partition key');
      this.symbol('=');
      const v = this.lx.next();
      if (v.kind !== 'string' && v.kind !== 'number') throw this.expected(v, 'a partition value');
      if (Object.hasOwn(out, key)) throw this.error(at, `partition key '${key}' is given twice`);
      out[key] = v.text;
    } while (this.acceptSymbol(','));
    this.symbol(')');
    return out;
  }

  private ifNotExists(): boolean {
    if (!this.acceptWord('IF')) return false;
    this.word('NOT');
    this.word('EXISTS');
    return true;
  }

  private ifExists(): boolean {
    if (!this.acceptWord('IF')) return false;
    this.word('EXISTS');
    return true;
  }

  private end(): void {
    this.acceptSymbol(';');
    const t = this.lx.peek();
    if (t.kind !== 'eof') throw this.expected(t, 'end of statement');
  }

  // --- tokens -------------------------------------------------------------------------------

  private name(what: string): string {
    const t = this.lx.next();
    if (t.kind !== 'word' && t.kind !== 'quoted') throw this.expected(t, what);
    return t.text;
  }

  private text(what: string): string {
    const t = this.lx.next();
    if (t.kind !== 'string') throw this.expected(t, what);
    return t.text;
  }

  private word(keyword: string): Token {
    const t = this.lx.next();
    if (t.upper !== keyword) throw this.expected(t, keyword);
    return t;
  }

  private acceptWord(keyword: string): boolean {
    if (this.lx.peek().upper !== keyword) return false;
    this.lx.next();
    return true;
  }

  private isSymbol(t: Token, c: string): boolean {
    return t.kind === 'symbol' && t.text === c;
  }

  private symbol(c: string): void {
    const t = this.lx.next();
    if (!this.isSymbol(t, c)) throw this.expected(t, `'${c}'`);
  }

  private acceptSymbol(c: string): boolean {
    if (!this.isSymbol(this.lx.peek(), c)) return false;
    this.lx.next();
    return true;
  }

  private error(t: Token, message: string): TributaryError {
    return new TributaryError('SQL_PARSE_ERROR', `${this.lx.where(t.start)}: ${message}`);
  }

  private expected(t: Token, what: string): TributaryError {
    return this.error(t, `expected ${what}, found ${describe(t)}`);
  }

  private unsupported(t: Token, message: string): TributaryError {
    return new TributaryError('SQL_UNSUPPORTED', `${this.lx.where(t.start)}: ${message}`);
  }
}
