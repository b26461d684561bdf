import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { registerHooks, stripTypeScriptTypes } from 'node:module';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * Preloaded by `npm start` (`node --import=./src/typescript-cache.mjs … src/main.ts`): Hopper's
 * TypeScript, stripped of its types ahead of time, so that the service's process never loads Node's
 * type stripper. That stripper (amaro, a WebAssembly build of swc) keeps its memory for the life of
 * the process: 18 MB in a bare process, about 20 MB of an idle `npm start` (docs/performance.md).
 *
 * Each file of src/ is stripped once, by Node's own `stripTypeScriptTypes` in a short-lived child
 * process (this file run as a script), into node_modules/.cache/hopper-typescript/ under the hash of
 * its source; a load hook serves that instead of the `.ts`. Stripping keeps every position (types
 * become blanks), so stack traces point at the `.ts` lines. A source that changes gets a new hash,
 * so the cache is never stale; the files of sources gone are removed when new ones are written.
 *
 * JavaScript, because a `.ts` file here would load the stripper. If anything is amiss (the cache
 * cannot be written, the child fails), the hook is not registered and Node strips as usual.
 */
const SRC = import.meta.dirname;
const CACHE = join(SRC, '..', 'node_modules', '.cache', 'hopper-typescript');

if (process.argv[1] === import.meta.filename) {
  // The child: strip each [source, target] pair it is given on stdin.
  for (const [source, target] of JSON.parse(readFileSync(0, 'utf8'))) {
    const temporary = `${target}.${process.pid}`;
    writeFileSync(temporary, stripTypeScriptTypes(readFileSync(source, 'utf8'), { mode: 'strip' }));
    renameSync(temporary, target);
  }
} else {
  try {
    const stripped = strippedSources();
    registerHooks({
      load(url, context, nextLoad) {
        const file = stripped.get(url);
        if (file !== undefined) {
          try {
            return { format: 'module', source: readFileSync(file, 'utf8'), shortCircuit: true };
          } catch {
            // Removed since this process started (another start found the source changed): Node strips it.
          }
        }
        return nextLoad(url, context);
      },
    });
  } catch (error) {
    process.emitWarning(`TypeScript is stripped in this process instead: ${error instanceof Error ? error.message : error}`, {
      code: 'HOPPER_TYPESCRIPT_CACHE',
    });
  }
}

/** The stripped file of each source of src/, by the source's URL; those missing are made first. */
function strippedSources() {
  const stripped = new Map();
  const missing = [];
  for (const name of readdirSync(SRC, { recursive: true })) {
    if (!name.endsWith('.ts')) continue;
    const source = join(SRC, name);
    const target = join(CACHE, `${createHash('sha256').update(readFileSync(source)).digest('base64url')}.js`);
    stripped.set(pathToFileURL(source).href, target);
    if (!existsSync(target)) missing.push([source, target]);
  }
  if (missing.length > 0) {
    mkdirSync(CACHE, { recursive: true });
    const child = spawnSync(process.execPath, ['--no-warnings', import.meta.filename], {
      input: JSON.stringify(missing),
      stdio: ['pipe', 'inherit', 'inherit'],
    });
    if (child.status !== 0) throw new Error(`stripping ${missing.length} files failed (${child.error?.message ?? `exit ${child.status}`})`);
    const current = new Set([...stripped.values()].map((target) => basename(target)));
    for (const name of readdirSync(CACHE)) if (!current.has(name) && !name.includes('.js.')) rmSync(join(CACHE, name), { force: true });
  }
  return stripped;
}
