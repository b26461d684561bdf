import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import nodemailer from 'nodemailer';
import type { TemplatedEmailRow } from '../../src/db/schema.ts';
import { composeHtml, linksIn, type PreparedEmail, renderEmail } from '../../src/email/render.ts';
import { TrackingTokens } from '../../src/email/tokens.ts';
import type { ClaimedDelivery } from '../../src/sending/deliveries.ts';
import { parseEmail } from '../sending/support/mime.ts';

/** What renderEmail adds for tracking and unsubscribing, checked on the bytes nodemailer writes. */
describe('rendered email: tracking and unsubscribe', () => {
  const tokens = new TrackingTokens(randomBytes(32));
  const message = {
    id: 5,
    user_id: 3,
    subject: 'Spring, {{first_name}}',
    greeting_with_first_name: 'Hi {{first_name}},',
    greeting_without_first_name: 'Hi,',
    body:
      '<p>See <a href="https://listings.example/spring?a=1&amp;b=2" target="_blank">listings</a>, ' +
      '<a href="mailto:jane@example.com">write to me</a>, <a name="top">no link</a>, ' +
      '<a title="see href=https://not.a.link/" href=\'https://calendar.example/{{first_name}}\'>book</a>, ' +
      '<a href="tel:+17272329117">call</a> or <a href="HTTP://LOUD.example/">shout</a>.</p>',
    closing: 'Talk soon,',
    ps_line: '',
  } as TemplatedEmailRow;
  const prepared: PreparedEmail = {
    message,
    signatureHtml: '<p>Jane · <a href="https://agent.example/about">about me</a></p>',
    sender: {
      from: { name: 'Jane', address: 'jane@hopper.test' },
      replyTo: undefined,
      own: { name: 'Jane', address: 'jane@hopper.test' },
      postalAddress: null,
    },
    domain: 'hopper.test',
    publicUrl: 'https://hopper.test',
    trackOpens: true,
    tokens,
  };
  const delivery = {
    id: 77,
    message_kind: 'templated_email',
    message_id: 5,
    address: 'ann@example.com',
    first_name: 'Ann & <Co>',
    last_name: null,
  } as ClaimedDelivery;

  async function written(overrides: Partial<PreparedEmail> = {}) {
    const transport = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
    const raw = (await transport.sendMail(renderEmail({ ...prepared, ...overrides }, delivery))).message.toString();
    return { raw, email: parseEmail(raw), head: raw.slice(0, raw.indexOf('\n\n')) };
  }

  test('the http(s) links of body and signature are the message links, in order, entity-decoded', () => {
    assert.deepEqual(linksIn(composeHtml(prepared, delivery)), [
      'https://listings.example/spring?a=1&b=2',
      'https://calendar.example/Ann & <Co>',
      'HTTP://LOUD.example/',
      'https://agent.example/about',
    ]);
  });

  test('every http(s) link goes through the click redirect carrying its index; other links stay', async () => {
    const { email } = await written();
    const html = email.html ?? '';
    const hrefs = [...html.matchAll(/<a\b[^>]*?\shref="([^"]*)"/g)].map((m) => m[1] ?? '');
    const clicks = hrefs.filter((h) => h.startsWith('https://hopper.test/t/c/'));
    assert.equal(clicks.length, 4);
    for (const [index, href] of clicks.entries()) {
      assert.deepEqual(tokens.verify('click', href.split('/').pop() ?? ''), { deliveryId: 77, link: index });
    }
    assert.ok(hrefs.includes('mailto:jane@example.com'));
    assert.ok(hrefs.includes('tel:+17272329117'));
    assert.doesNotMatch(html, /href="https?:\/\/(listings|calendar|agent|LOUD)\./i, 'no original link is left in the HTML');
    assert.match(html, /title="see href=https:\/\/not\.a\.link\/"/, 'text inside another attribute is not a link');
    assert.match(html, /<a name="top">no link<\/a>/);
    assert.match(html, /target="_blank"/, 'the other attributes of a rewritten link stay');
  });

  test('merge tags stay HTML-escaped, in text and in links', async () => {
    const { email } = await written();
    assert.match(email.html ?? '', /Hi Ann &amp; &lt;Co&gt;,/);
    assert.doesNotMatch(email.html ?? '', /<Co>/);
    assert.match(email.text ?? '', /^Hi Ann & <Co>,/);
  });

  test('one List-Unsubscribe header with the https and mailto URIs, the one-click header, a visible link and the pixel', async () => {
    const { email, head } = await written();
    assert.equal(head.match(/^List-Unsubscribe:/gm)?.length, 1);
    const header = email.headers.get('list-unsubscribe') ?? '';
    const match = /^<https:\/\/hopper\.test\/unsubscribe\/([\w-]+)>, <mailto:unsubscribe@hopper\.test\?subject=unsubscribe-([\w-]+)>$/.exec(
      header,
    );
    assert.ok(match, header);
    assert.equal(match[1], match[2]);
    assert.deepEqual(tokens.verify('unsubscribe', match[1] ?? ''), { deliveryId: 77, link: 0 });
    assert.equal(email.headers.get('list-unsubscribe-post'), 'List-Unsubscribe=One-Click');

    const html = email.html ?? '';
    assert.ok(html.includes(`<a href="https://hopper.test/unsubscribe/${match[1]}">Unsubscribe</a>`), 'visible link in the HTML');
    assert.ok(email.text?.includes(`Unsubscribe: https://hopper.test/unsubscribe/${match[1]}`), 'and in the text');
    const pixel = /<img src="https:\/\/hopper\.test\/t\/o\/([\w-]+)\.gif" width="1" height="1" alt="">/.exec(html);
    assert.ok(pixel, 'open pixel');
    assert.deepEqual(tokens.verify('open', pixel[1] ?? ''), { deliveryId: 77, link: 0 });
    // The text part keeps the real destinations (nothing to track there).
    assert.match(email.text ?? '', /https:\/\/listings\.example\/spring\?a=1&b=2/);
  });

  test('Message-ID stays stable and X-SMTPAPI is raw JSON SendGrid can read', async () => {
    const { email } = await written({ relay: 'sendgrid' });
    assert.equal(email.headers.get('message-id'), '<templated_email-5.77@hopper.test>');
    assert.deepEqual(JSON.parse(email.headers.get('x-smtpapi') ?? ''), { unique_args: { hopper_delivery_id: '77' } });
    assert.equal((await written()).email.headers.get('list-unsubscribe'), email.headers.get('list-unsubscribe'), 'same email, same links');
  });

  test('each relay-specific header goes to its relay alone; every email has a Feedback-ID', async () => {
    const sendgrid = (await written({ relay: 'sendgrid' })).email.headers;
    const postmark = (await written({ relay: 'postmark' })).email.headers;
    const ses = (await written({ relay: 'ses' })).email.headers;
    const other = (await written({ relay: 'other' })).email.headers;
    const outbox = (await written()).email.headers;
    assert.ok(sendgrid.has('x-smtpapi') && !sendgrid.has('x-pm-metadata-hopper_delivery_id'));
    assert.equal(postmark.get('x-pm-metadata-hopper_delivery_id'), '77');
    assert.ok(!postmark.has('x-smtpapi'));
    for (const headers of [ses, other, outbox]) {
      assert.ok(!headers.has('x-smtpapi') && !headers.has('x-pm-metadata-hopper_delivery_id'), [...headers.keys()].join());
    }
    for (const headers of [sendgrid, postmark, ses, other, outbox]) {
      assert.equal(headers.get('feedback-id'), 'm5:u3:templated_email:hopper.test');
      assert.equal(headers.get('list-id'), '<u3.hopper.test>');
    }
  });

  test('a P.S. line its writer began with "P.S." (or PS:, p.s) is not sent as "P.S. P.S."', async () => {
    for (const ps_line of [
      'P.S. Bring the kids.',
      'PS: Bring the kids.',
      'p.s. Bring the kids.',
      'P.S.Bring the kids.',
      'Bring the kids.',
    ]) {
      const { email } = await written({ message: { ...message, ps_line } });
      const wanted = 'P.S. Bring the kids.';
      assert.ok(email.text?.includes(wanted), `${ps_line}: ${email.text}`);
      assert.ok(email.html?.includes(`<p>${wanted}</p>`), `${ps_line}: ${email.html}`);
      assert.doesNotMatch(email.text ?? '', /P\.S\. P\.?S/i);
    }
    // Words that merely start like it stay whole.
    for (const ps_line of ['Psst: the open house is Sunday.', 'PSA: the open house is Sunday.']) {
      const { email } = await written({ message: { ...message, ps_line } });
      assert.ok(email.text?.includes(`P.S. ${ps_line}`), email.text);
    }
  });

  test('no open pixel unless TRACK_OPENS is true', async () => {
    for (const trackOpens of [false, undefined]) {
      const { email } = await written({ trackOpens });
      assert.doesNotMatch(email.html ?? '', /<img/, String(trackOpens));
    }
  });

  test('malformed or hostile markup (256 KiB, the body limit) is scanned in linear time', () => {
    const started = performance.now();
    for (const html of [
      '<a x'.repeat(64_000),
      '<a x="'.repeat(40_000),
      `<a b="${'<a b '.repeat(50_000)}`,
      `<a${' a=b'.repeat(64_000)}`,
      `<a${' '.repeat(256_000)}`,
    ]) {
      assert.deepEqual(linksIn(html), []);
    }
    assert.equal(linksIn('<a href="https://x.example/">y</a>'.repeat(7_000)).length, 7_000);
    assert.ok(performance.now() - started < 2_000, `took ${performance.now() - started} ms`);
  });
});
