import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';

/** Timestamps are `timestamptz`: read as Date, written as Date (from the clock, `ctx.clock()`). */
type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
/**
 * A time every insert gives (from the clock): the columns whose `DEFAULT now()` (migrations 0001
 * to 0015) serves only SQL written by hand, so that a test that moves the clock sees its time in
 * every row written (docs/decisions.md, "One clock").
 */
type ClockTimestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface TeamsTable {
  id: Generated<number>;
  name: string;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
}

/** The roles of a user, in rising order of rights (identity/roles.ts lists them in that order). */
export type RoleName = 'User' | 'Team Administrator' | 'Administrator';

export interface UsersTable {
  id: Generated<number>;
  team_id: number | null;
  first_name: string;
  last_name: string;
  email: string;
  phone: string | null;
  time_zone: string | null;
  status: Generated<'Active' | 'Cancelled'>;
  roles: RoleName[];
  cancelled_at: NullableTimestamp;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
  deleted_at: NullableTimestamp;
  /** scrypt hash (PHC string); null when no password was ever set. Never leaves the server. */
  password_hash: ColumnType<string | null, string | null | undefined, string | null>;
  /** The name and address emails are sent as; null: the user's full name and account email. */
  sender_name: ColumnType<string | null, string | null | undefined, string | null>;
  sender_email: ColumnType<string | null, string | null | undefined, string | null>;
  /** The postal address shown in every email's footer (CAN-SPAM); null: MAIL_POSTAL_ADDRESS. */
  postal_address: ColumnType<string | null, string | null | undefined, string | null>;
  /** Why the brakes paused this user's sending (docs/sending.md, "Brakes"); null while sending. */
  sending_paused_reason: ColumnType<string | null, string | null | undefined, string | null>;
  sending_paused_at: NullableTimestamp;
  /** The rates when the pause began (fractions: 0.0067 is 0.67 %). */
  sending_paused_complaint_rate: ColumnType<number | null, number | null | undefined, number | null>;
  sending_paused_hard_bounce_rate: ColumnType<number | null, number | null | undefined, number | null>;
  /** When an Administrator last resumed sending: what was held by then is let go. */
  sending_resumed_at: NullableTimestamp;
}

export interface ApiKeysTable {
  id: Generated<number>;
  user_id: number;
  name: string;
  prefix: string;
  key_hash: Buffer;
  /** The user who made the key (the user themself or an Administrator); null for keys older than migration 0022. */
  created_by: number | null;
  created_at: ClockTimestamp;
  last_used_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
}

export interface WebSessionsTable {
  id: Generated<number>;
  user_id: number;
  token_hash: Buffer;
  created_at: Timestamp;
  last_seen_at: Timestamp;
  expires_at: Timestamp;
  /** A one-time message for the next page, sealed with the session's own key (web/flash.ts); null when none waits. */
  flash: Buffer | null;
}

export interface UserInvitationsTable {
  id: Generated<number>;
  user_id: number;
  token_hash: Buffer;
  created_by: number;
  created_at: Timestamp;
  expires_at: Timestamp;
  used_at: NullableTimestamp;
}

/** A row an import refused, as its page shows it: the line, the field, the value there and the API's words. */
export interface RefusedImportRow {
  line: number;
  field: string;
  value: string;
  message: string;
}

/** A contact import in the browser (contacts/import-runs.ts): the file between preview and import, then the outcome. */
export interface ContactImportsTable {
  id: Generated<number>;
  user_id: number;
  file_name: string;
  /** The CSV's bytes, until it is imported. */
  file: ColumnType<Buffer | null, Buffer, Buffer | null>;
  encoding: string;
  separator: string;
  header: Json<string[]>;
  sample: Json<{ line: number; cells: string[] }[]>;
  row_count: number;
  /** The columns the person mapped by hand, by header name, as the API's `column=NAME:field`. */
  mapping: Json<{ name: string; field: string }[]>;
  state: 'staged' | 'importing' | 'done' | 'failed';
  rows_done: ColumnType<number, number | undefined, number>;
  created: ColumnType<number | null, undefined, number | null>;
  updated: ColumnType<number | null, undefined, number | null>;
  refused: ColumnType<RefusedImportRow[] | null, undefined, string | null>;
  error: ColumnType<string | null, undefined, string | null>;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
}

export interface WebSignInFailuresTable {
  id: Generated<number>;
  subject: string;
  failed_at: Timestamp;
}

export interface MediaTable {
  id: Generated<number>;
  user_id: number;
  name: string;
  file_name: string;
  collection_name: string;
  mime_type: string;
  size: number;
  /** Playing time when cheaply known from the headers (WAV, MP3); null otherwise. Not in the API shape. */
  duration_seconds: number | null;
  /** The unguessable part of the public `full_url`. */
  token: string;
  /** Where the media store keeps the bytes. */
  storage_key: string;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
  deleted_at: NullableTimestamp;
}

export type ContactStatus =
  | 'Subscribed'
  | 'Unsubscribed'
  | 'Inactive - Hard Bounce'
  | 'Inactive - Spam Complaint'
  | 'Inactive - Invalid Email Address'
  | 'Inactive - Repeated Soft Bounce';

/**
 * Why a contact's email or phone no longer receives (docs/outcomes.md): `reason` is one of the
 * channel's classifications (`hard_bounce`, `landline`, …), `at` when it was decided (null for a
 * contact made inactive before this was kept), the delivery whose outcome decided it.
 */
export interface Suppression {
  reason: string;
  at: string | null;
  delivery_id: number | null;
  description: string | null;
}

/** Why a delivery ended as it did: Hopper's classification, the provider's code and words (docs/outcomes.md). */
export interface OutcomeReason {
  classification: string;
  /** True when sending to this address or number again is pointless (it then suppresses it, if `suppress`). */
  permanent: boolean;
  /** The provider's code: a DSN status (`5.1.1`), an SMTP reply code, a provider's reason code (`4002`). */
  code?: string | null;
  /** The provider's own words (a diagnostic line, a status text), cut to 500 characters. */
  description?: string | null;
  /** This outcome stops the contact's address (email) or number (voicemail) from receiving again. */
  suppress?: boolean;
}

/** An outcome as a delivery keeps it: who said it and when. */
export interface RecordedOutcome {
  classification: string;
  permanent: boolean;
  code: string | null;
  description: string | null;
  source: string;
  at: string;
}

export interface ContactsTable {
  id: Generated<number>;
  user_id: number;
  first_name: string | null;
  last_name: string | null;
  email: string | null;
  /** Ten NANP digits (see contacts/phone.ts). */
  phone: string | null;
  time_zone: string | null;
  status: Generated<ContactStatus>;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
  deleted_at: NullableTimestamp;
  /**
   * Shared its live address with an older contact when migration 0021 made addresses unique: left
   * out of the unique index until its address changes or the older contact leaves it. Never set
   * by a write.
   */
  duplicate_email: Generated<boolean>;
  /** Why the email no longer receives (status not Subscribed); written with the status. */
  email_suppression: ColumnType<Suppression | null, string | null | undefined, string | null>;
  /** Why the phone number no longer receives voicemail drops; null while it does. */
  phone_suppression: ColumnType<Suppression | null, string | null | undefined, string | null>;
  /** The id a CRM knows the contact by: unique among the owner's live contacts (migration 0031). */
  external_id: string | null;
}

export interface TagsTable {
  id: Generated<number>;
  user_id: number;
  name: string;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
}

export interface ContactTagsTable {
  user_id: number;
  contact_id: number;
  tag_id: number;
}

export interface SignaturesTable {
  id: Generated<number>;
  user_id: number;
  name: string;
  /** Sanitised email HTML (messaging/email-html.ts). */
  body: string;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
  deleted_at: NullableTimestamp;
}

/** The global template library: not owned by a user. */
export interface TemplatedMessagesTable {
  id: Generated<number>;
  name: string;
  subject: string;
  description: string | null;
  greeting_with_first_name: string;
  greeting_without_first_name: string;
  /** Sanitised email HTML (messaging/email-html.ts). */
  body: string;
  closing: string | null;
  ps_line: string | null;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
  deleted_at: NullableTimestamp;
}

export type MessageStatusColumn = 'Saved' | 'Scheduled' | 'Sending' | 'Sent' | 'Failed' | 'Cancelled';
export interface StoredRecipient {
  group: 'Tags' | 'Contacts';
  value: number;
  label: string;
}
/** jsonb: written as JSON text, read back parsed. */
type Json<T> = ColumnType<T, string, string>;

export interface VoicemailDropsTable {
  id: Generated<number>;
  user_id: number;
  provider: string;
  media_id: number;
  /** Ten NANP digits. */
  callback_number: string;
  name: string;
  description: string | null;
  status: Generated<MessageStatusColumn>;
  reason: string | null;
  send_type: Generated<'Now' | 'Future'>;
  send_at: NullableTimestamp;
  sending_at: NullableTimestamp;
  sent_at: NullableTimestamp;
  recipients: Json<StoredRecipient[]>;
  resolved_at: NullableTimestamp;
  /** The id a CRM knows the message by: unique among the owner's live messages of its kind (migration 0032). */
  external_id: string | null;
  /** The owner's own strings, echoed in the message's events and its deliveries' (migration 0032). */
  metadata: ColumnType<Record<string, string>, string | undefined, string>;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
  deleted_at: NullableTimestamp;
}

export interface TemplatedEmailsTable {
  id: Generated<number>;
  user_id: number;
  templated_message_id: number | null;
  subject: string;
  description: string;
  greeting_with_first_name: string;
  greeting_without_first_name: string;
  /** Sanitised email HTML. */
  body: string;
  closing: string;
  ps_line: string;
  /** Plain-text rendering of greeting, body, closing, signature and P.S., made on save. */
  text: string;
  signature_id: number | null;
  status: Generated<MessageStatusColumn>;
  reason: string | null;
  send_type: Generated<'Now' | 'Future'>;
  send_at: NullableTimestamp;
  sending_at: NullableTimestamp;
  sent_at: NullableTimestamp;
  recipients: Json<StoredRecipient[]>;
  exclusions: Json<StoredRecipient[]>;
  source: Generated<'API' | 'Web'>;
  resolved_at: NullableTimestamp;
  /** The id a CRM knows the message by: unique among the owner's live messages of its kind (migration 0032). */
  external_id: string | null;
  /** The owner's own strings, echoed in the message's events and its deliveries' (migration 0032). */
  metadata: ColumnType<Record<string, string>, string | undefined, string>;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
  deleted_at: NullableTimestamp;
}

/** The two kinds of message (messages/kinds.ts), as the ledger and the counters name them. */
export type MessageKind = 'voicemail_drop' | 'templated_email';

type CounterColumn = Generated<number>;
export interface MessageCountersTable {
  message_kind: MessageKind;
  message_id: number;
  shard: Generated<number>;
  user_id: number;
  sent: CounterColumn;
  processed: CounterColumn;
  delivered: CounterColumn;
  open: CounterColumn;
  click: CounterColumn;
  reply: CounterColumn;
  spamreport: CounterColumn;
  unsubscribe: CounterColumn;
  deferred: CounterColumn;
  dropped: CounterColumn;
  bounce: CounterColumn;
  hard_bounce: CounterColumn;
  soft_bounce: CounterColumn;
  failed: CounterColumn;
}

export type DeliveryState =
  | 'queued'
  | 'sending'
  | 'deferred'
  | 'held'
  | 'sent'
  | 'delivered'
  | 'bounced'
  | 'dropped'
  | 'failed'
  | 'cancelled'
  | 'skipped';

export interface DeliveriesTable {
  id: Generated<number>;
  user_id: number;
  message_kind: MessageKind;
  message_id: number;
  contact_id: number;
  address: string;
  state: Generated<DeliveryState>;
  provider_message_id: string | null;
  attempts: Generated<number>;
  last_error: string | null;
  /** Why it ended as it did, once it has (docs/outcomes.md). */
  outcome: ColumnType<RecordedOutcome | null, string | null | undefined, string | null>;
  next_attempt_at: ClockTimestamp;
  lease_until: NullableTimestamp;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
  sent_at: NullableTimestamp;
  delivered_at: NullableTimestamp;
}

export interface DeliveryEventsTable {
  id: Generated<number>;
  source: string;
  event_id: string;
  delivery_id: number;
  type: string;
  occurred_at: Timestamp;
  detail: string | null;
  received_at: ClockTimestamp;
}

/** Server-made secrets shared by every process on the database (db/secrets.ts). */
export interface SecretsTable {
  name: string;
  value: Buffer;
  created_at: ClockTimestamp;
}

export interface Database {
  teams: TeamsTable;
  users: UsersTable;
  api_keys: ApiKeysTable;
  web_sessions: WebSessionsTable;
  user_invitations: UserInvitationsTable;
  contact_imports: ContactImportsTable;
  web_sign_in_failures: WebSignInFailuresTable;
  media: MediaTable;
  contacts: ContactsTable;
  email_opt_outs: EmailOptOutsTable;
  tags: TagsTable;
  contact_tags: ContactTagsTable;
  signatures: SignaturesTable;
  templated_messages: TemplatedMessagesTable;
  voicemail_drops: VoicemailDropsTable;
  templated_emails: TemplatedEmailsTable;
  message_counters: MessageCountersTable;
  deliveries: DeliveriesTable;
  delivery_events: DeliveryEventsTable;
  secrets: SecretsTable;
  collection_versions: CollectionVersionsTable;
  provider_submissions: ProviderSubmissionsTable;
  provider_media: ProviderMediaTable;
  provider_events: ProviderEventsTable;
  inbound_messages: InboundMessagesTable;
  replies: RepliesTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  webhook_resend_allowances: WebhookResendAllowancesTable;
  idempotency_keys: IdempotencyKeysTable;
  rate_limit_counts: RateLimitCountsTable;
  media_blobs: MediaBlobsTable;
}

/**
 * An address whose person said no (migration 0039): per owner, its address in lower case, the
 * status and suppression of the first contact that held it with the person's word. Written by the
 * contacts' triggers only; a contact given the address takes them.
 */
export interface EmailOptOutsTable {
  user_id: number;
  email_key: string;
  status: Extract<ContactStatus, 'Unsubscribed' | 'Inactive - Spam Complaint'>;
  suppression: Suppression;
}

/** One part of a stored media file (MEDIA_STORE=postgres, migration 0034). */
export interface MediaBlobsTable {
  storage_key: string;
  byte_offset: number;
  bytes: Uint8Array;
}

/** A hand-over to a voicemail provider (migration 0015). */
export interface ProviderSubmissionsTable {
  delivery_id: number;
  provider: string;
  phone: string;
  idempotency_key: string;
  callback_token: string;
  remote_id: string | null;
  remote_drop_id: string | null;
  result_at: NullableTimestamp;
  delivered: boolean | null;
  reason_code: number | null;
  result_detail: string | null;
  result_occurred_at: NullableTimestamp;
  proof_of_delivery_url: string | null;
  next_check_at: NullableTimestamp;
  checks: Generated<number>;
  /** The exact body of the first request under the idempotency key (migration 0027): retries re-send it. */
  request_body: string | null;
  /** The result in Hopper's classification (migration 0027). */
  result_outcome: ColumnType<OutcomeReason | null, string | null | undefined, string | null>;
  created_at: ClockTimestamp;
}

export interface ProviderMediaTable {
  provider: string;
  media_id: number;
  remote_id: string;
  created_at: ClockTimestamp;
}

export interface ProviderEventsTable {
  provider: string;
  event_key: string;
  delivery_id: number | null;
  received_at: ClockTimestamp;
}

/** One message the inbound receiver accepted, once per Message-ID and recipient (migration 0010). */
export type InboundMessageKind = 'reply' | 'bounce' | 'complaint' | 'unsubscribe';

export interface InboundMessagesTable {
  id: Generated<number>;
  recipient: string;
  message_id: string;
  delivery_id: number;
  kind: InboundMessageKind;
  received_at: Timestamp;
}

/** A contact's answer to a delivery, kept for the agent (automatic replies too, marked). */
export interface RepliesTable {
  id: Generated<number>;
  inbound_id: number;
  delivery_id: number;
  user_id: number;
  message_kind: string;
  message_id: number;
  contact_id: number;
  from_address: string;
  from_name: string | null;
  subject: string;
  text: string;
  auto_reply: boolean;
  received_at: Timestamp;
  /** When it was forwarded to the sender; null for automatic replies, and until the forward succeeds. */
  forwarded_at: NullableTimestamp;
  /** SPF, DKIM and DMARC of the sender, as the receiver found them (migration 0026); null before it. */
  authentication: ColumnType<ReplyAuthentication | null, string | null | undefined, never>;
  /** Why it is not forwarded to the sender (a DMARC failure, the forwards limit); null: forwarded or to be. */
  held_reason: ColumnType<ReplyHeldReason | null, ReplyHeldReason | null | undefined, never>;
  /** When the agent released it from hold, to be forwarded once (migration 0045); null otherwise. */
  released_at: NullableTimestamp;
  /** When the agent discarded it, held: never to be forwarded (migration 0045); null otherwise. */
  discarded_at: NullableTimestamp;
}

/** One mechanism's verdict as mailauth gives it (pass, fail, softfail, neutral, none, temperror, permerror, policy). */
export interface ReplyAuthentication {
  spf: string;
  dkim: string;
  dmarc: string;
  /** The domain of the From header that DMARC was judged for. */
  from_domain: string | null;
  /** The Authentication-Results value (RFC 8601) the forward carries. */
  results: string;
}

type ReplyHeldReason = 'dmarc_fail' | 'forward_limit';

/** Idempotency-Key: the first response to a key (http/idempotency.ts). */
export interface IdempotencyKeysTable {
  user_id: number;
  key: string;
  request_hash: string;
  created_at: Timestamp;
  status: number | null;
  headers: ColumnType<Record<string, string> | null, string | null, string | null>;
  body: Buffer | null;
}

/** Rate-limit counters, one per key and fixed window (http/rate-limit.ts). */
export interface RateLimitCountsTable {
  key: string;
  window_start: Timestamp;
  count: number;
}

/** Outbound webhooks (migration 0013, src/webhooks/). */
export interface WebhookEndpointsTable {
  id: Generated<number>;
  user_id: number;
  url: string;
  description: string | null;
  events: string[];
  enabled: Generated<boolean>;
  disabled_reason: string | null;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: NullableTimestamp;
  failing_since: NullableTimestamp;
  /** Retry-After: nothing is sent to it before this time (migration 0029). */
  paused_until: NullableTimestamp;
  /** Whose events it hears: its user's, its team's members', or every user's (migration 0030). */
  scope: Generated<'user' | 'team' | 'service'>;
  team_id: number | null;
  created_at: ClockTimestamp;
  updated_at: ClockTimestamp;
}

export interface WebhookEventsTable {
  id: Generated<number>;
  uid: Generated<string>;
  user_id: number;
  type: string;
  resource: string;
  resource_id: number;
  occurred_at: Timestamp;
  snapshot: unknown;
  payload: string | null;
}

type WebhookDeliveryState = 'pending' | 'sending' | 'delivered' | 'failed';

export interface WebhookDeliveriesTable {
  id: Generated<number>;
  endpoint_id: number;
  event_id: number;
  state: Generated<WebhookDeliveryState>;
  attempts: Generated<number>;
  next_attempt_at: NullableTimestamp;
  lease_until: NullableTimestamp;
  last_status: number | null;
  last_error: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  delivered_at: NullableTimestamp;
}

export interface WebhookAttemptsTable {
  id: Generated<number>;
  delivery_id: number;
  attempt: number;
  started_at: Timestamp;
  duration_ms: number;
  status: number | null;
  error: string | null;
  next_retry_at: NullableTimestamp;
}

/** Events a user's endpoints were resent in the hour since `window_started_at` (migration 0040). */
export interface WebhookResendAllowancesTable {
  user_id: number;
  window_started_at: ClockTimestamp;
  resent: number;
}

/** Change counter of a user's rows in an owned collection, bumped by a trigger (migration 0009). */
export interface CollectionVersionsTable {
  collection: string;
  user_id: number;
  /** Sessions bump different shards (migration 0011); the version is their sum. */
  shard: Generated<number>;
  version: Generated<number>;
  /** The owner's live rows by status (migration 0036), summed over the shards like the version. */
  saved: Generated<number>;
  scheduled: Generated<number>;
  sending: Generated<number>;
  sent: Generated<number>;
  failed: Generated<number>;
  cancelled: Generated<number>;
}

export type TeamRow = Selectable<TeamsTable>;
export type UserRow = Selectable<UsersTable>;
export type NewUser = Insertable<UsersTable>;
export type UserUpdate = Updateable<UsersTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type MediaRow = Selectable<MediaTable>;
export type NewMedia = Insertable<MediaTable>;
export type ContactRow = Selectable<ContactsTable>;
export type TagRow = Selectable<TagsTable>;
export type SignatureRow = Selectable<SignaturesTable>;
export type TemplatedMessageRow = Selectable<TemplatedMessagesTable>;
export type VoicemailDropRow = Selectable<VoicemailDropsTable>;
export type TemplatedEmailRow = Selectable<TemplatedEmailsTable>;
export type DeliveryRow = Selectable<DeliveriesTable>;
export type DeliveryEventRow = Selectable<DeliveryEventsTable>;
/** What a delivery says about where it went: its message, its contact and the address used. */
export type DeliveryFacts = Pick<DeliveryRow, 'id' | 'user_id' | 'message_kind' | 'message_id' | 'contact_id' | 'address'>;
export type ReplyRow = Selectable<RepliesTable>;
export type NewReply = Insertable<RepliesTable>;
export type WebhookEndpointRow = Selectable<WebhookEndpointsTable>;
