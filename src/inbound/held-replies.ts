import type { Principal } from '../identity/access.ts';
import { requireReachable } from '../identity/access.ts';
import { findDeliveryFacts } from '../sending/deliveries.ts';
import type { Clock } from '../time.ts';
import { type ForwardDeps, forwardToAgent } from './forwards.ts';
import { claimHeldReply, discardHeldReply, findReply, markRepliesForwarded, unclaimHeldReply } from './replies.ts';

/**
 * What the agent decides about a held reply (a DMARC failure, the day's forward limit): Release
 * forwards it now, once, through the one forward the receiver uses (forwards.ts), from what Hopper
 * kept of it — its text, with a line saying it was held and released; Discard marks it so that it
 * is never forwarded. Either is final: a second Release or Discard, or one after the other,
 * changes nothing. Whoever may reach the reply's owner (identity/access.ts) may decide.
 */
interface HeldReplyDeps extends ForwardDeps {
  clock: Clock;
}

/** How long a claimed release may stay unfinished before another Release may claim it again. */
const RELEASE_CLAIM_MS = 10 * 60_000;

/** Why a reply was held, for the line its released forward begins with. */
const RELEASED_NOTE: Record<string, string> = {
  dmarc_fail: 'Hopper held this reply because its DMARC check failed; you released it.',
  forward_limit: 'Hopper held this reply because this contact had reached the day’s forwards; you released it.',
};

/** The reply `id` as the principal may act on it: 404 when there is none, 403 when it is someone else's. */
export async function heldReplyFor(deps: Pick<ForwardDeps, 'db'>, principal: Principal, id: number) {
  return requireReachable(principal, await findReply(deps.db, id), 'Reply', id).row;
}

/**
 * Releases a held reply: forwarded now, once. `released` when it went now; `unchanged` when it was
 * not held, or already released, discarded or forwarded. A forward the relay refuses gives the
 * claim back (Release may be tried again) and throws.
 */
export async function releaseHeldReply(deps: HeldReplyDeps, principal: Principal, id: number): Promise<'released' | 'unchanged'> {
  const reply = await heldReplyFor(deps, principal, id);
  const now = deps.clock();
  const claimed = await claimHeldReply(deps.db, reply.user_id, id, now, new Date(now.getTime() - RELEASE_CLAIM_MS));
  if (!claimed) return 'unchanged';
  try {
    const [delivery] = await findDeliveryFacts(deps.db, [claimed.delivery_id]);
    if (!delivery) throw new Error(`the delivery of reply ${id} is gone`);
    await forwardToAgent(deps, id, delivery, {
      fromAddress: claimed.from_address,
      fromName: claimed.from_name ?? '',
      subject: claimed.subject,
      text: claimed.text,
      // Hopper keeps a reply's text only: its HTML and attachments went with the SMTP exchange.
      html: undefined,
      attachments: [],
      thread: '',
      authentication: claimed.authentication ?? undefined,
      note: claimed.held_reason ? RELEASED_NOTE[claimed.held_reason] : undefined,
    });
  } catch (error) {
    await unclaimHeldReply(deps.db, id, now);
    throw error;
  }
  await markRepliesForwarded(deps.db, [id], deps.clock());
  return 'released';
}

/** Discards a held reply: never forwarded. `discarded` when it was now, `unchanged` otherwise. */
export async function discardReply(
  deps: Pick<HeldReplyDeps, 'db' | 'clock'>,
  principal: Principal,
  id: number,
): Promise<'discarded' | 'unchanged'> {
  const reply = await heldReplyFor(deps, principal, id);
  return (await discardHeldReply(deps.db, reply.user_id, id, deps.clock())) ? 'discarded' : 'unchanged';
}
