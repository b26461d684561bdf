import { type FieldErrors, validationError } from '../errors.ts';
import type { Clock } from '../time.ts';

/**
 * The sending status shared by voicemail drops and templated emails (README, "Voicemail drops and templated emails"; docs/sending.md, "A message's life"). A client sets
 * `Saved` (draft) or `Scheduled`; `Cancelled` stops a message that is `Sending`; the sending engine
 * moves a message on to `Sending`, `Sent` or `Failed`. Once sending has started a message is
 * frozen.
 */
export const MESSAGE_STATUSES = ['Saved', 'Scheduled', 'Sending', 'Sent', 'Failed', 'Cancelled'] as const;
type MessageStatus = (typeof MESSAGE_STATUSES)[number];
export const SEND_TYPES = ['Now', 'Future'] as const;
type SendType = (typeof SEND_TYPES)[number];

const CLIENT_SETTABLE: readonly MessageStatus[] = ['Saved', 'Scheduled'];
const FROZEN: readonly MessageStatus[] = ['Sending', 'Sent', 'Failed', 'Cancelled'];

interface Schedule {
  status: MessageStatus;
  send_type: SendType;
  send_at: Date | null;
}

interface ScheduleRequest {
  status?: string;
  send_type?: SendType;
  send_at?: Date | null;
}

function isFrozen(status: MessageStatus): boolean {
  return FROZEN.includes(status);
}

/**
 * The schedule a create (`current` undefined) or an update asks for. Problems are added to
 * `errors` (so they are reported with the other fields'); a frozen message throws at once.
 * `otherChanges` says whether the body changes anything besides the schedule: a frozen message
 * accepts no change but `Sending` → `Cancelled`.
 */
export function planSchedule(
  current: Schedule | undefined,
  requested: ScheduleRequest,
  otherChanges: boolean,
  clock: Clock,
  errors: FieldErrors,
): Schedule {
  const now = clock();
  if (current && isFrozen(current.status)) {
    const cancelling = requested.status === 'Cancelled' && current.status === 'Sending';
    const scheduleChanged =
      (requested.send_type !== undefined && requested.send_type !== current.send_type) ||
      (requested.send_at !== undefined && requested.send_at?.getTime() !== current.send_at?.getTime());
    const statusChanged = requested.status !== undefined && requested.status !== current.status;
    if ((statusChanged && !cancelling) || scheduleChanged || otherChanges) {
      const hint = current.status === 'Sending' ? ' (set status to Cancelled to stop it)' : '';
      throw validationError({ status: [`is ${current.status}: the message can no longer be edited${hint}`] });
    }
    // Only the schedule: `current` is often the whole row, whose other columns are no update.
    return { status: cancelling ? 'Cancelled' : current.status, send_type: current.send_type, send_at: current.send_at };
  }

  const before = Object.keys(errors).length;
  if (requested.status !== undefined && !CLIENT_SETTABLE.includes(requested.status as MessageStatus)) {
    errors.status = [`must be one of: ${CLIENT_SETTABLE.join(', ')} (Cancelled stops a message that is Sending)`];
  }
  const status = ((errors.status ? current?.status : requested.status) ?? current?.status ?? 'Saved') as MessageStatus;
  const send_type = requested.send_type ?? current?.send_type ?? 'Now';
  let send_at = requested.send_at !== undefined ? requested.send_at : (current?.send_at ?? null);

  if (status === 'Scheduled' && send_type === 'Future') {
    if (!send_at) errors.send_at = ['is required when send_type is Future'];
    else if (send_at <= now) errors.send_at = ['must be in the future when send_type is Future'];
  }
  if (Object.keys(errors).length > before) return { status, send_type, send_at };

  if (send_type === 'Now') {
    // "Now" is due the moment it is scheduled; a draft has no send time until then.
    const becameDue = status === 'Scheduled' && (current?.status !== 'Scheduled' || current.send_type !== 'Now');
    // Whole seconds, as the API shows times: a client that PUTs back what it read changes nothing.
    const dueNow = new Date(Math.floor(now.getTime() / 1000) * 1000);
    send_at = status === 'Scheduled' ? (becameDue ? dueNow : (current?.send_at ?? dueNow)) : null;
  }
  return { status, send_type, send_at };
}

/** A message being sent must be cancelled before it can be deleted. */
export function deletionRefusal(status: MessageStatus): string | undefined {
  return status === 'Sending' ? 'is Sending: set status to Cancelled before deleting the message' : undefined;
}
