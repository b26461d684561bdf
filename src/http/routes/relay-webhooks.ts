import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { credentialsMatch, readPostmarkRecord } from '../../email/postmark-events.ts';
import { checkSnsMessage, readSesNotification, type SnsFetch, snsUrl } from '../../email/ses-events.ts';
import { recordDeliveryEvents } from '../../sending/delivery-events.ts';
import { CALLBACK_TAGS, callbackPaths } from '../callback-paths.ts';
import type { App } from '../fastify-types.ts';
import { HttpError } from '../problems.ts';
import { EventReceipt, problems } from '../schemas.ts';

const WEBHOOK_BODY_LIMIT = 1024 * 1024;
const CERT_MAX_BYTES = 64 * 1024;

/** One record of Postmark's Bounce or SpamComplaint webhook (postmarkapp.com developer docs): the fields Hopper reads; others pass. */
const POSTMARK_RECORD = Type.Object(
  {
    RecordType: Type.String({ description: 'Bounce or SpamComplaint (others are acknowledged and ignored)' }),
    MessageID: Type.Optional(Type.String()),
    Type: Type.Optional(Type.String({ description: 'HardBounce, SoftBounce, SpamComplaint, …' })),
    TypeCode: Type.Optional(Type.Integer()),
    Email: Type.Optional(Type.String()),
    BouncedAt: Type.Optional(Type.String()),
    Description: Type.Optional(Type.String()),
    Details: Type.Optional(Type.String()),
    Metadata: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  { title: 'PostmarkRecord', additionalProperties: true },
);
/** The default SNS fetcher: a GET with a time limit and a size limit. */
const fetchFromSns: SnsFetch = async (url) => {
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000), redirect: 'error' });
  if (!response.ok) throw new Error(`GET ${url}: ${response.status}`);
  const text = await response.text();
  if (text.length > CERT_MAX_BYTES) throw new Error(`GET ${url}: too large`);
  return text;
};

/**
 * Bounce and complaint webhooks of the relays beside SendGrid (sendgrid-webhook.ts): Amazon SES
 * through an SNS HTTPS subscription, and Postmark. No API key: SNS's signature, or the basic
 * credentials Postmark is given, authenticate. Their events go through `recordDeliveryEvents`.
 */
export async function relayWebhookRoutes(app: App, ctx: AppContext): Promise<void> {
  // SNS posts JSON as text/plain.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('text/plain', { parseAs: 'string' }, (_request, body, done) => done(null, body));
  sesNotifications(app, ctx);
  postmarkWebhooks(app, ctx);
}

/** Amazon SES's notifications through SNS: signed by SNS, of a topic the operator lists. */
function sesNotifications(app: App, ctx: AppContext): void {
  const { db } = ctx.database;
  const snsFetch = ctx.snsFetch ?? fetchFromSns;
  // SNS's signing certificates, by URL: fetched once each.
  const certificates = new Map<string, string>();
  for (const { url, legacy } of callbackPaths('ses'))
    app.post(
      url,
      {
        config: { public: true },
        bodyLimit: WEBHOOK_BODY_LIMIT,
        schema: {
          hide: legacy,
          tags: CALLBACK_TAGS,
          summary:
            'Amazon SES bounce and complaint notifications through an SNS HTTPS subscription; the SNS signature authenticates, of a topic in SES_TOPIC_ARNS',
          response: { 200: EventReceipt, ...problems(400, 403, 413, 415) },
        },
      },
      async (request) => {
        // Without the operator's list of topics, any topic SNS signs would do — one made in anyone's
        // AWS account included (issue 36): refused before anything is read, as Postmark without credentials.
        const topics = ctx.config.sesTopicArns;
        if (topics.length === 0) {
          throw new HttpError(
            'webhook_not_configured',
            "The SES webhook is not set up on this server: its operator must set SES_TOPIC_ARNS to the ARNs of the SNS topics of the account's SES notifications.",
          );
        }
        let body: unknown = request.body;
        if (typeof body === 'string') {
          try {
            body = JSON.parse(body);
          } catch {
            throw new HttpError('bad_request', 'The body is not an SNS message (JSON).');
          }
        }
        const now = ctx.clock();
        const check = await checkSnsMessage(body, snsFetch, certificates, now);
        if (!check.ok) {
          request.log.warn({ reason: check.reason }, 'SES webhook post refused');
          throw new HttpError('invalid_signature', `The post is not a message signed by Amazon SNS (${check.reason}).`);
        }
        const message = check.message;
        if (!topics.includes(message.TopicArn)) {
          throw new HttpError('forbidden', 'Notifications of this SNS topic are not accepted here (SES_TOPIC_ARNS).');
        }
        if (message.Type === 'SubscriptionConfirmation') {
          const url = snsUrl(message.SubscribeURL);
          if (!url) throw new HttpError('invalid_signature', 'SubscribeURL is not an https URL on an SNS host.');
          await snsFetch(url.href);
          request.log.info({ topic: message.TopicArn }, 'SNS subscription confirmed');
          return { recorded: 0, duplicates: 0, ignored: 0 };
        }
        if (message.Type !== 'Notification') return { recorded: 0, duplicates: 0, ignored: 0 };
        const events = readSesNotification(message.Message, now);
        const result = await recordDeliveryEvents(db, events, now);
        return { recorded: result.recorded, duplicates: result.duplicates, ignored: result.unknown + (events.length === 0 ? 1 : 0) };
      },
    );
}

/** Postmark's Bounce and SpamComplaint webhooks, with the basic credentials it is given. */
function postmarkWebhooks(app: App, ctx: AppContext): void {
  const { db } = ctx.database;
  for (const { url, legacy } of callbackPaths('postmark'))
    app.post(
      url,
      {
        config: { public: true },
        bodyLimit: WEBHOOK_BODY_LIMIT,
        schema: {
          hide: legacy,
          tags: CALLBACK_TAGS,
          summary: "Postmark's Bounce and SpamComplaint webhooks; HTTP basic credentials from POSTMARK_WEBHOOK_USER/PASSWORD",
          documentedBody: { content: { 'application/json': { schema: POSTMARK_RECORD } } },
          response: { 200: EventReceipt, ...problems(400, 401, 403, 413, 415) },
        },
      },
      async (request) => {
        const expected = ctx.config.postmarkWebhook;
        if (!expected) {
          throw new HttpError(
            'webhook_not_configured',
            'The Postmark webhook is not set up on this server: its operator must set POSTMARK_WEBHOOK_USER and POSTMARK_WEBHOOK_PASSWORD.',
          );
        }
        if (!credentialsMatch(request.headers.authorization, expected)) {
          throw new HttpError('unauthorized', 'Wrong or missing webhook credentials.', {
            headers: { 'WWW-Authenticate': 'Basic realm="postmark-webhook"' },
          });
        }
        if (!request.body || typeof request.body !== 'object' || Array.isArray(request.body)) {
          throw new HttpError('bad_request', 'The body must be one Postmark webhook record (a JSON object).');
        }
        const now = ctx.clock();
        const read = readPostmarkRecord(request.body, now);
        if ('ignored' in read) {
          request.log.info({ why: read.ignored }, 'Postmark record ignored');
          return { recorded: 0, duplicates: 0, ignored: 1 };
        }
        const result = await recordDeliveryEvents(db, [read.event], now);
        return { recorded: result.recorded, duplicates: result.duplicates, ignored: result.unknown };
      },
    );
}
