import { join } from 'node:path';
import ts from 'typescript';

/**
 * A TypeScript program of `files` with the compiler options of `root`'s tsconfig.json, for the checks
 * that read src/ with the type checker (check-owners.ts, check-exports.ts). The parsed files are
 * kept for the process, as an editor's language service keeps them between programs: the checks
 * run one after another in the architecture test parse the standard library, the dependencies'
 * types and src/ once instead of once a check.
 */
const parsedFiles = new Map<string, { text: string; file: ts.SourceFile }>();

export function typeScriptProgram(files: readonly string[], root: string): ts.Program {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic() {} },
  );
  const options = parsed?.options ?? {};
  const host = ts.createCompilerHost(options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, language, onError) => {
    const text = ts.sys.readFile(fileName);
    if (text === undefined) return read(fileName, language, onError);
    const key = `${fileName}\0${typeof language === 'object' ? language.languageVersion : language}`;
    const kept = parsedFiles.get(key);
    if (kept?.text === text) return kept.file;
    const file = ts.createSourceFile(fileName, text, language);
    parsedFiles.set(key, { text, file });
    return file;
  };
  return ts.createProgram(files, options, host);
}
