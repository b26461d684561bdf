import { backoffMs, realTimeMs } from '../time.ts';
import { findStatus } from './bounce-reason.ts';

/**
 * When the relay says "later" to the sender as a whole — `421 4.7.0 Try again later`, SES's
 * `454 Throttling failure`, Microsoft's `451 4.7.650 … temporarily rate limited` — every further
 * attempt only makes it angrier: the answer is about this sender's rate, not about one recipient.
 * So the whole pool stops starting new sends for a back-off that doubles with each such answer
 * (`baseMs`, 1 s, up to 5 minutes, scaled by a random 50–100 % so that several workers do not
 * come back together; longer when the reply asks for longer: "try again in 10 minutes"), then
 * sends one (slow start) and opens again only once that one was not refused so. The deliveries
 * held back meanwhile are not tried at all, and none of this uses up a delivery's attempts
 * (send-batch.ts): they wait, and go once the relay takes mail again.
 *
 * The back-off is this process's (each worker has its own pool, and learns on its own).
 * docs/sending.md, "When the relay says later".
 */

/** The longest back-off between two tries of a relay that keeps refusing. */
const MAX_BACKOFF_MS = 300_000;
/** The longest wait a reply's own words may ask for (a relay asking for a day is waited an hour, then asked again). */
const MAX_HINT_MS = 3_600_000;

/** What a send may do now: go (holding `ticket`), or wait `waitMs` without asking the relay. */
type Admission = { go: true; ticket: Ticket } | { go: false; waitMs: number; reason: string };

/** A send let through: which back-off it was let through in, and whether it is the one slow-start try. */
interface Ticket {
  readonly epoch: number;
  readonly probe: boolean;
}

/** How the relay answered a send: it took (or refused for its own sake) the message, asked to slow down, or never answered. */
type Answer = { kind: 'answered' } | { kind: 'slow-down'; hintMs: number | null; reason: string } | { kind: 'no-answer' };

export class RelayBackoff {
  readonly #baseMs: number;
  /** Slow-down answers in a row (0: the relay takes mail). */
  #level = 0;
  /** Real time before which nothing new is tried. */
  #until = 0;
  /** Bumped at each back-off: a slow-down answer to a send let through before it grows nothing. */
  #epoch = 0;
  #reason = '';
  /** The slow-start try in flight, and what settles it for the sends that wait on it. */
  #probe: { settled: Promise<void>; settle: () => void } | undefined;

  constructor(baseMs = 1000) {
    this.#baseMs = baseMs;
  }

  /** Whether a send may go now. While the one slow-start try is out, the others wait for its answer here. */
  async admit(): Promise<Admission> {
    for (;;) {
      const now = realTimeMs();
      if (now < this.#until) return { go: false, waitMs: this.#until - now, reason: this.#reason };
      if (this.#level === 0) return { go: true, ticket: { epoch: this.#epoch, probe: false } };
      if (!this.#probe) {
        let settle = () => {};
        const settled = new Promise<void>((resolve) => {
          settle = resolve;
        });
        this.#probe = { settled, settle };
        return { go: true, ticket: { epoch: this.#epoch, probe: true } };
      }
      await this.#probe.settled;
    }
  }

  /**
   * How the relay answered a send let through with `ticket`: how long a delivery it asked to slow
   * down for waits before it is tried again (the back-off now in force), and whether this answer
   * began (or lengthened) a back-off or ended one.
   */
  answered(ticket: Ticket, answer: Answer): { waitMs: number; change: 'backed-off' | 'reopened' | null } {
    const now = realTimeMs();
    let change: 'backed-off' | 'reopened' | null = null;
    if (answer.kind === 'slow-down' && ticket.epoch === this.#epoch) {
      this.#level++;
      this.#epoch++;
      const backoff = backoffMs(this.#level, { baseMs: this.#baseMs, maxMs: MAX_BACKOFF_MS, jitter: true });
      this.#until = now + Math.max(backoff, Math.min(answer.hintMs ?? 0, MAX_HINT_MS));
      this.#reason = `the relay asked to slow down (${answer.reason.slice(0, 200)}): no new attempt for ${Math.ceil((this.#until - now) / 1000)} s`;
      change = 'backed-off';
    } else if (answer.kind === 'answered' && ticket.probe) {
      this.#level = 0;
      change = 'reopened';
    }
    if (ticket.probe) {
      const probe = this.#probe;
      this.#probe = undefined;
      probe?.settle();
    }
    return { waitMs: Math.max(this.#until - now, 0), change };
  }
}

/**
 * Whether an SMTP error is the relay asking the sender to slow down: 421 (the service closes the
 * channel: nothing this sender sends now will be taken), an enhanced status 4.7.x on a temporary
 * reply (a policy or rate refusal: RFC 3463), or a temporary reply that says so in words (SES's
 * `454 Throttling failure: Maximum sending rate exceeded`). A 4xx about one mailbox (452 4.2.2,
 * mailbox full) is not.
 */
export function slowDownAnswer(error: {
  responseCode?: number;
  response?: string;
  message: string;
}): Extract<Answer, { kind: 'slow-down' }> | null {
  const code = error.responseCode;
  if (code === undefined || code < 400 || code >= 500) return null;
  const text = error.response ?? error.message;
  const status = findStatus(text);
  const asked =
    code === 421 || status?.startsWith('4.7.') || /\b(rate|throttl\w*|too many|too fast|slow down|limit exceeded)\b/i.test(text);
  return asked ? { kind: 'slow-down', hintMs: retryHintMs(text), reason: text } : null;
}

/**
 * A wait the reply's words ask for, in milliseconds: "Retry-After: 120", "try again in 5 minutes",
 * "retry after 30 seconds", "please wait 2 min"; null when they name none.
 */
export function retryHintMs(text: string): number | null {
  const header = /\bretry-after:?\s*(\d{1,6})\b/i.exec(text);
  if (header) return Number(header[1]) * 1000;
  const words =
    /\b(?:try(?:\s+again)?|retry|wait|resume)(?:\s+(?:later|sending))?\s+(?:in|after|for)?\s*(\d{1,6})\s*(seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)\b/i.exec(
      text,
    );
  if (!words) return null;
  const unit = (words[2] as string).toLowerCase();
  const scale = unit.startsWith('h') ? 3_600_000 : unit.startsWith('m') ? 60_000 : 1000;
  return Number(words[1]) * scale;
}
