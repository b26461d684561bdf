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
 * The one logger of a process (JSON lines, pino), shared by the HTTP layer — which adds a `reqId`
 * to every line of a request — and the workers. Secrets never reach it: headers are not logged,
 * capability tokens in URLs are redacted (redactUrl), and an API key anywhere in a line is.
 */
export function createLogger(config: Config, stream?: NodeJS.WritableStream) {
  return pino(
    {
      level: config.logLevel,
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]'], censor: '[redacted]' },
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
    stream ?? bufferedStdout(),
  );
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
