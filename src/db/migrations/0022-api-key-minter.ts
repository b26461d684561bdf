import { type Kysely, sql } from 'kysely';

// Who made each API key: the user themself or an Administrator (docs/decisions.md, "Who may mint a
// key"). Keys made before this migration have no recorded maker.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE api_keys ADD COLUMN created_by bigint REFERENCES users (id)`.execute(db);
}
