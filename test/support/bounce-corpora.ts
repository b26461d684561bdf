import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The real bounce, complaint, auto-reply and success messages the inbound classifier is measured
 * on, each with the verdict of the judge named in its corpus's README (Sisimai), split once and
 * for all into a part to tune the rules on and a part held out from that tuning
 * (docs/decisions.md, "Bounce corpora"): a file is held out when the first hex digit of the
 * SHA-256 of `<corpus>/<file>` is 8–f. The split depends on nothing but the names, so adding a
 * corpus or a file never moves another file from one part to the other.
 */
export interface Verdict {
  /** What the message means for the delivery whose bounce (VERP) address it reaches: hard, soft, hard-or-soft, complaint, auto-reply, none. */
  outcome: string;
  /** The outcomes consistent with it. */
  accept: string[];
  reason: string;
  dsn: string;
  hardbounce: boolean;
}

export interface Sample extends Verdict {
  corpus: string;
  file: string;
  path: string;
  part: 'tune' | 'held-out';
}

const ROOT = join(import.meta.dirname, '..', '..');
export const CORPORA = [
  /** sisimai/set-of-emails, judged by Sisimai 5's own tests (../shared/bounces/README.md). */
  { name: 'set-of-emails', dir: join(ROOT, '..', 'shared', 'bounces') },
  /** The npm package baunsu's test mail, judged by Debian's Sisimai 4.25 (test/fixtures/bounces/README.md). */
  { name: 'baunsu', dir: join(ROOT, 'test', 'fixtures', 'bounces', 'baunsu') },
];

export function partOf(corpus: string, file: string): Sample['part'] {
  const digit = createHash('sha256').update(`${corpus}/${file}`).digest('hex')[0] as string;
  return digit < '8' ? 'tune' : 'held-out';
}

export function samples(): Sample[] {
  return CORPORA.flatMap(({ name, dir }) => {
    const expected = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8')) as Record<string, Verdict>;
    return Object.entries(expected)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([file, v]) => ({ ...v, corpus: name, file, path: join(dir, file), part: partOf(name, file) }));
  });
}
