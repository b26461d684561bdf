import { enableCompileCache } from 'node:module';

/**
 * `npm start` (`node src/main.ts`): the service of service.ts, its modules compiled once. V8's
 * compile cache keeps the code of every module loaded (Hopper's own, type-stripped, and its
 * libraries) in `os.tmpdir()/node-compile-cache`, or where NODE_COMPILE_CACHE says, checked against
 * each file's contents: a start on an existing installation skips about a third of its CPU time
 * (docs/performance.md). It must be on before those modules load, hence this file.
 */
enableCompileCache();
await import('./service.ts');
