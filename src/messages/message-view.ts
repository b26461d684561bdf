import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { UserRef } from '../db/owned-rows.ts';
import { MESSAGE_TABLES, type MessageKind, type MessageRows } from './kinds.ts';
import { COUNTERS, type Reporting } from './reporting.ts';

/** A message as read: its row, its counters summed over their shards, its owner, and any joined extras. */
export interface MessageView<Row> {
  row: Row;
  reporting: Reporting;
  owner: UserRef;
  /** Columns of joined tables, by the prefix they were selected under (`m__name` → extras.m.name). */
  extras: Record<string, Record<string, unknown>>;
}

/**
 * The base query of every message read: the live row (alias `msg`), its counters summed over
 * their shards (a lateral sub-select: one index range per message) and its owner for the access
 * rule. Reads and search pages both use it, so each costs one query. Callers add joins of their
 * own, selecting their columns as `<prefix>__<column>`.
 */
export function selectMessages<K extends MessageKind>(db: Db, kind: K) {
  return db
    .selectFrom(sql<MessageRows[K]>`${sql.table(MESSAGE_TABLES[kind])}`.as('msg'))
    .innerJoin('users as u', 'u.id', 'msg.user_id')
    .leftJoinLateral(
      (eb) =>
        eb
          .selectFrom('message_counters as c')
          .select(COUNTERS.map((name) => sql<string | null>`sum(${sql.ref(`c.${name}`)})`.as(name)))
          .where('c.message_kind', '=', kind)
          .whereRef('c.message_id', '=', 'msg.id')
          .as('r'),
      (join) => join.onTrue(),
    )
    .selectAll('msg')
    .select(COUNTERS.map((name) => sql.ref(`r.${name}`).as(`c__${name}`)))
    .select(['u.team_id as o__team_id', 'u.roles as o__roles'])
    .where('msg.deleted_at', 'is', null)
    .where('u.deleted_at', 'is', null);
}

/** Splits a row of `selectMessages` into the message row, its reporting, its owner and extras. */
export function toMessageView<Row>(joined: object): MessageView<Row> {
  const row: Record<string, unknown> = {};
  const extras: Record<string, Record<string, unknown>> = {};
  for (const [key, value] of Object.entries(joined)) {
    const cut = key.indexOf('__');
    if (cut < 0) row[key] = value;
    else {
      const prefix = key.slice(0, cut);
      extras[prefix] ??= {};
      (extras[prefix] as Record<string, unknown>)[key.slice(cut + 2)] = value;
    }
  }
  const counts = extras.c ?? {};
  const reporting = { date: null } as Reporting;
  for (const name of COUNTERS) reporting[name] = Number(counts[name] ?? 0);
  const owner = extras.o ?? {};
  return {
    row: row as Row,
    reporting,
    owner: { id: row.user_id as number, team_id: owner.team_id as number | null, roles: owner.roles as UserRef['roles'] },
    extras,
  };
}
