import type { Database, MessageKind, TemplatedEmailRow, VoicemailDropRow } from '../db/schema.ts';

export type { MessageKind };

/**
 * The two kinds of message, each with its table. The rest of `messages/` (lifecycle, recipients,
 * counters, writes) is shared by both; what sets a kind apart lives in its own module
 * (`voicemail/drops.ts`, `email/templated-emails.ts`).
 */
export const MESSAGE_KINDS = ['voicemail_drop', 'templated_email'] as const satisfies readonly MessageKind[];

export const MESSAGE_TABLES = {
  voicemail_drop: 'voicemail_drops',
  templated_email: 'templated_emails',
} as const satisfies Record<MessageKind, keyof Database>;

export interface MessageRows {
  templated_email: TemplatedEmailRow;
  voicemail_drop: VoicemailDropRow;
}
