import { readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { typeScriptProgram } from './typescript-program.ts';

/**
 * `npm run check:exports`: every export of src/ is imported somewhere (by src/, the tests, the
 * benchmarks, the scripts or the client), so that dead code does not hide behind an `export`. A
 * name used only in its own file is not exported; a name used nowhere is deleted. The table types
 * of db/schema.ts (`…Table`) are the exception: they are the schema, declared once, whether or not
 * a module names one.
 */
const ROOT = join(import.meta.dirname, '..');
const SEARCHED = [
  'src',
  'test',
  'bench',
  'scripts',
  'clients/typescript/src',
  'clients/typescript/test',
  'clients/cli/src',
  'clients/cli/bin',
  'clients/cli/test',
];

const kept = (file: string, name: string) => file === 'src/db/schema.ts' && name.endsWith('Table');

async function typeScriptFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  return entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name));
}

/** `file: name` of every export of src/ that no other file imports. */
export async function unusedExports(root = ROOT): Promise<string[]> {
  const files = (await Promise.all(SEARCHED.map((dir) => typeScriptFiles(join(root, dir))))).flat();
  const program = typeScriptProgram(files, root);
  const checker = program.getTypeChecker();
  const imported = new Set<ts.Symbol>();
  /** Modules whose every export counts as used: imported whole (`import * as`, `export *`, `import()`). */
  const whole = new Set<ts.Symbol>();
  const noteImport = (node: ts.Node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier) {
      const module = checker.getSymbolAtLocation(node.moduleSpecifier);
      const bindings = ts.isImportDeclaration(node) ? node.importClause?.namedBindings : node.exportClause;
      if (module && (!bindings || ts.isNamespaceImport(bindings) || ts.isNamespaceExport(bindings))) {
        if (ts.isExportDeclaration(node) || bindings) whole.add(module);
      }
      if (bindings && (ts.isNamedImports(bindings) || ts.isNamedExports(bindings))) {
        for (const element of bindings.elements) {
          const symbol = checker.getSymbolAtLocation(element.name);
          if (!symbol) continue;
          imported.add(symbol);
          if (symbol.flags & ts.SymbolFlags.Alias) imported.add(checker.getAliasedSymbol(symbol));
        }
      }
    }
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0]) {
      const module = checker.getSymbolAtLocation(node.arguments[0]);
      if (module) whole.add(module);
    }
    ts.forEachChild(node, noteImport);
  };
  for (const source of program.getSourceFiles()) if (!source.fileName.includes('node_modules')) noteImport(source);

  const unused: string[] = [];
  const src = join(root, 'src');
  for (const source of program.getSourceFiles()) {
    if (!source.fileName.startsWith(`${src}/`)) continue;
    const module = checker.getSymbolAtLocation(source);
    if (!module || whole.has(module)) continue;
    const file = relative(root, source.fileName);
    for (const exported of checker.getExportsOfModule(module)) {
      const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      if (!imported.has(exported) && !imported.has(target) && !kept(file, exported.name)) unused.push(`${file}: ${exported.name}`);
    }
  }
  return unused.sort();
}

if (import.meta.main) {
  const unused = await unusedExports();
  if (unused.length > 0) {
    console.error(
      `${unused.length} export${unused.length === 1 ? '' : 's'} of src/ imported by nothing (unexport or delete):\n  - ${unused.join('\n  - ')}`,
    );
    process.exitCode = 1;
  } else {
    console.log('Every export of src/ is imported somewhere.');
  }
}
