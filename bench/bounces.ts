/**
 * `npm run bench:bounces`: reads every real message of the bounce corpora (test/support/bounce-corpora.ts:
 * ../shared/bounces/ and test/fixtures/bounces/) with the inbound classifier (src/inbound/classify.ts)
 * and prints, for the part the rules were tuned on and for the part held out from that tuning, the
 * confusion table of the judge's verdict (`outcome` in each corpus's expected.json) against what
 * Hopper makes of it at a bounce (VERP) address, with the rates the "Done when" asks for.
 * `--list` also prints each file whose outcome is not accepted.
 */
import { readFileSync } from 'node:fs';
import { simpleParser } from 'mailparser';
import { classify } from '../src/inbound/classify.ts';
import { meaningOf } from '../src/inbound/receiver.ts';
import { type Sample, samples } from '../test/support/bounce-corpora.ts';

const VERDICTS = ['hard', 'soft', 'hard-or-soft', 'complaint', 'auto-reply', 'none'];
const OUTCOMES = ['hard', 'soft', 'complaint', 'unsubscribed', 'reply', 'auto-reply', 'none'];

async function outcomeOf(sample: Sample): Promise<{ outcome: string; detail: string }> {
  const raw = readFileSync(sample.path);
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
  const detail =
    what.kind === 'bounce'
      ? `${what.report.reason} ${what.report.status} ${what.report.replyCode} ${what.report.diagnostic.slice(0, 140)}`
      : what.kind;
  return { outcome, detail };
}

const pct = (n: number, of: number) => `${of ? ((100 * n) / of).toFixed(1) : '–'} %`;
const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

function report(title: string, rows: { sample: Sample; outcome: string }[]): void {
  const table = new Map<string, Map<string, number>>(VERDICTS.map((v) => [v, new Map()]));
  let accepted = 0;
  for (const { sample, outcome } of rows) {
    const row = table.get(sample.outcome) as Map<string, number>;
    row.set(outcome, (row.get(outcome) ?? 0) + 1);
    if (sample.accept.includes(outcome)) accepted++;
  }
  const corpora = [...new Set(rows.map((r) => r.sample.corpus))].map((c) => `${c} ${rows.filter((r) => r.sample.corpus === c).length}`);
  console.log(`\n${title} (${corpora.join(', ')})\n`);
  console.log(`| verdict | files | ${OUTCOMES.join(' | ')} |`);
  console.log(`|---|---|${OUTCOMES.map(() => '---').join('|')}|`);
  for (const v of VERDICTS) {
    const row = table.get(v) as Map<string, number>;
    console.log(`| ${v} | ${sum(row)} | ${OUTCOMES.map((o) => row.get(o) ?? '·').join(' | ')} |`);
  }
  const hard = table.get('hard') as Map<string, number>;
  const soft = table.get('soft') as Map<string, number>;
  const replies = rows.filter((r) => r.outcome === 'reply' && !r.sample.accept.includes('reply')).length;
  console.log(`\noutcome accepted: ${accepted}/${rows.length} (${pct(accepted, rows.length)})`);
  console.log(`hard recognised: ${hard.get('hard') ?? 0}/${sum(hard)} (${pct(hard.get('hard') ?? 0, sum(hard))})`);
  console.log(`soft made hard: ${soft.get('hard') ?? 0}/${sum(soft)} (${pct(soft.get('hard') ?? 0, sum(soft))})`);
  console.log(`counted as a person's reply: ${replies}`);
}

const results: { sample: Sample; outcome: string; detail: string }[] = [];
for (const sample of samples()) results.push({ sample, ...(await outcomeOf(sample)) });
report(
  'Tuned on',
  results.filter((r) => r.sample.part === 'tune'),
);
report(
  'Held out',
  results.filter((r) => r.sample.part === 'held-out'),
);
report('All', results);
if (process.argv.includes('--list')) {
  for (const { sample: s, outcome, detail } of results) {
    if (!s.accept.includes(outcome))
      console.log(`${s.part} ${s.corpus}/${s.file}: want ${s.outcome} (${s.reason} ${s.dsn}) got ${outcome}: ${detail}`);
  }
}
