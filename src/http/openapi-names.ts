import type { TSchema } from 'typebox';
import { Contact, ContactBody, LiftBody, LiftResult } from '../contacts/contacts.ts';
import { CreateTagBody, Tag, UpdateTagBody } from '../contacts/tags.ts';
import { CreateSignatureBody, Signature, UpdateSignatureBody } from '../email/signatures.ts';
import { EmailBody, TemplatedEmail } from '../email/templated-emails.ts';
import { CreateTemplatedMessageBody, TemplatedMessage, UpdateTemplatedMessageBody } from '../email/templated-messages.ts';
import { ApiKey, ApiKeyBody, NewApiKey } from '../identity/api-keys.ts';
import { Team, TeamBody } from '../identity/teams.ts';
import { CreateUserBody, UpdateUserBody, User } from '../identity/users.ts';
import { Reply } from '../inbound/replies.ts';
import { Success } from '../json-schema.ts';
import { Media } from '../media/media.ts';
import { Reporting } from '../messages/message-fields.ts';
import { RecipientInput, RecipientOutput } from '../messages/recipients.ts';
import { Delivery } from '../sending/delivery-listing.ts';
import { CreateDropBody, UpdateDropBody, VoicemailDrop } from '../voicemail/drops.ts';
import { WebhookAttempt, WebhookDelivery, WebhookDeliveryDetail } from '../webhooks/deliveries.ts';
import { CreateWebhookBody, UpdateWebhookBody, WebhookEndpoint, WebhookEndpointWithSecret } from '../webhooks/endpoints.ts';
import {
  ContactEvent,
  ContactEventData,
  DeliveryEvent,
  DeliveryEventData,
  EndpointDisabledEvent,
  ResendBody,
  ResendResult,
  SendingPausedEvent,
  SendingPausedEventData,
  TemplatedEmailEvent,
  TemplatedEmailEventData,
  VoicemailDropEvent,
  VoicemailDropEventData,
  WebhookEventRecord,
  WebhookTestEvent,
  WebhookTestEventData,
} from '../webhooks/event-schemas.ts';

/**
 * The schemas the OpenAPI document shows as named components (`components.schemas[name]`,
 * referenced wherever they appear): a schema with a `title` is hoisted by openapi-document.ts.
 * A new resource adds its API shape and bodies here.
 */
const NAMED: Record<string, TSchema> = {
  ApiKey: ApiKey,
  ApiKeyCreate: ApiKeyBody,
  Contact: Contact,
  ContactEvent: ContactEvent,
  ContactEventData: ContactEventData,
  ContactWrite: ContactBody,
  Delivery: Delivery,
  DeliveryEvent: DeliveryEvent,
  DeliveryEventData: DeliveryEventData,
  EndpointDisabledEvent: EndpointDisabledEvent,
  Media: Media,
  NewApiKey: NewApiKey,
  Recipient: RecipientOutput,
  RecipientEntry: RecipientInput,
  Reporting: Reporting,
  SendingPausedEvent: SendingPausedEvent,
  SendingPausedEventData: SendingPausedEventData,
  Signature: Signature,
  SignatureCreate: CreateSignatureBody,
  SignatureUpdate: UpdateSignatureBody,
  Success: Success,
  SuppressionLift: LiftBody,
  SuppressionLiftResult: LiftResult,
  Tag: Tag,
  TagCreate: CreateTagBody,
  TagUpdate: UpdateTagBody,
  Team: Team,
  TeamCreate: TeamBody,
  TemplatedEmail: TemplatedEmail,
  TemplatedEmailEvent: TemplatedEmailEvent,
  TemplatedEmailEventData: TemplatedEmailEventData,
  TemplatedEmailReply: Reply,
  TemplatedEmailWrite: EmailBody,
  TemplatedMessage: TemplatedMessage,
  TemplatedMessageCreate: CreateTemplatedMessageBody,
  TemplatedMessageUpdate: UpdateTemplatedMessageBody,
  User: User,
  UserCreate: CreateUserBody,
  UserUpdate: UpdateUserBody,
  VoicemailDrop: VoicemailDrop,
  VoicemailDropEvent: VoicemailDropEvent,
  VoicemailDropEventData: VoicemailDropEventData,
  VoicemailDropCreate: CreateDropBody,
  VoicemailDropUpdate: UpdateDropBody,
  Webhook: WebhookEndpoint,
  WebhookAttempt: WebhookAttempt,
  WebhookCreate: CreateWebhookBody,
  WebhookDelivery: WebhookDelivery,
  WebhookDeliveryDetail: WebhookDeliveryDetail,
  WebhookEvent: WebhookEventRecord,
  WebhookResend: ResendBody,
  WebhookResendResult: ResendResult,
  WebhookUpdate: UpdateWebhookBody,
  WebhookTestEvent: WebhookTestEvent,
  WebhookTestEventData: WebhookTestEventData,
  WebhookWithSecret: WebhookEndpointWithSecret,
};

/**
 * The example of each request body, shown in /docs and used by the code samples (curl and the
 * typed client): each one a request the API accepts as it is, where ids are those of the first
 * team, user, contact, tag, signature, template and media item (test/http/openapi.test.ts sends
 * them all to a fresh server in that order). Values follow the README's walk-through.
 */
const EXAMPLES: Record<string, object> = {
  ApiKeyCreate: { name: 'CRM sync' },
  ContactWrite: { first_name: 'Ann', email: 'ann@example.com', phone: '(727) 555-0134', tags: ['Sphere'] },
  SignatureCreate: { name: 'Work', body: '<p><strong>Jane Agent</strong><br>Sunrise Realty</p>' },
  SignatureUpdate: { body: '<p><strong>Jane Agent</strong><br>Sunrise Realty<br>(727) 232-9117</p>' },
  TagCreate: { name: 'Open house' },
  TagUpdate: { name: 'Open house 2026' },
  TeamCreate: { name: 'Sunrise Realty' },
  TemplatedEmailWrite: {
    templated_message_id: 1,
    signature_id: 1,
    status: 'Saved',
    recipients: [{ group: 'Tags', value: 1 }],
  },
  TemplatedMessageCreate: {
    name: 'Spring check-in',
    subject: 'Quick question, {{first_name}}',
    body: '<p>Have you thought about the market this spring?</p>',
  },
  TemplatedMessageUpdate: { subject: 'A quick question for you, {{first_name}}' },
  UserCreate: {
    first_name: 'Jane',
    last_name: 'Agent',
    email: 'jane@sunrise.example',
    roles: ['Team Administrator'],
    team_id: 1,
    time_zone: 'America/New_York',
  },
  UserUpdate: { phone: '(727) 232-9117', time_zone: 'America/Chicago' },
  VoicemailDropCreate: {
    provider: 'Sandbox',
    media_id: 1,
    callback_number: '(727) 232-9117',
    name: 'Open house follow-up',
    recipients: [{ group: 'Tags', value: 1 }],
  },
  VoicemailDropUpdate: { name: 'Open house follow-up (Saturday)', status: 'Saved' },
  WebhookCreate: {
    url: 'https://crm.example.com/hopper',
    events: ['delivery.bounced', 'delivery.replied', 'contact.unsubscribed'],
    description: 'CRM sync',
  },
  WebhookResend: { since: '2026-07-12T16:56:00Z' },
  WebhookUpdate: { events: ['delivery.bounced', 'delivery.replied', 'contact.unsubscribed', 'contact.status_changed'] },
};

for (const [title, schema] of Object.entries(NAMED)) {
  const examples = EXAMPLES[title];
  Object.assign(schema, examples ? { title, examples: [examples] } : { title });
}
for (const name of Object.keys(EXAMPLES)) if (!NAMED[name]) throw new Error(`An example for ${name}, which is not a named schema`);
