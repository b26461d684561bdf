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

/** Where each column of a joined row goes: the message row (prefix '') or an extra (`m__name`). */
interface Split {
  keys: string[];
  prefixes: string[];
  names: string[];
}

/** The split of a row's columns, worked out once per statement's column list (every row shares it). */
let lastSplit: Split | undefined;

function splitOf(joined: object): Split {
  const keys = Object.keys(joined);
  const last = lastSplit;
  if (last && last.keys.length === keys.length && last.keys.every((key, index) => key === keys[index])) return last;
  const prefixes: string[] = [];
  const names: string[] = [];
  for (const key of keys) {
    const cut = key.indexOf('__');
    prefixes.push(cut < 0 ? '' : key.slice(0, cut));
    names.push(cut < 0 ? key : key.slice(cut + 2));
  }
  lastSplit = { keys, prefixes, names };
  return lastSplit;
}

/** Splits a row of `selectMessages` into the message row, its reporting, its owner and extras. */
export function toMessageView<Row>(joined: object): MessageView<Row> {
  const { keys, prefixes, names } = splitOf(joined);
  const values = joined as Record<string, unknown>;
  const row: Record<string, unknown> = {};
  const extras: Record<string, Record<string, unknown>> = {};
  for (let index = 0; index < keys.length; index++) {
    const prefix = prefixes[index] as string;
    const value = values[keys[index] as string];
    if (prefix === '') row[names[index] as string] = value;
    else {
      extras[prefix] ??= {};
      (extras[prefix] as Record<string, unknown>)[names[index] as string] = value;
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
