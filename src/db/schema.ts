import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { RoleName } from '../identity/roles.ts';

/** Timestamps are `timestamptz`: read as Date, written as Date or SQL `now()`. */
type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface TeamsTable {
  id: Generated<number>;
  name: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

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
  created_at: Timestamp;
  updated_at: Timestamp;
  deleted_at: NullableTimestamp;
}

export interface ApiKeysTable {
  id: Generated<number>;
  user_id: number;
  name: string;
  prefix: string;
  key_hash: Buffer;
  created_at: Timestamp;
  last_used_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
}

export interface Database {
  teams: TeamsTable;
  users: UsersTable;
  api_keys: ApiKeysTable;
}

export type TeamRow = Selectable<TeamsTable>;
export type UserRow = Selectable<UsersTable>;
export type NewUser = Insertable<UsersTable>;
export type UserUpdate = Updateable<UsersTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
