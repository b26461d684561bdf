import { createHash, timingSafeEqual } from 'node:crypto';
import { Type } from 'typebox';
import type { AppContext } from '../../context.ts';
import { recordOutcomes } from '../../voicemail/dispositions.ts';
import { checkDropCowboySignature, DROPCOWBOY_SOURCE, readDropCowboyEvents } from '../../voicemail/providers/drop-cowboy.ts';
import { readDispositions, SLYBROADCAST_SOURCE, slybroadcastCallbackToken } from '../../voicemail/providers/slybroadcast.ts';
import type { App } from '../context.ts';
import { HttpError } from '../problems.ts';
import { firstHeader, parseRawJson, readJsonRaw } from '../raw-body.ts';
import { problems } from '../schemas.ts';

const FORM_LIMIT = 256 * 1024;

const Summary = Type.Object({
  recorded: Type.Integer({ description: 'New outcomes, now counted' }),
  duplicates: Type.Integer({ description: 'Outcomes already recorded (providers post again)' }),
  ignored: Type.Integer({ description: 'Events of other kinds, malformed ones, or ones for drops Hopper does not know' }),
});

/**
 * The voicemail providers' outcome callbacks (no API key: providers cannot send one).
 *
 *   POST /v3/webhooks/slybroadcast/:token  Slybroadcast dispositions; the secret token in the URL
 *                                          (given with each drop as `c_dispo_url`) authenticates
 *   POST /v3/webhooks/dropcowboy           Drop Cowboy's signed webhook (HMAC-SHA256)
 *
 * A scope of its own: form bodies are parsed here only (the JSON API keeps answering 415 to them),
 * and JSON is read raw, as the signature covers the exact bytes.
 */
export async function voicemailWebhookRoutes(app: App, ctx: AppContext): Promise<void> {
  const { db } = ctx.database;
  const tags = ['Webhooks'];
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT }, (_request, body, done) =>
    done(null, new URLSearchParams(body as string)),
  );
  readJsonRaw(app);

  app.post(
    '/webhooks/slybroadcast/:token',
    {
      config: { public: true },
      schema: {
        tags,
        summary: 'Slybroadcast disposition callback (form field `var`, one or more lines); answers OK',
        security: [],
        params: Type.Object({ token: Type.String() }),
        response: { 200: { content: { 'text/plain': { schema: Type.Literal('OK') } } }, ...problems(403, 413, 415) },
      },
    },
    async (request, reply) => {
      const expected = await slybroadcastCallbackToken(db);
      if (!sameSecret(request.params.token, expected)) {
        request.log.warn('Slybroadcast disposition refused: wrong token');
        throw new HttpError('invalid_signature', 'This disposition URL is not one this server gave Slybroadcast.');
      }
      if (!(request.body instanceof URLSearchParams)) {
        throw new HttpError(
          'unsupported_media_type',
          'Post dispositions as a form (application/x-www-form-urlencoded) with the field var.',
        );
      }
      const now = ctx.clock();
      const { outcomes, malformed } = readDispositions(request.body.getAll('var'), now);
      const result = await recordOutcomes(db, SLYBROADCAST_SOURCE, 'Slybroadcast', outcomes, now);
      if (malformed > 0 || result.unknown > 0) {
        request.log.warn({ malformed, unknown: result.unknown }, 'Slybroadcast disposition lines ignored');
      }
      // Slybroadcast expects the body OK, for malformed lines too: they would not improve on a retry.
      return reply.type('text/plain; charset=utf-8').send('OK');
    },
  );

  app.post(
    '/webhooks/dropcowboy',
    {
      config: { public: true },
      schema: {
        tags,
        summary: "Drop Cowboy's signed outcome webhook (X-Signature: sha256=HMAC(secret, X-Timestamp.body))",
        security: [],
        response: { 200: Summary, ...problems(400, 403, 413, 415, 503) },
      },
    },
    async (request) => {
      const settings = ctx.config.dropCowboy;
      if (!settings) {
        throw new HttpError(
          'webhook_not_configured',
          'The Drop Cowboy webhook is not set up on this server: its operator must configure Drop Cowboy (DROPCOWBOY_KEY, DROPCOWBOY_SECRET, DROPCOWBOY_WEBHOOK_SECRET).',
        );
      }
      if (!Buffer.isBuffer(request.body)) throw new HttpError('unsupported_media_type', 'Post the events as JSON (application/json).');
      const now = ctx.clock();
      const check = checkDropCowboySignature(
        settings.webhookSecret,
        { timestamp: firstHeader(request.headers['x-timestamp']), signature: firstHeader(request.headers['x-signature']) },
        request.body,
        now,
      );
      if (!check.ok) {
        request.log.warn({ reason: check.reason }, 'Drop Cowboy webhook post refused');
        throw new HttpError('invalid_signature', `The post is not signed by Drop Cowboy with the configured secret (${check.reason}).`);
      }
      const body = parseRawJson(request.body);
      const read = readDropCowboyEvents(body, now);
      const result = await recordOutcomes(db, DROPCOWBOY_SOURCE, 'Drop Cowboy', read.outcomes, now);
      if (result.early > 0) {
        // The outcome beat our record of the hand-over; a post again shortly finds it (the
        // outcomes recorded now are then duplicates).
        throw new HttpError('service_unavailable', 'Some drops of this post are still being recorded as sent; post again shortly.', {
          headers: { 'Retry-After': '30' },
        });
      }
      const ignored = read.ignored + result.unknown;
      if (ignored > 0) request.log.info({ ignored }, 'Drop Cowboy events ignored');
      return { recorded: result.recorded, duplicates: result.duplicates, ignored };
    },
  );
}

/** Constant-time comparison of two secrets of any length. */
function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}
