import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { type Actor, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { HOSTILE } from './support/browser.ts';
import { browser, setPassword } from './web-client.ts';

const PASSWORD = 'contact import passphrase';
const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'contacts');
const fixture = (name: string) => readFile(join(FIXTURES, name));

type Browser = ReturnType<typeof browser>;

/** `/contacts/import`: upload, preview of the mapping, import, progress and refused rows, against the API's own import. */
describe('the contact import pages', () => {
  let t: TestApp;
  let agent: Actor;
  let lead: Actor;
  let stranger: Actor;
  /** How far the app's clock is ahead of real time (a stalled import is one whose progress is old). */
  let ahead = 0;
  before(async () => {
    t = await startTestApp({ clock: () => new Date(Date.now() + ahead) });
    const teamId = await createTeam(t);
    agent = await createUser(t, 'User', teamId);
    lead = await createUser(t, 'Team Administrator', teamId);
    stranger = await createUser(t, 'User', await createTeam(t));
    for (const who of [agent, lead, stranger]) await setPassword(t, who.id, PASSWORD);
  });
  after(() => t.close());

  async function signedIn(email: string): Promise<Browser> {
    const b = browser(t.app);
    assert.equal((await b.signIn(email, PASSWORD)).status, 303);
    return b;
  }

  /** Uploads a file from the upload page; answers the import's path. */
  async function upload(b: Browser, name: string, bytes: Buffer): Promise<string> {
    assert.equal((await b.get('/contacts/import')).status, 200);
    const posted = await b.upload('/contacts/import', [['file', { name, bytes }]]);
    assert.equal(posted.status, 303, posted.html);
    assert.match(String(posted.location), /^\/contacts\/import\/\d+$/);
    return String(posted.location);
  }

  /** Presses Import on the preview, then follows the page until the import is done. */
  async function importAndWait(b: Browser, path: string, choices: Record<string, string> = {}): Promise<string> {
    const preview = await b.get(path);
    const selected = Object.fromEntries(
      [...preview.html.matchAll(/<select id="(column_\d+)"[\s\S]*?<option value="([a-z_]+)" selected>/g)].map((m) => [m[1], m[2]]),
    );
    const started = await b.post(path, { ...selected, ...choices, action: 'import' });
    assert.equal(started.status, 303, started.html);
    assert.equal(started.location, path);
    let html = '';
    await waitFor(
      'the import done',
      async () => {
        html = (await b.get(path)).html;
        return /<h2>Imported<\/h2>/.test(html);
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    return html;
  }

  const count = (html: string, name: string) => Number(new RegExp(`data-count="${name}">([\\d,]+)<`).exec(html)?.[1]?.replace(',', ''));

  test('the Google export: the preview maps its columns as the API does, and the import ends as the API’s, its refused row with why', async () => {
    const b = await signedIn(agent.email);
    const list = await b.get('/contacts');
    assert.match(list.html, /<a href="\/contacts\/import"[^>]*>Import contacts<\/a>/);
    const bytes = await fixture('google-contacts.csv');
    const path = await upload(b, 'google-contacts.csv', bytes);
    const preview = await b.get(path);
    assert.equal(preview.status, 200);
    assert.match(preview.html, /4 rows after the header, read as utf-8, separated by commas\./);
    const choice = (column: string) =>
      new RegExp(`<label for="column_\\d+">${column}</label>[\\s\\S]*?<option value="([a-z_]+)" selected>`).exec(preview.html)?.[1];
    assert.deepEqual(
      ['First Name', 'Last Name', 'E-mail 1 - Value', 'E-mail 2 - Value', 'Phone 1 - Value', 'Labels', 'Notes'].map(choice),
      ['first_name', 'last_name', 'email', 'ignore', 'phone', 'tags', 'ignore'],
    );
    assert.match(preview.html, /<td>maria\.gonzalez@gmail\.example<\/td>/, 'the first rows as they will be imported');
    assert.match(preview.html, /<td>Buyers, Open House<\/td>/, 'Google’s labels, its own groups left out');
    assert.match(preview.html, /Import 4 rows/);

    const done = await importAndWait(b, path);
    const api = await asKey(t.app, stranger.key).post(`/v3/users/${stranger.id}/contacts/import`, bytes, { 'content-type': 'text/csv' });
    assert.equal(api.status, 200, api.raw);
    assert.deepEqual([count(done, 'created'), count(done, 'updated'), count(done, 'refused')], [api.body.created, api.body.updated, 1]);
    assert.deepEqual(api.body.refused, [{ line: 6, errors: { email: ['must be a valid email address'] } }]);
    assert.match(
      done,
      /<tr data-refused-line="6">\s*<th scope="row">6<\/th>\s*<td>Email<\/td>\s*<td>not-an-address<\/td>\s*<td>Email must be a valid email address\.<\/td>/,
    );
    const csv = await b.get(`${path}/refused.csv`);
    assert.equal(csv.status, 200);
    assert.match(String(csv.headers['content-type']), /^text\/csv/);
    assert.equal(csv.html, 'line,field,value,why\r\n6,Email,not-an-address,Email must be a valid email address.\r\n');
    assert.match(done, new RegExp(`<a href="${path}/refused.csv" download>Download the refused rows \\(CSV\\)</a>\\.`));
    const found = await asKey(t.app, agent.key).get(`/v3/users/${agent.id}/contacts?email=maria.gonzalez@gmail.example`);
    assert.equal(found.body.data.length, 1);
    assert.deepEqual(found.body.data[0].tags.sort(), ['Buyers', 'Open House']);

    // Pressed again (a reload of the POST, a second click): nothing more is imported.
    await b.get(path);
    const again = await b.post(path, { action: 'import' });
    assert.equal(again.status, 303);
    assert.equal(count((await b.get(path)).html, 'created'), 3);
    assert.match((await b.get('/contacts/import')).html, /google-contacts\.csv<\/a><\/th>\s*<td>[^<]+<\/td>\s*<td>Imported<\/td>/);
  });

  test('Windows-1252 read as such; a column mapped by hand, another left out; the mapping is the import’s', async () => {
    const b = await signedIn(agent.email);
    const path = await upload(b, 'kontakte.csv', await fixture('windows-1252.csv'));
    const preview = await b.get(path);
    assert.match(preview.html, /read as windows-1252/);
    assert.match(preview.html, /<td>Jürgen<\/td>/);
    const columnOf = (name: string) => new RegExp(`<label for="(column_\\d+)">${name}</label>`).exec(preview.html)?.[1] as string;
    // Tags left out, Last Name imported as the first name (the API's explicit `column=Last Name:first_name`).
    const updated = await b.post(path, {
      [columnOf('First Name')]: 'ignore',
      [columnOf('Last Name')]: 'first_name',
      [columnOf('E-mail')]: 'email',
      [columnOf('Mobile')]: 'phone',
      [columnOf('Tags')]: 'ignore',
      action: 'preview',
    });
    assert.equal(updated.status, 303);
    const again = await b.get(path);
    assert.match(again.html, new RegExp(`id="${columnOf('Tags')}"[^>]*>[\\s\\S]*?<option value="ignore" selected>`));
    assert.match(again.html, /<th scope="col">First name<\/th><th scope="col">Email<\/th><th scope="col">Phone<\/th><\/tr>/);
    assert.match(again.html, /<td>Müller<\/td>/);
    const done = await importAndWait(b, path);
    assert.equal(count(done, 'refused'), 0);
    const api = asKey(t.app, agent.key);
    const [juergen] = (await api.get(`/v3/users/${agent.id}/contacts?email=juergen.mueller@beispiel.example`)).body.data;
    assert.deepEqual([juergen.first_name, juergen.last_name, juergen.phone, juergen.tags], ['Müller', null, '7275550190', []]);
  });

  test('the Outlook export (Windows-1252, every cell quoted) imports its three contacts', async () => {
    const b = await signedIn(agent.email);
    const path = await upload(b, 'outlook.csv', await fixture('outlook.csv'));
    assert.match((await b.get(path)).html, /<td>René<\/td>/);
    const done = await importAndWait(b, path);
    assert.deepEqual([count(done, 'created'), count(done, 'refused')], [3, 0]);
    const found = await asKey(t.app, agent.key).get(`/v3/users/${agent.id}/contacts?email=rene.cote@immobilier.example`);
    assert.equal(found.body.data[0].last_name, 'Côté');
  });

  test('refused uploads: no file, empty, not a CSV, unreadable, too big — each in the summary and at the field, 422', async () => {
    const b = await signedIn(agent.email);
    const refusal = async (parts: Parameters<Browser['upload']>[1], message: RegExp) => {
      await b.get('/contacts/import');
      const page = await b.upload('/contacts/import', parts);
      assert.equal(page.status, 422, page.html);
      assert.match(page.html, /There is a problem/);
      const summary = /<li><a href="#file">([^<]+)<\/a><\/li>/.exec(page.html)?.[1] ?? '';
      assert.match(summary, message);
      assert.match(page.html, /<p class="field-error" id="file-error">/);
      assert.match(page.html, /<input id="file" name="file" type="file"[^>]*aria-invalid="true"/);
    };
    await refusal([], /^Select a CSV file\.$/);
    await refusal([['file', { name: 'contacts.csv', bytes: Buffer.alloc(0) }]], /^The selected file is empty\.$/);
    await refusal([['file', { name: 'house.png', bytes: Buffer.from('\x89PNG\r\n\x1a\n') }]], /^The selected file must be a CSV\.$/);
    await refusal(
      [['file', { name: 'contacts.csv', bytes: Buffer.from([0x41, 0x81, 0x0a]) }]],
      /^The file is neither UTF-8 nor Windows-1252/,
    );
    await refusal([['file', { name: 'contacts.csv', bytes: Buffer.from('\n\n') }]], /^The CSV is empty/);
    const big = Buffer.alloc(20 * 1024 * 1024 + 10, 'a\n');
    await refusal([['file', { name: 'big.csv', bytes: big }]], /^The selected file must be smaller than 20 MB\.$/);
    // A form without its token first is refused before its file is read.
    await b.get('/contacts/import');
    const forged = await b.upload('/contacts/import', [['file', { name: 'a.csv', bytes: Buffer.from('email\na@example.com\n') }]], false);
    assert.equal(forged.status, 403);
  });

  test('hostile cells stay text; a header naming no field is mapped by hand, and Import is refused until it is', async () => {
    const b = await signedIn(agent.email);
    const name = `${HOSTILE.script}${HOSTILE.onerror}`;
    const csv = `Vorname,Adresse\n"${name.replaceAll('"', '""')}",hostile@example.com\nFormula,"=HYPERLINK(""https://attacker.example"")"\n`;
    const path = await upload(b, `${HOSTILE.breakout}.csv`, Buffer.from(csv));
    const preview = await b.get(path);
    assert.ok(!preview.html.includes(HOSTILE.script) && !preview.html.includes('<img src=x'), 'escaped');
    assert.match(preview.html, /&lt;script&gt;/);
    assert.match(
      preview.html,
      /<li><a href="#columns">The columns cannot be imported as mapped: none of its columns \(Vorname, Adresse\) is one of first_name, [^<]* or a name they go by\. Choose the field of each column below\.<\/a><\/li>/,
    );
    const refused = await b.post(path, { column_0: 'ignore', column_1: 'ignore', action: 'import' });
    assert.equal(refused.status, 422);
    assert.match(refused.html, /href="#columns"/);
    assert.equal((await b.post(path, { column_0: 'first_name', column_1: 'email', action: 'preview' })).status, 303);
    const done = await importAndWait(b, path);
    assert.deepEqual([count(done, 'created'), count(done, 'refused')], [1, 1]);
    // A refused value is text in the CSV too: a spreadsheet does not run it as a formula.
    const refusedCsv = (await b.get(`${path}/refused.csv`)).html;
    assert.match(refusedCsv, /^3,Email,"'=HYPERLINK\(""https:\/\/attacker\.example""\)",Email must be a valid email address\.\r$/m);
    const [contact] = (await asKey(t.app, agent.key).get(`/v3/users/${agent.id}/contacts?email=hostile@example.com`)).body.data;
    assert.equal(contact.first_name, name);
  });

  test('a bigger file shows its progress while it runs, the page refreshing itself, then its counts', async () => {
    const b = await signedIn(agent.email);
    const rows = Array.from({ length: 5000 }, (_, i) => `progress-${i}@example.com,Person ${i}`);
    const path = await upload(b, 'many.csv', Buffer.from(`email,first name\n${rows.join('\n')}\n`));
    assert.match((await b.get(path)).html, /5,000 rows after the header/);
    assert.equal((await b.post(path, { column_0: 'email', column_1: 'first_name', action: 'import' })).status, 303);
    const running = await b.get(path);
    assert.match(running.html, /<h2>Importing<\/h2>/);
    assert.match(running.html, /<meta http-equiv="refresh" content="2">/);
    assert.match(running.html, /[\d,]+ of 5,000 rows done \(\d+%\)\./);
    assert.match(running.html, new RegExp(`<a href="${path}">Reload</a>`));
    const done = await importAndWait(b, path);
    assert.doesNotMatch(done, /http-equiv="refresh"/, 'a finished import stops refreshing');
    assert.deepEqual([count(done, 'created'), count(done, 'refused')], [5000, 0]);
    const found = await asKey(t.app, agent.key).get(`/v3/users/${agent.id}/contacts?email=progress-4999@example.com`);
    assert.equal(found.body.data[0]?.first_name, 'Person 4999');
  });

  test('an import whose process stopped (no progress for 2 minutes) is shown as stopped and can be imported again', async () => {
    const b = await signedIn(agent.email);
    const path = await upload(b, 'stopped.csv', Buffer.from('email\nstopped@example.com\n'));
    const id = Number(path.split('/').pop());
    // As a process that died mid-import leaves it: importing, its progress never moving again.
    await t.database.db.updateTable('contact_imports').set({ state: 'importing' }).where('id', '=', id).execute();
    assert.match((await b.get(path)).html, /<meta http-equiv="refresh"/);
    assert.equal((await b.post(path, { action: 'import' })).status, 303);
    assert.match((await b.get(path)).html, /<h2>Importing<\/h2>/, 'a second Import while it runs starts nothing');
    ahead = 3 * 60_000;
    try {
      const stopped = await b.get(path);
      assert.match(stopped.html, /This import stopped before its end/);
      assert.doesNotMatch(stopped.html, /http-equiv="refresh"/);
      assert.match(stopped.html, /Import again/);
      const done = await importAndWait(b, path);
      assert.equal(count(done, 'created'), 1);
    } finally {
      ahead = 0;
    }
  });

  test('a cancelled account reads its imports and imports nothing, as its API keys may', async () => {
    const teamId = await createTeam(t);
    const leaving = await createUser(t, 'User', teamId);
    await setPassword(t, leaving.id, PASSWORD);
    const b = await signedIn(leaving.email);
    const path = await upload(b, 'before.csv', Buffer.from('email\nbefore@example.com\n'));
    assert.equal((await asKey(t.app, t.adminKey).post(`/v3/users/${leaving.id}/cancel`)).status, 200);
    const form = await b.get('/contacts/import');
    assert.match(form.html, /A cancelled account can read its imports, not import contacts\./);
    assert.doesNotMatch(form.html, /Upload and preview/);
    await b.get(path);
    assert.equal((await b.post(path, { column_0: 'email', action: 'import' })).status, 403);
    assert.match((await b.get(path)).html, /Not imported yet|Preview of before\.csv/);
    const refused = await b.upload('/contacts/import', [['file', { name: 'after.csv', bytes: Buffer.from('email\nafter@example.com\n') }]]);
    assert.equal(refused.status, 403);
    const found = await asKey(t.app, t.adminKey).get(`/v3/users/${leaving.id}/contacts`);
    assert.equal(found.body.data.length, 0);
  });

  test('acting for a teammate imports into their contacts; another team’s user gets 403 on the import', async () => {
    const b = await signedIn(lead.email);
    await b.get('/contacts');
    assert.equal((await b.post('/acting-for', { user_id: String(agent.id), return_to: '/contacts/import' })).status, 303);
    const path = await upload(b, 'team.csv', Buffer.from('email,first name\nteammate@example.com,Team\n'));
    await importAndWait(b, path);
    const found = await asKey(t.app, agent.key).get(`/v3/users/${agent.id}/contacts?email=teammate@example.com`);
    assert.equal(found.body.data.length, 1, 'in the teammate’s contacts');
    const own = await asKey(t.app, lead.key).get(`/v3/users/${lead.id}/contacts?email=teammate@example.com`);
    assert.equal(own.body.data.length, 0, 'not the Team Administrator’s');
    assert.equal((await (await signedIn(agent.email)).get(path)).status, 200, 'the teammate sees it');

    const other = await signedIn(stranger.email);
    assert.equal((await other.get(path)).status, 403);
    assert.equal((await other.get(`${path}/refused.csv`)).status, 403);
    await other.get('/contacts');
    assert.equal((await other.post(path, { action: 'import' })).status, 403);
    assert.equal((await other.get('/contacts/import/999999')).status, 404);
  });
});
