import { type TSchema, Type } from 'typebox';
import { Contact } from '../contacts/contacts.ts';
import { TemplatedEmail } from '../email/templated-emails.ts';
import { User } from '../identity/users.ts';
import { Id, Nullable, StringEnum } from '../json-schema.ts';
import { Media } from '../media/media.ts';
import { MESSAGE_KINDS } from '../messages/kinds.ts';
import { Delivery } from '../sending/delivery-listing.ts';
import { VoicemailDrop } from '../voicemail/drops.ts';
import { WebhookEndpoint } from './endpoints.ts';
import { ENDPOINT_DISABLED_EVENT, TEST_EVENT, WEBHOOK_EVENT_TYPES } from './events.ts';
import { BULKY_FIELDS, EVENT_PAYLOAD_LIMIT, INLINE_TEXT_LIMIT } from './payload-size.ts';

/**
 * The event contract (docs/webhooks.md): the body of every event type Hopper posts, as JSON
 * schemas built from the resources' own (the OpenAPI document's `webhooks` section, and the types
 * of the typed client). `data` is the resource as a read returns it, but for its bulky fields
 * (payload-size.ts), which may be left out: then `omitted` names them and `href` is where to read
 * them.
 */
const Thinned = {
  omitted: Type.Optional(
    Type.Array(Type.String(), {
      description: `Fields left out to keep the event under ${EVENT_PAYLOAD_LIMIT / 1024} KiB (a body or text over ${INLINE_TEXT_LIMIT / 1024} KiB is always left out): read them at \`href\``,
    }),
  ),
  href: Type.Optional(Type.String({ format: 'uri', description: 'The resource in the API, where the fields left out can be read' })),
};

/** The resource's properties, its bulky ones optional (an event may leave them out). */
function thinnable(properties: Record<string, TSchema>, bulky: readonly string[]): Record<string, TSchema> {
  return Object.fromEntries(
    Object.entries(properties).map(([name, schema]) => [name, bulky.includes(name) ? Type.Optional(schema) : schema]),
  );
}

export const ContactEventData = Type.Object({
  ...thinnable(Contact.properties, BULKY_FIELDS.contact),
  previous_status: Type.Optional(Type.String({ description: 'contact.status_changed: the status before the change' })),
  ...Thinned,
});

export const TemplatedEmailEventData = Type.Object({
  ...thinnable(TemplatedEmail.properties, BULKY_FIELDS.templated_email),
  ...Thinned,
});

export const VoicemailDropEventData = Type.Object({
  ...thinnable(VoicemailDrop.properties, BULKY_FIELDS.voicemail_drop),
  // Copies: the resources' own schemas mark fields read-only, which a request body (what a post is) may not hold.
  media: Type.Object({ ...Media.properties }),
  ...Thinned,
});

export const DeliveryEventData = Type.Object({
  ...Delivery.properties,
  user_id: Id,
  message_kind: StringEnum(MESSAGE_KINDS),
  message_id: Id,
  event: Type.Optional(
    Type.Object(
      {
        type: Type.String({ description: 'open, click or reply' }),
        detail: Nullable(Type.String({ description: 'The clicked URL, …' })),
        occurred_at: Type.String(),
      },
      { description: 'delivery.opened, .clicked, .replied: what was recorded' },
    ),
  ),
});

export const WebhookTestEventData = Type.Object({ endpoint_id: Id, message: Type.String() });
export const SendingPausedEventData = Type.Object({ user_id: Id, sending_paused: User.properties.sending_paused });

const DELIVERY_TYPES = WEBHOOK_EVENT_TYPES.filter((t) => t.startsWith('delivery.'));

/** The events of one resource: their envelope, `data` typed. */
function eventSchema(types: readonly string[], data: TSchema, description: string) {
  return Type.Object(
    {
      type: StringEnum(types),
      timestamp: Type.String({ format: 'date-time', description: 'When the change happened (ISO 8601, milliseconds)' }),
      user_id: Id,
      data,
    },
    { description },
  );
}

const byPrefix = (prefix: string) => WEBHOOK_EVENT_TYPES.filter((t) => t.startsWith(prefix));

export const ContactEvent = eventSchema(
  byPrefix('contact.'),
  ContactEventData,
  'A contact was created, updated, deleted or changed status',
);
export const TemplatedEmailEvent = eventSchema(byPrefix('templated_email.'), TemplatedEmailEventData, "A templated email's status changed");
export const VoicemailDropEvent = eventSchema(byPrefix('voicemail_drop.'), VoicemailDropEventData, "A voicemail drop's status changed");
export const DeliveryEvent = eventSchema(
  DELIVERY_TYPES,
  DeliveryEventData,
  "A recipient's delivery changed state, or was opened, clicked or replied to",
);
export const SendingPausedEvent = eventSchema(
  byPrefix('user.'),
  SendingPausedEventData,
  'The brakes paused the user\'s sending: their spam complaints or hard bounces passed the limit (docs/sending.md, "Brakes")',
);
export const WebhookTestEvent = eventSchema([TEST_EVENT], WebhookTestEventData, 'Sent by POST /v3/webhooks/{id}/test');
export const EndpointDisabledEvent = eventSchema(
  [ENDPOINT_DISABLED_EVENT],
  Type.Object({ ...WebhookEndpoint.properties }),
  "Another of the user's endpoints was disabled (a 410 Gone, or failing for too long); sent to every other enabled endpoint of that user, subscribed or not",
);

/** Every event type and the schema of its body, in the order the documentation lists them. */
export const EVENT_SCHEMAS: readonly { type: string; schema: TSchema; resource: string }[] = [
  ...byPrefix('templated_email.').map((type) => ({ type, schema: TemplatedEmailEvent, resource: 'templated email' })),
  ...byPrefix('voicemail_drop.').map((type) => ({ type, schema: VoicemailDropEvent, resource: 'voicemail drop' })),
  ...DELIVERY_TYPES.map((type) => ({ type, schema: DeliveryEvent, resource: 'delivery' })),
  ...byPrefix('contact.').map((type) => ({ type, schema: ContactEvent, resource: 'contact' })),
  ...byPrefix('user.').map((type) => ({ type, schema: SendingPausedEvent, resource: 'user' })),
  { type: TEST_EVENT, schema: WebhookTestEvent, resource: 'webhook endpoint' },
  { type: ENDPOINT_DISABLED_EVENT, schema: EndpointDisabledEvent, resource: 'webhook endpoint' },
];

const When = Type.String({ format: 'date-time', maxLength: 64, description: 'ISO 8601 with an offset or Z' });

/** `GET /v3/users/{user_id}/webhook_events`: paging, `type` filters, and a time window. */
export const WebhookEventQuery = {
  since: Type.Optional({ ...When, description: 'Events that happened at or after this time' }),
  until: Type.Optional({ ...When, description: 'Events that happened before this time' }),
};

/** A stored event, as listed. */
export const WebhookEventRecord = Type.Object({
  id: Id,
  webhook_id: Type.String({
    description: 'The `webhook-id` header it is posted with (the same to every endpoint, on every retry and resend)',
  }),
  type: Type.String(),
  timestamp: Type.String({ format: 'date-time' }),
  user_id: Id,
  resource: Type.String({ description: 'contact, templated_email, voicemail_drop, delivery or webhook' }),
  resource_id: Id,
  payload: Type.Union([TemplatedEmailEvent, VoicemailDropEvent, DeliveryEvent, ContactEvent, WebhookTestEvent, EndpointDisabledEvent], {
    description: 'The body as posted to endpoints',
  }),
});

export const ResendBody = Type.Object(
  {
    event_id: Type.Optional({ ...Id, description: 'One event (of any type) to send again' }),
    since: Type.Optional({ ...When, description: 'Every event since this time that the endpoint subscribes to' }),
    until: Type.Optional({ ...When, description: 'With `since`: only events before this time' }),
    after_event_id: Type.Optional({
      ...Id,
      description: 'With `since`: go on after this event (the `next_after_event_id` of the previous page, with its `next_since`)',
    }),
  },
  { additionalProperties: false },
);

export const ResendResult = Type.Object({
  queued: Type.Integer({ minimum: 0, description: 'Deliveries queued to the endpoint, due now (1,000 at most)' }),
  next_since: Nullable(
    Type.String({
      description:
        'When there may be more: resend again with this `since` and `after_event_id: next_after_event_id` for the next page; null otherwise',
    }),
  ),
  next_after_event_id: Nullable({ ...Id, description: 'The last event of this page, to go on after; null when this was the last page' }),
});
