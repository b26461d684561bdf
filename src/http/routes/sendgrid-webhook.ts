import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { checkSignature, readSendgridBatch } from '../../email/sendgrid-events.ts';
import { recordDeliveryEvents } from '../../sending/delivery-events.ts';
import { CALLBACK_TAGS, callbackPaths } from '../callback-paths.ts';
import type { App } from '../fastify-types.ts';
import { HttpError } from '../problems.ts';
import { firstHeader, parseRawJson, readJsonRaw } from '../raw-body.ts';
import { EventReceipt, problems } from '../schemas.ts';

/** SendGrid's Event Webhook body (docs.sendgrid.com, "Event Webhook reference"): the fields Hopper reads; others pass. */
const SENDGRID_EVENT = Type.Object(
  {
    event: Type.String({ description: 'processed, delivered, deferred, bounce, dropped, open, click, spamreport, unsubscribe, …' }),
    email: Type.String(),
    timestamp: Type.Integer({ description: 'Unix seconds' }),
    sg_event_id: Type.Optional(Type.String()),
    sg_message_id: Type.Optional(Type.String()),
    hopper_delivery_id: Type.Optional(Type.String({ description: 'The unique argument Hopper set on the message (X-SMTPAPI)' })),
    reason: Type.Optional(Type.String()),
    status: Type.Optional(Type.String()),
    type: Type.Optional(Type.String()),
  },
  { title: 'SendGridEvent', additionalProperties: true },
);
const SENDGRID_BATCH = Type.Array(SENDGRID_EVENT, { title: 'SendGridEventBatch', maxItems: 10_000 });
/** SendGrid flushes at 768 KB per post; the margin covers larger custom arguments. */
const WEBHOOK_BODY_LIMIT = 5 * 1024 * 1024;

/**
 * `POST /v3/callbacks/sendgrid` (and the first path, /v3/webhooks/sendgrid): SendGrid's signed Event Webhook. No API key (SendGrid cannot send
 * one): the ECDSA signature is the authentication, so without a configured verification key the
 * endpoint refuses every post rather than let anyone move counters and unsubscribe contacts.
 *
 * This scope reads JSON bodies as raw bytes (the signature covers the exact bytes) and parses them
 * only once the signature holds.
 */
export async function sendgridWebhookRoutes(app: App, ctx: AppContext): Promise<void> {
  const { db } = ctx.database;
  readJsonRaw(app);

  for (const { url, legacy } of callbackPaths('sendgrid'))
    app.post(
      url,
      {
        config: { public: true },
        bodyLimit: WEBHOOK_BODY_LIMIT,
        schema: {
          hide: legacy,
          tags: CALLBACK_TAGS,
          summary: "SendGrid's signed Event Webhook (a JSON array of events); no API key, the signature authenticates",
          documentedBody: {
            description: 'The batch as SendGrid posts it, read raw: the signature covers its exact bytes.',
            content: { 'application/json': { schema: SENDGRID_BATCH } },
          },
          response: { 200: EventReceipt, ...problems(400, 403, 413, 415) },
        },
      },
      async (request) => {
        const key = ctx.config.sendgridWebhookKey;
        if (!key) {
          request.log.warn('SendGrid webhook post refused: SENDGRID_WEBHOOK_PUBLIC_KEY is not set');
          throw new HttpError(
            'webhook_not_configured',
            'The SendGrid event webhook is not set up on this server: its operator must set SENDGRID_WEBHOOK_PUBLIC_KEY to the verification key of the signed event webhook.',
          );
        }
        const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const now = ctx.clock();
        const check = checkSignature(
          key,
          {
            timestamp: firstHeader(request.headers['x-twilio-email-event-webhook-timestamp']),
            signature: firstHeader(request.headers['x-twilio-email-event-webhook-signature']),
          },
          body,
          now,
        );
        if (!check.ok) {
          request.log.warn({ reason: check.reason }, 'SendGrid webhook post refused: bad signature');
          throw new HttpError('invalid_signature', `The post is not signed by SendGrid with the configured key (${check.reason}).`);
        }

        const batch = parseRawJson(body);
        if (!Array.isArray(batch)) throw new HttpError('bad_request', 'The body must be a JSON array of SendGrid events.');

        const read = readSendgridBatch(batch, now);
        if (read.unknownTypes.size > 0) {
          request.log.warn({ types: Object.fromEntries(read.unknownTypes) }, 'SendGrid events of unknown types ignored');
        }
        const result = await recordDeliveryEvents(db, read.events, now);
        const ignored = read.ignored + result.unknown;
        if (ignored > 0) {
          request.log.info(
            { events: batch.length, ignored, withoutDeliveryId: read.withoutDelivery, unknownDeliveries: result.unknown },
            'SendGrid events ignored',
          );
        }
        return { recorded: result.recorded, duplicates: result.duplicates, ignored };
      },
    );
}
