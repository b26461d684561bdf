/**
 * `npm run bench:bounces`: reads every message of ../shared/bounces/ with the inbound classifier
 * (src/inbound/classify.ts) and prints the confusion table of sisimai's verdict (`outcome` in its
 * expected.json) against what Hopper makes of it at a bounce (VERP) address, with the rates the
 * issue's "Done when" asks for. `--list` also prints each file whose outcome is not accepted.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { simpleParser } from 'mailparser';
import { classify } from '../src/inbound/classify.ts';
import { meaningOf } from '../src/inbound/receiver.ts';

const DIR = join(import.meta.dirname, '..', '..', 'shared', 'bounces');
interface Expected {
  outcome: string;
  accept: string[];
  reason: string;
  dsn: string;
  hardbounce: boolean;
}
const expected = JSON.parse(readFileSync(join(DIR, 'expected.json'), 'utf8')) as Record<string, Expected>;
const VERDICTS = ['hard', 'soft', 'hard-or-soft', 'complaint', 'auto-reply', 'none'];
const OUTCOMES = ['hard', 'soft', 'complaint', 'unsubscribed', 'reply', 'auto-reply', 'none'];
const table = new Map<string, Map<string, number>>(VERDICTS.map((v) => [v, new Map()]));
let accepted = 0;
const misses: string[] = [];
for (const [file, want] of Object.entries(expected)) {
  const raw = readFileSync(join(DIR, file));
  const mail = await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true, skipTextLinks: true });
  // Delivered as the corpus test does: from the null sender, but for Amazon SES's own.
  const returnPath = /^Return-Path:\s*<([^>]*)>/im.exec(raw.toString('latin1').split(/\r?\n\r?\n/)[0] ?? '')?.[1] ?? '';
  const what = classify(mail, { raw, nullSender: !/@([\w-]+\.)*amazonses\.com$/i.test(returnPath) });
  // What the receiver makes of it at a bounce (VERP) address.
  const meaning = meaningOf('bounce', what);
  const outcome = !meaning
    ? 'none'
    : meaning.kind === 'bounce'
      ? meaning.report.hard
        ? 'hard'
        : 'soft'
      : meaning.kind === 'complaint'
        ? { spamreport: 'complaint', unsubscribe: 'unsubscribed', none: 'none' }[meaning.effect]
        : meaning.kind === 'reply'
          ? meaning.autoReply
            ? 'auto-reply'
            : 'reply'
          : 'unsubscribed';
  const row = table.get(want.outcome) as Map<string, number>;
  row.set(outcome, (row.get(outcome) ?? 0) + 1);
  if (want.accept.includes(outcome)) accepted++;
  else {
    const r =
      what.kind === 'bounce'
        ? `${what.report.reason} ${what.report.status} ${what.report.replyCode} ${what.report.diagnostic.slice(0, 140)}`
        : what.kind;
    misses.push(`${file}: want ${want.outcome} (${want.reason} ${want.dsn}) got ${outcome}: ${r}`);
  }
}
const total = Object.keys(expected).length;
console.log(`| sisimai's verdict | files | ${OUTCOMES.join(' | ')} |`);
console.log(`|---|---|${OUTCOMES.map(() => '---').join('|')}|`);
for (const v of VERDICTS) {
  const row = table.get(v) as Map<string, number>;
  const n = [...row.values()].reduce((a, b) => a + b, 0);
  console.log(`| ${v} | ${n} | ${OUTCOMES.map((o) => row.get(o) ?? '·').join(' | ')} |`);
}
const hard = table.get('hard') as Map<string, number>;
const soft = table.get('soft') as Map<string, number>;
const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
console.log(`outcome accepted: ${accepted}/${total} (${((100 * accepted) / total).toFixed(1)} %)`);
const pct = (n: number, of: number) => `${((100 * n) / of).toFixed(1)} %`;
console.log(`hard recognised: ${hard.get('hard') ?? 0}/${sum(hard)} (${pct(hard.get('hard') ?? 0, sum(hard))})`);
console.log(`soft made hard: ${soft.get('hard') ?? 0}/${sum(soft)} (${pct(soft.get('hard') ?? 0, sum(soft))})`);
if (process.argv.includes('--list')) for (const m of misses) console.log(m);
