import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadTrackingTokens, TrackingTokens } from '../../src/email/tokens.ts';
import { createContact } from '../contacts/fixtures.ts';
import { createSignature, createTag } from '../messages/fixtures.ts';
import { type ParsedEmail, parseEmail } from '../sending/support/mime.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey, type Reply } from '../support/client.ts';
import { assertProblem } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * A templated email sent for real (workers, outbox files) to a tag, then its links followed the
 * way a mail client and a reader would: open pixel, click redirects, one-click unsubscribe.
 */
describe('open and click tracking, one-click unsubscribe', () => {
  let t: TestApp;
  let admin: ReturnType<typeof asKey>;
  let anon: ReturnType<typeof asKey>;
  let tagId: number;
  let messageId: number;
  const contacts: Record<'ann' | 'bob' | 'cy', { id: number; email: string }> = {} as never;
  const sent = new Map<number, { deliveryId: number; raw: string; email: ParsedEmail }>();

  const BODY =
    '<p>New listings: <a href="https://listings.example/spring?area=north&amp;beds=3">see them</a>, ' +
    'or <a href="mailto:jane@agent.example">write to me</a> and ' +
    '<a href="https://calendar.example/jane?for={{first_name}}">book a call</a>.</p>';
  const ORIGINAL_LINKS = [
    'https://listings.example/spring?area=north&beds=3',
    'https://calendar.example/jane?for=Bob',
    'https://agent.example/about',
  ];

  /** Sends a templated email to the tag now and waits until the engine has finished it. */
  async function sendToTag(subject: string): Promise<number> {
    const made = await admin.post(`/v3/users/${t.adminId}/templated_emails`, {
      subject,
      body: BODY,
      signature_id: signatureId,
      recipients: [{ group: 'Tags', value: tagId }],
      status: 'Scheduled',
      send_type: 'Now',
    });
    assert.equal(made.status, 201, made.raw);
    await waitFor(`templated email ${made.body.id} to be sent`, async () => {
      const { body } = await admin.get(`/v3/templated_emails/${made.body.id}`);
      if (body.status === 'Failed') throw new Error(`send failed: ${body.reason}`);
      return body.status === 'Sent';
    });
    return made.body.id;
  }

  async function deliveriesOf(id: number) {
    const { rows } = await sql<{ id: number; contact_id: number; address: string }>`
      SELECT id, contact_id, address FROM deliveries WHERE message_kind = 'templated_email' AND message_id = ${id} ORDER BY id`.execute(
      t.database.db,
    );
    return rows;
  }

  async function reporting(id = messageId) {
    return (await admin.get(`/v3/templated_emails/${id}`)).body.reporting;
  }

  async function statusOf(contact: { id: number }) {
    return (await admin.get(`/v3/contacts/${contact.id}`)).body.status;
  }

  /** The path (and token) of a link of a sent email. */
  function emailOf(contact: { id: number }) {
    const found = sent.get(contact.id);
    assert.ok(found, `no email to contact ${contact.id}`);
    return found;
  }
  const pathOf = (url: string) => url.replace(/^https:\/\/hopper\.test/, '');
  function unsubscribeUrl(contact: { id: number }) {
    return /^<(https:[^>]+)>/.exec(emailOf(contact).email.headers.get('list-unsubscribe') ?? '')?.[1] ?? '';
  }
  function pixelUrl(contact: { id: number }) {
    return /<img src="(https:\/\/hopper\.test\/t\/o\/[^"]+)"/.exec(emailOf(contact).email.html ?? '')?.[1] ?? '';
  }
  function clickUrls(contact: { id: number }) {
    return [...(emailOf(contact).email.html ?? '').matchAll(/href="(https:\/\/hopper\.test\/t\/c\/[^"]+)"/g)].map((m) => m[1] ?? '');
  }
  /** The URL with one character in the middle of its token changed (the token's bytes change, not just its spelling). */
  const tamper = (url: string) =>
    url.replace(
      /\/([\w-]+)((?:\.gif)?)$/,
      (_, token: string, gif: string) => `/${token.slice(0, 12)}${token[12] === 'A' ? 'B' : 'A'}${token.slice(13)}${gif}`,
    );

  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  const oneClick = (url: string) => anon.post(pathOf(url), 'List-Unsubscribe=One-Click', form);
  let signatureId: number;

  before(async () => {
    t = await startTestApp({ workers: true, env: { TRACK_OPENS: 'true' } });
    admin = asKey(t.app, t.adminKey);
    anon = asKey(t.app, undefined);
    tagId = (await createTag(t, { id: t.adminId }, 'Buyers')).id;
    signatureId = (await createSignature(t, { id: t.adminId }, '<p>Jane Agent · <a href="https://agent.example/about">about me</a></p>'))
      .id;
    for (const [key, first_name] of [
      ['ann', 'Ann & <Co>'],
      ['bob', 'Bob'],
      ['cy', 'Cy'],
    ] as const) {
      const email = `${key}-${randomBytes(3).toString('hex')}@example.com`;
      contacts[key] = { id: (await createContact(admin, t.adminId, { first_name, email, tags: ['Buyers'] })).id, email };
    }
    messageId = await sendToTag('Spring listings, {{first_name}}');
    for (const delivery of await deliveriesOf(messageId)) {
      const raw = await readFile(join(t.dataDir, 'outbox', `${delivery.id}.eml`), 'utf8');
      sent.set(delivery.contact_id, { deliveryId: delivery.id, raw, email: parseEmail(raw) });
    }
  });
  after(() => t?.close());

  test('each contact got one email with both parts, the unsubscribe headers, a visible link and the pixel', () => {
    assert.equal(sent.size, 3);
    for (const contact of Object.values(contacts)) {
      const { raw, email, deliveryId } = emailOf(contact);
      assert.equal(email.headers.get('to'), contact.email);
      assert.ok(email.text && email.html, 'text and HTML parts');
      assert.equal(email.headers.get('message-id'), `<templated_email-${messageId}.${deliveryId}@hopper.test>`);
      assert.equal(raw.slice(0, raw.indexOf('\n\n')).match(/^List-Unsubscribe:/gm)?.length, 1);
      assert.match(
        email.headers.get('list-unsubscribe') ?? '',
        /^<https:\/\/hopper\.test\/unsubscribe\/([\w-]+)>, <mailto:unsubscribe@hopper\.test\?subject=unsubscribe-\1>$/,
      );
      assert.equal(email.headers.get('list-unsubscribe-post'), 'List-Unsubscribe=One-Click');
      assert.ok(email.html.includes(`<a href="${unsubscribeUrl(contact)}">Unsubscribe</a>`), 'visible link in the HTML');
      assert.ok(email.text.includes(`Unsubscribe: ${unsubscribeUrl(contact)}`), 'and in the text');
      assert.match(email.html, /<img src="https:\/\/hopper\.test\/t\/o\/[\w-]+\.gif" width="1" height="1" alt="">/);
      assert.equal(clickUrls(contact).length, 3, 'two body links and the signature link go through the redirect');
      assert.ok(email.html.includes('href="mailto:jane@agent.example"'), 'a mailto link is left alone');
      assert.doesNotMatch(email.html, /href="https:\/\/(listings|calendar|agent)\./);
    }
    assert.match(emailOf(contacts.ann).email.html ?? '', /Ann &amp; &lt;Co&gt;/, 'merge tags stay escaped');
  });

  test('the pixel is a no-store GIF; the first open of each email counts, a tampered token counts nothing', async () => {
    const before = await reporting();
    const pixel = await anon.get(pathOf(pixelUrl(contacts.ann)));
    assert.equal(pixel.status, 200);
    assert.equal(pixel.headers['content-type'], 'image/gif');
    assert.match(String(pixel.headers['cache-control']), /no-store/);
    assert.ok(pixel.raw.startsWith('GIF89a'));
    assert.equal((await reporting()).open, before.open + 1);

    await anon.get(pathOf(pixelUrl(contacts.ann)));
    assert.equal((await reporting()).open, before.open + 1, 'a second open of the same email is not counted');

    const tampered = await anon.get(pathOf(tamper(pixelUrl(contacts.cy))));
    assert.equal(tampered.status, 200, 'a bad token still gets its image');
    assert.equal(tampered.headers['content-type'], 'image/gif');
    assert.equal((await anon.get('/t/o/nonsense.gif')).status, 200);
    assert.equal((await reporting()).open, before.open + 1);

    await anon.get(pathOf(pixelUrl(contacts.cy)));
    assert.equal((await reporting()).open, before.open + 2);
  });

  test('a click redirects to the link of the message it names and counts once per email', async () => {
    const before = await reporting();
    const urls = clickUrls(contacts.bob);
    const targets = [];
    for (const url of urls) {
      const reply = await anon.get(pathOf(url));
      assert.equal(reply.status, 302, reply.raw);
      targets.push(reply.headers.location);
    }
    assert.deepEqual(targets, ORIGINAL_LINKS);
    const after = await reporting();
    assert.equal(after.click, before.click + 1, 'one recipient clicked');
    assert.equal(after.open, before.open + 1, 'a click is an open too');
    const { rows } = await sql<{ detail: string }>`
      SELECT detail FROM delivery_events WHERE delivery_id = ${emailOf(contacts.bob).deliveryId} AND type = 'click'`.execute(t.database.db);
    assert.deepEqual(rows, [{ detail: ORIGINAL_LINKS[0] }]);
  });

  test('a tampered, foreign or out-of-range click token is a 404 and never a redirect', async () => {
    const before = await reporting();
    const { deliveryId } = emailOf(contacts.cy);
    const forged = new TrackingTokens(randomBytes(32)).sign('click', deliveryId, 0);
    // Signed with the server's own key, yet naming a link the message does not have.
    const key = await loadTrackingTokens(t.database.db);
    const pastTheEnd = key.sign('click', deliveryId, 3);
    const noDelivery = key.sign('click', deliveryId + 1000, 0);
    for (const path of [
      pathOf(tamper(clickUrls(contacts.cy)[0] ?? '')),
      `/t/c/${forged}`,
      `/t/c/${pastTheEnd}`,
      `/t/c/${noDelivery}`,
      `/t/c/${pathOf(pixelUrl(contacts.cy)).split('/').pop()?.replace('.gif', '')}`,
      '/t/c/https%3A%2F%2Fevil.example',
    ]) {
      const reply = await anon.get(path);
      assertProblem(reply, 404, 'not_found');
      assert.equal(reply.headers.location, undefined, path);
    }
    assert.deepEqual(await reporting(), before);
  });

  test('GET on the unsubscribe link shows a confirmation page and unsubscribes nobody', async () => {
    const page = await anon.get(pathOf(unsubscribeUrl(contacts.ann)));
    assert.equal(page.status, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.match(String(page.headers['cache-control']), /no-store/);
    assert.ok(page.raw.includes(`<form method="post" action="${pathOf(unsubscribeUrl(contacts.ann))}">`), page.raw);
    assert.ok(page.raw.includes('name="List-Unsubscribe" value="One-Click"'));
    assert.equal(await statusOf(contacts.ann), 'Subscribed');
    assert.equal((await reporting()).unsubscribe, 0);
    assert.equal((await anon.get(pathOf(tamper(unsubscribeUrl(contacts.ann))))).status, 404);
  });

  test('the one-click POST needs no key, cookie or CSRF token, answers 200 without redirect, and is idempotent', async () => {
    const url = unsubscribeUrl(contacts.ann);
    const reply = await oneClick(url);
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(reply.headers.location, undefined);
    assert.match(reply.raw, /unsubscribed/i);
    assert.equal(await statusOf(contacts.ann), 'Unsubscribed');
    assert.equal((await reporting()).unsubscribe, 1);

    // A mail client replaying it, a multipart body (RFC 8058's preferred form), an empty body.
    const boundary = 'x-boundary';
    const multipart = `--${boundary}\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n\r\nOne-Click\r\n--${boundary}--\r\n`;
    const replies: Reply[] = [
      await oneClick(url),
      await anon.post(pathOf(url), multipart, { 'content-type': `multipart/form-data; boundary=${boundary}` }),
      await anon.post(pathOf(url)),
    ];
    for (const again of replies) assert.equal(again.status, 200, again.raw);
    assert.equal((await reporting()).unsubscribe, 1);
    const { rows } = await sql<{ n: string }>`
      SELECT count(*) AS n FROM delivery_events WHERE delivery_id = ${emailOf(contacts.ann).deliveryId} AND type = 'unsubscribe'`.execute(
      t.database.db,
    );
    assert.equal(Number(rows[0]?.n), 1);

    const page = await anon.get(pathOf(url));
    assert.match(page.raw, /already unsubscribed/i);
    assert.doesNotMatch(page.raw, /<form/);
  });

  test('a tampered unsubscribe token or another purpose\u2019s token unsubscribes nobody', async () => {
    for (const path of [
      pathOf(tamper(unsubscribeUrl(contacts.cy))),
      `/unsubscribe/${pathOf(pixelUrl(contacts.cy)).split('/').pop()?.replace('.gif', '')}`,
    ]) {
      const reply = await oneClick(`https://hopper.test${path}`);
      assert.equal(reply.status, 404, path);
    }
    assert.equal(await statusOf(contacts.cy), 'Subscribed');
    assert.equal((await reporting()).unsubscribe, 1);
  });

  test('the JSON API still refuses form bodies', async () => {
    assertProblem(await admin.post('/v3/teams', 'name=x', form), 415, 'unsupported_media_type');
  });

  test('a later send to the same tag skips the contact who unsubscribed', async () => {
    const second = await sendToTag('More listings, {{first_name}}');
    const deliveries = await deliveriesOf(second);
    assert.deepEqual(deliveries.map((d) => d.contact_id).sort(), [contacts.bob.id, contacts.cy.id].sort());
    for (const delivery of deliveries) {
      const email = parseEmail(await readFile(join(t.dataDir, 'outbox', `${delivery.id}.eml`), 'utf8'));
      assert.notEqual(email.headers.get('to'), contacts.ann.email);
    }
    assert.equal((await reporting(second)).sent, 2);
  });
});
