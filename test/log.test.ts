import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { generateApiKey } from '../src/api-key-format.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger, terminalLines } from '../src/log.ts';

const ROOT = join(import.meta.dirname, '..');

/** The lines a logger writes through terminalLines, as a terminal would show them. */
function readableLogger() {
  let text = '';
  const logger = createLogger(
    loadConfig({ LOG_LEVEL: 'debug' }),
    terminalLines({
      write: (chunk: string) => {
        text += chunk;
      },
    }),
  );
  return { logger, text: () => text };
}

describe('log lines on a terminal', () => {
  test('the time of day to the millisecond, the level, the message, then name=value', () => {
    const { logger, text } = readableLogger();
    logger.info({ timeoutMs: 10_000 }, 'stopping');
    logger.warn({ req: { method: 'GET', url: '/health' }, note: 'two words', list: [1, 2] }, 'slow');
    const [first, second] = text().split('\n');
    assert.match(first as string, /^\d\d:\d\d:\d\d\.\d{3} INFO {2}stopping {2}timeoutMs=10000$/);
    assert.match(
      second as string,
      /^\d\d:\d\d:\d\d\.\d{3} WARN {2}slow {2}req\.method=GET req\.url=\/health note="two words" list=\[1,2\]$/,
    );
  });

  test("an error's message on its line and its stack below; an API key stays out", () => {
    const { logger, text } = readableLogger();
    const key = generateApiKey();
    logger.error({ err: new Error(`refused ${key}`) }, 'delivery failed');
    const [line, ...stack] = text().trimEnd().split('\n');
    assert.match(line as string, /^\d\d:\d\d:\d\d\.\d{3} ERROR delivery failed {2}.*err="refused hop_\[redacted\]"$/);
    assert.ok(stack.length > 0 && stack.every((frame) => frame.startsWith('    at ')), stack.join('\n'));
    assert.doesNotMatch(text(), new RegExp(key));
  });

  test('the logger of a process writes readable lines when stdout is a terminal, JSON lines when it is not', async () => {
    const script = `import('./src/log.ts').then(({ createLogger }) => createLogger({ logLevel: 'info' }).info({ port: 8443 }, 'hello'))`;
    const node = `${JSON.stringify(process.execPath)} -e ${JSON.stringify(script)}`;
    const run = promisify(execFile);
    // util-linux's script(1) runs the command on a pseudo-terminal of its own.
    const onTerminal = await run('script', ['-qec', node, '/dev/null'], { cwd: ROOT });
    assert.match(onTerminal.stdout, /^\d\d:\d\d:\d\d\.\d{3} INFO {2}hello {2}port=8443\r?\n$/);
    const piped = await run('bash', ['-c', node], { cwd: ROOT });
    assert.deepEqual(Object.keys(JSON.parse(piped.stdout) as object), ['level', 'time', 'pid', 'hostname', 'port', 'msg']);
  });
});
