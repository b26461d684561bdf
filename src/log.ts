import { pino } from 'pino';
import type { Config } from './config.ts';

const API_KEY_IN_TEXT = /hop_[0-9A-Za-z]{46}/g;
/** The secret token of the Slybroadcast disposition URL (voicemail/slybroadcast.ts). */
const CALLBACK_TOKEN = /(\/webhooks\/slybroadcast\/)[^/?#]+/;

/**
 * The one logger of a process (JSON lines, pino), shared by the HTTP layer — which adds a `reqId`
 * to every line of a request — and the workers. Keys never reach it: headers are not logged, and
 * a key pasted into a URL by mistake is redacted.
 */
export function createLogger(config: Config, stream?: NodeJS.WritableStream) {
  return pino(
    {
      level: config.logLevel,
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]'], censor: '[redacted]' },
      serializers: {
        req: (req: { method: string; url: string; host?: string; ip?: string }) => ({
          method: req.method,
          url: req.url.replace(API_KEY_IN_TEXT, 'hop_[redacted]').replace(CALLBACK_TOKEN, '$1[redacted]'),
          host: req.host,
          remoteAddress: req.ip,
        }),
        res: (reply: { statusCode: number }) => ({ statusCode: reply.statusCode }),
        err: pino.stdSerializers.err,
      },
    },
    stream ?? process.stdout,
  );
}

export type Logger = ReturnType<typeof createLogger>;
