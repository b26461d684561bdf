/**
 * The event types an endpoint can subscribe to (docs/webhooks.md). Triggers of migration 0013 write
 * them as their changes happen; `webhook.test` is sent only by `POST /v3/webhooks/{id}/test`.
 */
const MESSAGE_EVENTS = ['scheduled', 'sending', 'sent', 'failed', 'cancelled'] as const;

export const WEBHOOK_EVENT_TYPES = [
  ...MESSAGE_EVENTS.map((e) => `templated_email.${e}` as const),
  ...MESSAGE_EVENTS.map((e) => `voicemail_drop.${e}` as const),
  'delivery.sent',
  'delivery.delivered',
  'delivery.bounced',
  'delivery.failed',
  'delivery.opened',
  'delivery.clicked',
  'delivery.replied',
  'contact.created',
  'contact.updated',
  'contact.deleted',
  'contact.unsubscribed',
  'contact.status_changed',
  'user.sending_paused',
] as const;

export const TEST_EVENT = 'webhook.test';

/** Sent to a user's other endpoints when one of theirs is disabled (whatever they subscribe to). */
export const ENDPOINT_DISABLED_EVENT = 'endpoint.disabled';
