import { Type } from 'typebox';
import { contactFullName, findLiveContacts } from '../contacts/contacts.ts';
import { findTags } from '../contacts/tags.ts';
import type { Db } from '../db/database.ts';
import type { FieldErrors } from '../errors.ts';
import { Id, StringEnum } from '../json-schema.ts';

/**
 * Recipients (both resources) and exclusions (templated emails): `{group, value, label}` where
 * `group` names a tag or a contact of the message's owner and `value` is its id. The label
 * defaults to the tag's or contact's name when the message is saved.
 */
const RECIPIENT_GROUPS = ['Tags', 'Contacts'] as const;
type RecipientGroup = (typeof RECIPIENT_GROUPS)[number];
interface Recipient {
  group: RecipientGroup;
  value: number;
  label: string;
}

const MAX_RECIPIENT_ENTRIES = 1000;

export const RecipientInput = Type.Object(
  {
    group: StringEnum(RECIPIENT_GROUPS),
    value: Id,
    label: Type.Optional(Type.String({ maxLength: 255 })),
  },
  { additionalProperties: false },
);
export const RecipientList = Type.Array(RecipientInput, { maxItems: MAX_RECIPIENT_ENTRIES });
export const RecipientOutput = Type.Object({ group: StringEnum(RECIPIENT_GROUPS), label: Type.String(), value: Type.Integer() });

/**
 * Checks that every entry names a live tag or contact of `userId` and fills in missing labels.
 * Problems are added to `errors` under `field.N.value`, so one 400 reports them all.
 */
export async function resolveRecipientEntries(
  db: Db,
  userId: number,
  field: string,
  entries: readonly { group: RecipientGroup; value: number; label?: string }[],
  errors: FieldErrors,
): Promise<Recipient[]> {
  const ids = (group: RecipientGroup) => [...new Set(entries.filter((e) => e.group === group).map((e) => e.value))];
  const tagIds = ids('Tags');
  const contactIds = ids('Contacts');
  const tags = new Map<number, string>();
  const contacts = new Map<number, string>();
  if (tagIds.length > 0) {
    for (const row of await findTags(db, userId, tagIds)) tags.set(row.id, row.name);
  }
  if (contactIds.length > 0) {
    for (const row of await findLiveContacts(db, userId, contactIds))
      contacts.set(row.id, contactFullName(row) ?? row.email ?? row.phone ?? `Contact ${row.id}`);
  }
  return entries.map((entry, index) => {
    const known = entry.group === 'Tags' ? tags.get(entry.value) : contacts.get(entry.value);
    if (known === undefined) {
      errors[`${field}.${index}.value`] = [`does not name one of the owner's ${entry.group === 'Tags' ? 'tags' : 'contacts'}`];
    }
    return { group: entry.group, value: entry.value, label: entry.label ?? known ?? '' };
  });
}
