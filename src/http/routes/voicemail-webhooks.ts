import { createHash, timingSafeEqual } from 'node:crypto';
import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { DomainError } from '../../errors.ts';
import { recordOutcomes } from '../../voicemail/dispositions.ts';
import { readDropCowboyWebhook, verifyDropCowboySignature } from '../../voicemail/providers/drop-cowboy-events.ts';
import { readDispositions, SLYBROADCAST_SOURCE, slybroadcastCallbackToken } from '../../voicemail/providers/slybroadcast.ts';
import { recordDropCowboyCallback, recordDropCowboyEvent } from '../../voicemail/results.ts';
import { CALLBACK_TAGS, callbackPaths } from '../callback-paths.ts';
import type { App } from '../fastify-types.ts';
import { HttpError } from '../problems.ts';
import { firstHeader, parseRawJson, readJsonRaw } from '../raw-body.ts';
import { EventReceipt, problems } from '../schemas.ts';

const FORM_LIMIT = 256 * 1024;

/**
 * The voicemail providers' outcome callbacks (no API key: providers cannot send one).
 *
 *   POST /v3/callbacks/slybroadcast/:token  Slybroadcast dispositions; the secret token in the URL
 *                                          (given with each drop as `c_dispo_url`) authenticates
 *   POST /v3/callbacks/dropcowboy           Drop Cowboy's signed webhooks (HMAC-SHA256, several secrets)
 *   POST /v3/callbacks/dropcowboy/callback/:token  Drop Cowboy's per-send callback (token per delivery)
 *
 * A scope of its own: form bodies are parsed here only (the JSON API keeps answering 415 to them),
 * and JSON is read raw, as the signature covers the exact bytes.
 */
export async function voicemailWebhookRoutes(app: App, ctx: AppContext): Promise<void> {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT }, (_request, body, done) =>
    done(null, new URLSearchParams(body as string)),
  );
  readJsonRaw(app);
  slybroadcastDispositions(app, ctx);
  dropCowboyWebhooks(app, ctx);
  dropCowboyCallbacks(app, ctx);
}

const tags = CALLBACK_TAGS;

/** Slybroadcast's dispositions: a form of `var` lines, to the URL with the secret token. */
function slybroadcastDispositions(app: App, ctx: AppContext): void {
  const { db } = ctx.database;
  for (const { url, legacy } of callbackPaths('slybroadcast/:token'))
    app.post(
      url,
      {
        config: { public: true },
        schema: {
          hide: legacy,
          tags,
          summary: 'Slybroadcast disposition callback (form field `var`, one or more lines); answers OK',
          security: [],
          params: Type.Object({ token: Type.String() }),
          response: { 200: { content: { 'text/plain': { schema: Type.Literal('OK') } } }, ...problems(403, 413, 415) },
        },
      },
      async (request, reply) => {
        const expected = await slybroadcastCallbackToken(db, ctx.clock);
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
}

/** Drop Cowboy's signed webhooks: statuses and receipts, matched to deliveries by number. */
function dropCowboyWebhooks(app: App, ctx: AppContext): void {
  const { db } = ctx.database;
  for (const { url, legacy } of callbackPaths('dropcowboy'))
    app.post(
      url,
      {
        config: { public: true },
        schema: {
          hide: legacy,
          tags,
          summary:
            "Drop Cowboy's signed webhooks (contact.rvm.status, contact.rvm.receipt; X-Signature: sha256=HMAC(secret, X-Timestamp.body))",
          security: [],
          response: { 200: EventReceipt, ...problems(400, 403, 413, 415, 503) },
        },
      },
      async (request) => {
        const settings = ctx.config.dropCowboy;
        if (!settings || settings.webhookSecrets.length === 0) {
          throw new HttpError(
            'webhook_not_configured',
            "Drop Cowboy's signed webhook is not set up on this server: its operator must configure Drop Cowboy (DROPCOWBOY_KEY, DROPCOWBOY_SECRET) and the webhooks' signing secrets (DROPCOWBOY_WEBHOOK_SECRETS).",
          );
        }
        if (!Buffer.isBuffer(request.body)) throw new HttpError('unsupported_media_type', 'Post the event as JSON (application/json).');
        const now = ctx.clock();
        const check = verifyDropCowboySignature(
          settings.webhookSecrets,
          {
            signature: firstHeader(request.headers['x-signature']),
            timestamp: firstHeader(request.headers['x-timestamp']),
            version: firstHeader(request.headers['x-signature-version']),
          },
          request.body,
          Math.floor(now.getTime() / 1000),
        );
        if (!check.ok) {
          request.log.warn({ reason: check.code }, 'Drop Cowboy webhook post refused');
          throw new HttpError('invalid_signature', `The post is not signed by Drop Cowboy with a configured secret (${check.code}).`);
        }
        const event = readDropCowboyWebhook(parseRawJson(request.body), firstHeader(request.headers['x-event-id']));
        if (!event) throw new DomainError('bad_request', 'The body is not a Drop Cowboy event (an object with event_id and event).');
        const result = await recordDropCowboyEvent({ db, boss: ctx.queue.boss }, event, now);
        if (result.ignored > 0) request.log.info({ event: event.event, eventId: event.eventId }, 'Drop Cowboy event ignored');
        return result;
      },
    );
}

/** Drop Cowboy's per-send callback: the result of one delivery, to the URL with its token. */
function dropCowboyCallbacks(app: App, ctx: AppContext): void {
  const { db } = ctx.database;
  for (const { url, legacy } of callbackPaths('dropcowboy/callback/:token'))
    app.post(
      url,
      {
        config: { public: true },
        schema: {
          hide: legacy,
          tags,
          summary: "Drop Cowboy's per-send callback (unsigned; the token Hopper put in the drop's callback_url authenticates it)",
          security: [],
          params: Type.Object({ token: Type.String({ maxLength: 200 }) }),
          response: { 200: EventReceipt, ...problems(400, 403, 413, 415, 503) },
        },
      },
      async (request) => {
        if (!ctx.config.dropCowboy) {
          throw new HttpError('webhook_not_configured', 'Drop Cowboy is not set up on this server (DROPCOWBOY_KEY, DROPCOWBOY_SECRET).');
        }
        if (!Buffer.isBuffer(request.body)) throw new HttpError('unsupported_media_type', 'Post the result as JSON (application/json).');
        const body = parseRawJson(request.body);
        if (typeof body !== 'object' || body === null || Array.isArray(body)) {
          throw new DomainError('bad_request', 'The body is not a Drop Cowboy result (a JSON object).');
        }
        const answer = await recordDropCowboyCallback(
          { db, boss: ctx.queue.boss },
          request.params.token,
          body as Record<string, unknown>,
          ctx.clock(),
          sameSecret,
        );
        if (answer === 'forbidden') {
          request.log.warn('Drop Cowboy callback refused: unknown foreign_id or wrong token');
          throw new HttpError('invalid_signature', 'This callback URL is not the one this server gave Drop Cowboy for that drop.');
        }
        return answer;
      },
    );
}

/** Constant-time comparison of two secrets of any length. */
function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}
