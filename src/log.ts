import { pino } from 'pino';
import type { Config } from './config.ts';

const API_KEY_IN_TEXT = /hop_[0-9A-Za-z]{46}/g;
/**
 * Path segments that are capabilities: a media file's `full_url` token, the open, click and
 * unsubscribe tokens of an email, the Slybroadcast disposition token and the Drop Cowboy
 * callback token. A numeric id in the same
 * place (`/v3/media/12/download`) is no secret and stays.
 */
const TOKEN_IN_PATH =
  /(\/(?:media|t\/o|t\/c|unsubscribe|(?:webhooks|callbacks)\/slybroadcast|(?:webhooks|callbacks)\/dropcowboy\/callback)\/)(?!\d+(?:[/?#]|$))[^/?#]+/g;
/** Query parameters whose values are secrets whatever they look like. */
const SECRET_PARAM = /token|key|secret|password|signature|auth/i;

/**
 * A request URL as it may be logged: capability tokens in the path, secret-looking query values,
 * and any API key (in a parameter's name or value) replaced by `[redacted]`.
 */
function redactUrl(url: string): string {
  const q = url.indexOf('?');
  const path = (q < 0 ? url : url.slice(0, q)).replace(TOKEN_IN_PATH, '$1[redacted]');
  if (q < 0) return path.replace(API_KEY_IN_TEXT, 'hop_[redacted]');
  const query = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq < 0 ? pair : pair.slice(0, eq);
      let decoded = name;
      try {
        decoded = decodeURIComponent(name);
      } catch {
        // logged as it came
      }
      return eq >= 0 && SECRET_PARAM.test(decoded) ? `${name}=[redacted]` : pair;
    })
    .join('&');
  return `${path}?${query}`.replace(API_KEY_IN_TEXT, 'hop_[redacted]');
}

/**
 * The one logger of a process (pino), shared by the HTTP layer — which adds a `reqId` to every line
 * of a request — and the workers: JSON lines, or on a terminal the same lines made readable
 * (terminalLines). Secrets never reach it: headers are not logged, capability tokens in URLs are
 * redacted (redactUrl), and an API key anywhere in a line is.
 */
export function createLogger(config: Config, stream?: LogStream) {
  return pino(
    {
      level: config.logLevel,
      // A request and a reply are logged as these fields only, never their headers: there is no
      // Authorization, Cookie or Set-Cookie to redact (pino's `redact` of those paths found nothing
      // and cost 2.2 kB of a read's 66 kB of garbage: docs/performance.md, "Logging").
      serializers: {
        req: (req: { method: string; url: string; host?: string; ip?: string }) => ({
          method: req.method,
          url: redactUrl(req.url),
          host: req.host,
          remoteAddress: req.ip,
        }),
        res: (reply: { statusCode: number }) => ({ statusCode: reply.statusCode }),
        err: pino.stdSerializers.err,
      },
      // The last line of defence: an API key anywhere in a line (a JSON field name echoed in a
      // validation error, a message) never reaches the log.
      hooks: { streamWrite: (line: string) => line.replace(API_KEY_IN_TEXT, 'hop_[redacted]') },
    },
    stream ?? (process.stdout.isTTY ? terminalLines(process.stdout) : bufferedStdout()),
  );
}

type LogStream = { write(line: string): unknown };

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO ', 40: 'WARN ', 50: 'ERROR', 60: 'FATAL' };
/** Fields every line has, or that the readable line shows in its own place. */
const SHOWN_APART = new Set(['time', 'level', 'msg', 'pid', 'hostname', 'err']);

/**
 * Log lines for a person at a terminal, written to `out` as they come: the local time to the
 * millisecond, the level, the message, then the other fields as `name=value` (nested ones dotted:
 * `req.url=/health`), and an error's stack indented below. Piped or redirected, the process
 * writes JSON lines instead, for a log collector.
 */
export function terminalLines(out: { write(text: string): unknown }): LogStream {
  return { write: (line: string) => out.write(readableLine(line)) };
}

function readableLine(json: string): string {
  const entry = JSON.parse(json) as Record<string, unknown>;
  const time = new Date(entry.time as number);
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  const clock = `${pad(time.getHours())}:${pad(time.getMinutes())}:${pad(time.getSeconds())}.${pad(time.getMilliseconds(), 3)}`;
  const fields: string[] = [];
  const add = (name: string, value: unknown) => {
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [key, inner] of Object.entries(value)) add(`${name}.${key}`, inner);
    } else {
      fields.push(`${name}=${typeof value === 'string' && /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)}`);
    }
  };
  for (const [name, value] of Object.entries(entry)) if (!SHOWN_APART.has(name)) add(name, value);
  const err = entry.err as { message?: string; stack?: string } | undefined;
  if (err?.message) fields.push(`err=${JSON.stringify(err.message)}`);
  const frames = (err?.stack ?? '').split('\n').slice(1);
  const stack = frames.map((frame) => `\n    ${frame.trim()}`).join('');
  const level = LEVELS[entry.level as number] ?? String(entry.level);
  return `${clock} ${level} ${String(entry.msg ?? '')}${fields.length > 0 ? `  ${fields.join(' ')}` : ''}${stack}\n`;
}

/**
 * Standard output, written asynchronously in blocks of at least 4 kB, and at least every 250 ms:
 * a request's log line joins a buffer written while the next requests are served, instead of a
 * write(2) per line (docs/performance.md). pino flushes the buffer synchronously when the process
 * exits; a SIGKILL loses at most the last 250 ms of lines.
 */
function bufferedStdout() {
  const destination = pino.destination({ dest: 1, sync: false, minLength: 4096 });
  setInterval(() => destination.flush(), 250).unref();
  return destination;
}

export type Logger = ReturnType<typeof createLogger>;
