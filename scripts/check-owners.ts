import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { typeScriptProgram } from './typescript-program.ts';

/**
 * `npm run check:owners`: every statement on a table lives in that table's module, the modules
 * being those of docs/architecture.md's "Tables" list — the one place they are written. A statement
 * belongs to the table it writes or, for a read, to the table it selects from; its joins and
 * sub-selects may read other tables. The check fails on such a statement outside its table's
 * module, on a table the list does not place, on a table named in a way it cannot read, and on a
 * module the list names that src/ does not have. Migrations are the schema's, not a module's.
 *
 * It reads the code with TypeScript's parser and type checker, so that it sees what a text search
 * would not:
 *
 * - Kysely: `insertInto`, `updateTable`, `deleteFrom` and `mergeInto` write their table wherever
 *   they are; `selectFrom` on a database or a transaction reads it (on an expression builder,
 *   `eb.selectFrom`, it is a sub-select). Joins are a statement's reads.
 * - SQL in `sql` templates: INSERT INTO, UPDATE, DELETE FROM and MERGE INTO write their table
 *   wherever they are; a SELECT at the top of a template (after its WITH list, each branch of a
 *   UNION) reads the table of its FROM. FROM and JOIN inside parentheses, and JOINs, are its
 *   sub-selects and joins; a FROM naming one of the template's WITH queries reads no table.
 * - A table named by an expression — `sql.table(table)`, `selectFrom(MESSAGE_TABLES[kind])` — is
 *   every table its type allows (`'voicemail_drops' | 'templated_emails'`); one whose type is just
 *   `string` cannot be placed, and is reported so.
 *
 * PostgreSQL's own catalogs (`pg_…`, `information_schema`) are no module's.
 */
const ROOT = join(import.meta.dirname, '..');
const DOC = 'docs/architecture.md';

/** Table → the module (a path under src/) holding its statements. */
export function parseOwners(markdown: string): Map<string, string> {
  const section = markdown.split(/^## /m).find((part) => part.startsWith('Tables'));
  const block = section && /```[a-z]*\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error(`${DOC}: no code block under "## Tables"`);
  const owners = new Map<string, string>();
  for (const line of block.split('\n')) {
    if (line.trim() === '' || /^\s/.test(line)) continue;
    const [tables = '', module = ''] = line.split(/ {2,}/);
    if (!/^[a-z0-9/-]+\.ts$/.test(module.trim())) throw new Error(`${DOC}: "${line.trim()}" names no module (src/… .ts) after its tables`);
    for (const table of tables.split(/\s+/).filter(Boolean)) {
      if (owners.has(table)) throw new Error(`${DOC}: ${table} is listed twice`);
      owners.set(table, module.trim());
    }
  }
  return owners;
}

type What = 'writes' | 'reads';

/** One statement's table as the code names it: a name, or an expression to resolve by its type. */
interface Found {
  what: What;
  table: string | ts.Expression;
  at: ts.Node;
}

const KYSELY_WRITES = new Set(['insertInto', 'updateTable', 'deleteFrom', 'mergeInto', 'replaceInto']);
/** The types on which `selectFrom` starts a statement; on any other (an expression builder) it is a sub-select. */
const STATEMENT_STARTERS = new Set(['Kysely', 'Transaction', 'ControlledTransaction', 'QueryCreator']);
const CATALOG = /^(pg_|information_schema\b)/;

/** The table a Kysely argument names (`'deliveries as d'` → deliveries), or the expression to resolve. */
function kyselyTables(argument: ts.Expression): (string | ts.Expression)[] {
  if (ts.isStringLiteralLike(argument)) return [argument.text.trim().split(/\s+/)[0] ?? ''];
  if (ts.isArrayLiteralExpression(argument)) return argument.elements.flatMap((e) => kyselyTables(e as ts.Expression));
  // `sql`${sql.table(name)}`.as('msg')`: the tables named inside; a derived table (a sub-query) names none itself.
  const named = tableCalls(argument);
  if (named.length > 0 || ts.isCallExpression(argument) || ts.isTaggedTemplateExpression(argument)) return named;
  return [argument];
}

/** The arguments of `sql.table(…)` calls within a node. */
function tableCalls(node: ts.Node): ts.Expression[] {
  const found: ts.Expression[] = [];
  const visit = (child: ts.Node) => {
    if (isSqlTable(child)) found.push(child.arguments[0] as ts.Expression);
    else ts.forEachChild(child, visit);
  };
  visit(node);
  return found;
}

function isSqlTable(node: ts.Node): node is ts.CallExpression {
  return (
    ts.isCallExpression(node) &&
    ts.isPropertyAccessExpression(node.expression) &&
    node.expression.name.text === 'table' &&
    ts.isIdentifier(node.expression.expression) &&
    node.expression.expression.text === 'sql' &&
    node.arguments.length === 1
  );
}

/**
 * The statements of one `sql` template: its text with each substitution as a marker, read token by
 * token (strings and comments dropped, keywords upper case and names lower case, as this code base
 * writes SQL).
 */
export function templateStatements(texts: readonly string[]): { what: What; table: string | number }[] {
  const source = texts.map((text, i) => (i === 0 ? text : `«${i - 1}»${text}`)).join('');
  const tokens = [
    ...source
      .replace(/--[^\n]*/g, ' ')
      .replace(/'(?:[^']|'')*'/g, "''")
      .matchAll(/«(\d+)»|[A-Za-z_][A-Za-z0-9_$]*(?:\.[A-Za-z_][A-Za-z0-9_$]*)*|[(),]/g),
  ].map((m) => (m[1] !== undefined ? Number(m[1]) : m[0]));
  const found: { what: What; table: string | number }[] = [];
  /** The table named at `i`: a name (of a table in another schema, its last part) or a substitution's index. */
  const nameAt = (i: number): string | number | undefined => {
    const token = tokens[i];
    if (typeof token === 'number') return token;
    if (token === undefined || !/^[a-z_]/.test(token)) return undefined;
    return token.split('.').at(-1);
  };
  // Writes, wherever they are.
  for (let i = 0; i < tokens.length; i++) {
    const [a, b] = [tokens[i], tokens[i + 1]];
    const table =
      (a === 'INSERT' || a === 'MERGE') && b === 'INTO'
        ? nameAt(i + 2)
        : a === 'DELETE' && b === 'FROM'
          ? nameAt(i + 2)
          : a === 'UPDATE'
            ? nameAt(i + 1)
            : undefined;
    if (table !== undefined) found.push({ what: 'writes', table });
  }
  // The top-level reads: skip the WITH list (noting its names), then every SELECT's FROM at depth 0.
  const withNames = new Set<string>();
  let i = 0;
  const skipParens = () => {
    let depth = 0;
    for (; i < tokens.length; i++) {
      if (tokens[i] === '(') depth++;
      else if (tokens[i] === ')' && --depth === 0) return i++;
    }
  };
  if (tokens[0] === 'WITH') {
    i = tokens[1] === 'RECURSIVE' ? 2 : 1;
    for (;;) {
      const name = tokens[i];
      if (typeof name === 'string') withNames.add(name);
      while (i < tokens.length && tokens[i] !== 'AS') {
        if (tokens[i] === '(') skipParens();
        else i++;
      }
      while (i < tokens.length && tokens[i] !== '(') i++;
      skipParens();
      if (tokens[i] !== ',') break;
      i++;
    }
  }
  if (tokens[i] !== 'SELECT') return found;
  let depth = 0;
  let inSelect = false;
  for (; i < tokens.length; i++) {
    const token = tokens[i];
    if (token === '(') depth++;
    else if (token === ')') depth--;
    else if (depth === 0 && token === 'SELECT') inSelect = true;
    else if (depth === 0 && inSelect && token === 'FROM' && tokens[i - 1] !== 'DISTINCT') {
      inSelect = false;
      // A function in FROM (`unnest(…)`, `jsonb_to_recordset(…)`) reads no table.
      const table = tokens[i + 2] === '(' ? undefined : nameAt(i + 1);
      if (table !== undefined && !(typeof table === 'string' && withNames.has(table))) found.push({ what: 'reads', table });
    }
  }
  return found;
}

/** The tables a type allows: a string literal, a union of them, or a type parameter constrained to one; undefined for any other. */
function literalNames(checker: ts.TypeChecker, type: ts.Type): string[] | undefined {
  const constrained = type.isTypeParameter() ? (checker.getBaseConstraintOfType(type) ?? type) : type;
  const members = constrained.isUnion() ? constrained.types : [constrained];
  const names: string[] = [];
  for (const member of members) {
    if (!member.isStringLiteral()) return undefined;
    names.push(member.value);
  }
  return names;
}

/** The tables an expression names: by its type; a template `${schema}.job` names `job`. */
function resolve(checker: ts.TypeChecker, expression: ts.Expression): string[] | undefined {
  if (ts.isStringLiteralLike(expression)) return [expression.text.trim().split(/\s+/)[0]?.split('.').at(-1) ?? ''];
  if (ts.isTemplateExpression(expression)) {
    const tail = expression.templateSpans.at(-1)?.literal.text ?? '';
    const name = /^\.([a-z_][a-z0-9_]*)$/.exec(tail)?.[1];
    if (name) return [name];
  }
  return literalNames(checker, checker.getTypeAtLocation(expression));
}

/** Every statement of one file, with the table it names or the expression naming it. */
function statementsOf(source: ts.SourceFile, checker: ts.TypeChecker): Found[] {
  const found: Found[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.arguments[0]) {
      const method = node.expression.name.text;
      const isWrite = KYSELY_WRITES.has(method);
      let isRead = false;
      if (method === 'selectFrom') {
        const receiver = checker.getTypeAtLocation(node.expression.expression);
        const name = (receiver.getSymbol() ?? receiver.aliasSymbol)?.getName();
        isRead = name !== undefined && STATEMENT_STARTERS.has(name);
      }
      if (isWrite || isRead) {
        for (const table of kyselyTables(node.arguments[0])) found.push({ what: isWrite ? 'writes' : 'reads', table, at: node });
      }
    }
    if (ts.isTaggedTemplateExpression(node) && ts.isIdentifier(node.tag) && node.tag.text === 'sql') {
      const template = node.template;
      const texts = ts.isNoSubstitutionTemplateLiteral(template)
        ? [template.text]
        : [template.head.text, ...template.templateSpans.map((span) => span.literal.text)];
      const substitutions = ts.isNoSubstitutionTemplateLiteral(template) ? [] : template.templateSpans.map((span) => span.expression);
      for (const { what, table } of templateStatements(texts)) {
        if (typeof table === 'string') {
          found.push({ what, table, at: node });
          continue;
        }
        // A substitution in a table's place: `sql.table(name)` names one; any other is a fragment, checked where it is written.
        const substitution = substitutions[table];
        if (substitution && isSqlTable(substitution)) found.push({ what, table: substitution.arguments[0] as ts.Expression, at: node });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

async function sourceFiles(src: string): Promise<string[]> {
  const entries = await readdir(src, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name));
}

/** Every statement found outside its table's module, every table not listed or not readable, every listed module missing. */
export async function checkOwners(root = ROOT): Promise<string[]> {
  const owners = parseOwners(await readFile(join(root, DOC), 'utf8'));
  const src = join(root, 'src');
  const files = (await sourceFiles(src)).filter((file) => !relative(src, file).startsWith('db/migrations/'));
  const modules = new Set(files.map((file) => relative(src, file)));
  const problems: string[] = [];
  for (const module of new Set(owners.values()))
    if (!modules.has(module)) problems.push(`${DOC} names src/${module}, which does not exist`);

  const program = typeScriptProgram(files, ROOT);
  const checker = program.getTypeChecker();
  for (const file of files) {
    const source = program.getSourceFile(file);
    if (!source) continue;
    const module = relative(src, file);
    for (const { what, table, at } of statementsOf(source, checker)) {
      const line = source.getLineAndCharacterOfPosition(at.getStart(source)).line + 1;
      const tables = typeof table === 'string' ? [table] : resolve(checker, table);
      if (tables === undefined) {
        problems.push(
          `src/${module}:${line} ${what} a table named by \`${(table as ts.Expression).getText(source)}\`, which the check cannot read: name the table in its module (a literal, or a union of them)`,
        );
        continue;
      }
      for (const name of tables) {
        if (CATALOG.test(name)) continue;
        const owner = owners.get(name);
        if (owner === undefined) problems.push(`src/${module}:${line} ${what} ${name}, a table ${DOC} does not list`);
        else if (owner !== module) problems.push(`src/${module}:${line} ${what} ${name}, whose statements belong in src/${owner}`);
      }
    }
  }
  return [...new Set(problems)];
}

if (import.meta.main) {
  const problems = await checkOwners();
  if (problems.length > 0) {
    console.error(
      `${problems.length} statement${problems.length === 1 ? ' is' : 's are'} outside their table's module:\n  - ${problems.join('\n  - ')}`,
    );
    process.exitCode = 1;
  } else {
    console.log(`Every statement of src/ is in its table's module (${DOC}).`);
  }
}
