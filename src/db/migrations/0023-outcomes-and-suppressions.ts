import { type Kysely, sql } from 'kysely';

// Why each delivery ended as it did (`deliveries.outcome`: Hopper's classification, the provider's
// code and words, who said it and when), and why a contact's email or phone no longer receives
// (`contacts.email_suppression`, `contacts.phone_suppression`): docs/outcomes.md. A contact whose
// soft bounces repeat gets a status of its own. Nothing is written to existing rows: a contact
// made inactive before this migration shows a suppression read from its status, without a time.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE deliveries ADD COLUMN outcome jsonb`.execute(db);
  await sql`ALTER TABLE contacts ADD COLUMN email_suppression jsonb, ADD COLUMN phone_suppression jsonb`.execute(db);
  await sql`ALTER TABLE contacts DROP CONSTRAINT contacts_status_check`.execute(db);
  await sql`
    ALTER TABLE contacts ADD CONSTRAINT contacts_status_check CHECK (status IN (
      'Subscribed', 'Unsubscribed', 'Inactive - Hard Bounce', 'Inactive - Spam Complaint',
      'Inactive - Invalid Email Address', 'Inactive - Repeated Soft Bounce'))`.execute(db);
}
