import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'contacts');

interface Contact {
  email: string | null;
  first_name: string | null;
  last_name: string | null;
  phone: string | null;
  tags: string[];
}

/**
 * CSV files as people export them (test/fixtures/contacts): Google Contacts, Outlook (Windows-1252),
 * European Excel (semicolons, a BOM), Excel on Windows (Windows-1252), Excel's Unicode text (UTF-16,
 * tabs), an Apple Contacts exporter; their columns mapped, their encodings found or refused.
 */
describe('contact import: files as exported', () => {
  let t: TestApp;
  const as = (actor: Actor) => asKey(t.app, actor.key);
  const post = (actor: Actor, body: Buffer | string, type = 'text/csv', query = '') =>
    as(actor).post(`/v3/users/${actor.id}/contacts/import${query}`, body, { 'content-type': type });
  const fixture = (name: string) => readFile(join(FIXTURES, name));
  const contacts = async (actor: Actor): Promise<Contact[]> =>
    ((await as(actor).get(`/v3/users/${actor.id}/contacts?per_page=100`)).body.data as Contact[]).map(
      ({ email, first_name, last_name, phone, tags }) => ({ email, first_name, last_name, phone, tags: tags.toSorted() }),
    );
  const freshUser = async () => createUser(t, 'User', await createTeam(t));

  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('a Google Contacts export: its columns, its ` ::: ` labels without its own groups, its first number', async () => {
    const user = await freshUser();
    const reply = await post(user, await fixture('google-contacts.csv'));
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(reply.body.created, 3);
    // The address cell of the first row spans two lines: the rows after it start a line later.
    assert.deepEqual(reply.body.refused, [{ line: 6, errors: { email: ['must be a valid email address'] } }]);
    assert.deepEqual(reply.body.file.columns, {
      'First Name': 'first_name',
      'Last Name': 'last_name',
      'E-mail 1 - Value': 'email',
      'Phone 1 - Value': 'phone',
      Labels: 'tags',
    });
    assert.equal(reply.body.file.encoding, 'utf-8');
    assert.equal(reply.body.file.separator, ',');
    assert.ok(reply.body.file.ignored_columns.includes('E-mail 2 - Value'));
    assert.ok(reply.body.file.ignored_columns.includes('Address 1 - Formatted'));
    assert.deepEqual(await contacts(user), [
      {
        email: 'maria.gonzalez@gmail.example',
        first_name: 'Maria',
        last_name: 'Gonzalez',
        phone: '7272329117',
        tags: ['Buyers', 'Open House'],
      },
      { email: 'tom@bayhomes.example', first_name: 'Tom', last_name: "O'Brien", phone: '8135550142', tags: ['Sellers'] },
      { email: null, first_name: 'Priya', last_name: 'Natarajan', phone: '7275550123', tags: [] },
    ]);
    const again = await post(user, await fixture('google-contacts.csv'));
    assert.equal(again.body.created, 0, 'a second import matches what the first created');
    assert.equal(again.body.updated, 3);
  });

  test('an Outlook export: Windows-1252, every cell quoted, CRLF; the mobile number preferred; categories by `;`', async () => {
    const user = await freshUser();
    const reply = await post(user, await fixture('outlook.csv'));
    assert.equal(reply.status, 200, reply.raw);
    assert.deepEqual({ created: reply.body.created, refused: reply.body.refused }, { created: 3, refused: [] });
    assert.equal(reply.body.file.encoding, 'windows-1252');
    assert.deepEqual(reply.body.file.columns, {
      'First Name': 'first_name',
      'Last Name': 'last_name',
      'E-mail Address': 'email',
      'Mobile Phone': 'phone',
      'Home Phone': 'phone',
      'Business Phone': 'phone',
      'Primary Phone': 'phone',
      'Other Phone': 'phone',
      Categories: 'tags',
    });
    assert.deepEqual(await contacts(user), [
      { email: 'rene.cote@immobilier.example', first_name: 'René', last_name: 'Côté', phone: '4385550102', tags: ['Buyers', 'Québec'] },
      { email: 'soren@odegard.example', first_name: 'Søren', last_name: 'Ødegård', phone: '2125550188', tags: ['Sellers'] },
      { email: null, first_name: 'Ana', last_name: 'Muñoz', phone: '7275550155', tags: [] },
    ]);
  });

  test('European Excel: a BOM, semicolons, decimal commas in an ignored column; tags by `;` inside quotes', async () => {
    const user = await freshUser();
    const reply = await post(user, await fixture('excel-semicolon.csv'));
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(reply.body.created, 3);
    assert.deepEqual(reply.body.refused, []);
    assert.deepEqual(reply.body.file, {
      encoding: 'utf-8',
      separator: ';',
      columns: { 'First name': 'first_name', 'Last name': 'last_name', Email: 'email', Phone: 'phone', Tags: 'tags' },
      ignored_columns: ['Budget'],
    });
    assert.deepEqual(await contacts(user), [
      { email: 'jose.garcia@correo.example', first_name: 'José', last_name: 'García', phone: '7275550166', tags: ['Buyers', 'Spring'] },
      { email: 'zoe@vdberg.example', first_name: 'Zoë', last_name: 'Van der Berg', phone: null, tags: ['Sellers'] },
      { email: 'lukasz@poczta.example', first_name: 'Łukasz', last_name: 'Wiśniewski', phone: '7275550167', tags: [] },
    ]);
  });

  test("Excel's sep= line names the separator; the lines after it keep their numbers", async () => {
    const user = await freshUser();
    const reply = await post(user, 'sep=;\r\nEmail;First name;Notes\r\nnot-an-email;Eva;"a, b, c"\r\neva@example.com;Eva;"x, y"\r\n');
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(reply.body.file.separator, ';');
    assert.equal(reply.body.created, 1);
    assert.deepEqual(reply.body.refused, [{ line: 3, errors: { email: ['must be a valid email address'] } }]);
  });

  test('Excel on Windows, "CSV (Comma delimited)": Windows-1252 read as such, never as U+FFFD', async () => {
    const user = await freshUser();
    const bytes = await fixture('windows-1252.csv');
    assert.ok(bytes.includes(0xfc), 'the fixture holds ü as the one byte 0xFC');
    const reply = await post(user, bytes);
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(reply.body.file.encoding, 'windows-1252');
    assert.deepEqual(reply.body.refused, []);
    const all = await contacts(user);
    assert.deepEqual(all, [
      { email: 'juergen.mueller@beispiel.example', first_name: 'Jürgen', last_name: 'Müller', phone: '7275550190', tags: ['Käufer'] },
      { email: 'bjorn.oberg@exempel.example', first_name: 'Björn', last_name: 'Öberg', phone: null, tags: ['Frühling', 'Säljare'] },
      { email: 'emilie@exemple.example', first_name: 'Émilie', last_name: 'Lefèvre', phone: '7275550191', tags: [] },
    ]);
    assert.ok(!JSON.stringify(all).includes('\uFFFD'));
    // The same bytes said to be UTF-8 are refused, with the line, rather than stored as J�rgen.
    const said = await post(user, bytes, 'text/csv; charset=utf-8');
    assertProblem(said, 400, 'bad_request');
    assert.match(said.body.detail, /^The file is not utf-8 as the charset the request names says: line 2 holds bytes that are not utf-8\./);
    // Named as what it is, it reads the same.
    const named = await post(user, bytes, 'text/csv; charset=windows-1252');
    assert.equal(named.status, 200, named.raw);
    assert.equal(named.body.updated, 3);
  });

  test('Excel Unicode text: UTF-16 with a BOM, tab-separated; UTF-16 without a BOM found by its zero bytes', async () => {
    const user = await freshUser();
    const bytes = await fixture('excel-unicode-text.txt');
    const reply = await post(user, bytes, 'text/tab-separated-values');
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(reply.body.file.encoding, 'utf-16le');
    assert.equal(reply.body.file.separator, '\t');
    assert.deepEqual(
      (await contacts(user)).map((c) => [c.first_name, c.last_name]),
      [
        ['Naïa', 'Šimić'],
        ['Dmitri', 'Волков'],
      ],
    );
    const big = Buffer.from(Buffer.from(bytes.subarray(2)).swap16());
    const noBom = await post(user, big);
    assert.equal(noBom.status, 200, noBom.raw);
    assert.equal(noBom.body.file.encoding, 'utf-16be');
    assert.equal(noBom.body.updated, 2);
  });

  test('a file read in 64 KB slices: characters, cells and lines that cross a slice are whole; a bad byte far in names its line', async () => {
    const user = await freshUser();
    const SLICE = 64 * 1024;
    // A character of two bytes in UTF-8 (ü), or a surrogate pair in UTF-16 (😀), cut by the first
    // slice's end; in Windows-1252 every character is one byte, and the file goes through slices all the same.
    const file = (encode: (text: string) => Buffer, width: number, special: string, domain: string) => {
      const filler = (i: number) => `f${i}@${domain},${'x'.repeat(80)},Filler,\n`;
      let text = 'email,notes,first_name,last_name\n';
      let i = 0;
      while (encode(text + filler(i)).length < SLICE - 200) text += filler(i++);
      const prefix = `straddle@${domain},`;
      const notes = 'n'.repeat((SLICE - width - encode(text).length) / width - prefix.length - 1);
      text += `${prefix}${notes},${special}rgen,"Müller\nSecond line"\n`;
      for (let j = 0; j < 10; j++) text += filler(i++);
      return { bytes: encode(text), name: `${special}rgen` };
    };
    for (const [encoding, encode, width, special] of [
      ['utf-8', (text: string) => Buffer.from(text, 'utf8'), 1, 'ü'],
      ['utf-16le', (text: string) => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]), 2, '😀'],
      ['windows-1252', (text: string) => Buffer.from(text, 'latin1'), 1, 'ü'],
    ] as const) {
      const domain = `${encoding}.example`;
      const { bytes, name } = file(encode, width, special, domain);
      if (encoding === 'utf-8') assert.deepEqual([...bytes.subarray(SLICE - 1, SLICE + 1)], [0xc3, 0xbc], 'ü is cut by the slice');
      if (encoding === 'utf-16le')
        assert.deepEqual([...bytes.subarray(SLICE - 2, SLICE + 2)], [0x3d, 0xd8, 0x00, 0xde], '😀 is cut by the slice');
      const reply = await post(user, bytes);
      assert.equal(reply.status, 200, reply.raw);
      assert.equal(reply.body.file.encoding, encoding);
      assert.deepEqual(reply.body.refused, [], JSON.stringify(reply.body.refused));
      const found = await as(user).get(`/v3/users/${user.id}/contacts?email=straddle@${domain}`);
      const straddle = found.body.data[0];
      assert.equal(straddle?.first_name, name, encoding);
      assert.equal(straddle?.last_name, 'Müller\nSecond line', encoding);
    }
    // A byte that is not UTF-8 some 170 KB in, in the third slice: refused whole, with its line.
    const lines = ['email', ...Array.from({ length: 3000 }, (_, i) => `late${i}@bytes.example${'-'.repeat(40)}`)];
    const bad = Buffer.concat([Buffer.from(`${lines.join('\n')}\n`), Buffer.from([0x41, 0xff, 0x0a])]);
    assert.ok(bad.length > 2 * SLICE);
    const refused = await post(user, bad, 'text/csv; charset=utf-8');
    assertProblem(refused, 400, 'bad_request');
    assert.match(refused.body.detail, /line 3002 holds bytes that are not utf-8/);
    // JSON lines: a line of 150 KB runs over three slices.
    const long = JSON.stringify({
      email: 'long@lines.example',
      first_name: 'Ann',
      tags: Array.from({ length: 1400 }, (_, i) => `tag ${i} ${'y'.repeat(90)}`),
    });
    assert.ok(long.length > 2 * SLICE);
    const jsonLines = await post(
      user,
      `{"email":"first@lines.example"}\n${long}\n{"email":"third@lines.example"}\n`,
      'application/x-ndjson',
    );
    assert.equal(jsonLines.status, 200, jsonLines.raw);
    assert.deepEqual(
      jsonLines.body.refused.map((r: { line: number; errors: object }) => [r.line, Object.keys(r.errors)]),
      [[2, ['tags']]],
      'the long line is read as one JSON object, refused for its 1,400 tags, as line 2',
    );
    assert.equal(jsonLines.body.created, 2);
  });

  test('an Apple Contacts export and a mapping for columns of other names', async () => {
    const user = await freshUser();
    const reply = await post(user, await fixture('apple-contacts.csv'));
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(reply.body.created, 2);
    assert.deepEqual(await contacts(user), [
      { email: 'chloe@icloud.example', first_name: 'Chloé', last_name: 'Dubois', phone: '7275550170', tags: ['Buyers'] },
      { email: 'ken@sakura.example', first_name: 'Ken', last_name: 'Watanabe', phone: '7275550171', tags: ['Sellers'] },
    ]);

    const german =
      'Vorname,Nachname,E-Mail-Adresse,Handy,Telefon (geschäftlich),Notizen\nKai,Groß,kai@beispiel.example,727-555-0180,727-555-0181,\n';
    const unmapped = await post(user, german);
    assertProblem(unmapped, 400, 'validation');
    assert.match(unmapped.body.errors.header[0], /map them with \?column=NAME:field$/);

    const query =
      '?column=vorname:first_name&column=NACHNAME:last_name&column=E-Mail-Adresse:email' +
      '&column=Handy:phone&column=Telefon%20(gesch%C3%A4ftlich):ignore';
    const mapped = await post(user, german, 'text/csv', query);
    assert.equal(mapped.status, 200, mapped.raw);
    assert.equal(mapped.body.created, 1);
    assert.deepEqual(mapped.body.file.ignored_columns, ['Telefon (geschäftlich)', 'Notizen']);
    const kai = (await contacts(user)).find((c) => c.first_name === 'Kai');
    assert.deepEqual(kai, { email: 'kai@beispiel.example', first_name: 'Kai', last_name: 'Groß', phone: '7275550180', tags: [] });
  });

  test('files that cannot be read are refused whole, saying why', async () => {
    const user = await freshUser();
    const noField = await post(user, 'shoe_size,colour\n9,blue\n');
    assertProblem(noField, 400, 'validation');
    assert.match(noField.body.errors.header[0], /^none of its columns \(shoe_size, colour\) is one of first_name, /);
    const mapMissing = await post(user, 'email\na@example.com\n', 'text/csv', '?column=Handy:phone');
    assertProblem(mapMissing, 400, 'validation');
    assert.deepEqual(mapMissing.body.errors.header, ['the mapping names the column "Handy", which the header does not have']);
    const mapBad = await post(user, 'email\na@example.com\n', 'text/csv', '?column=email:shoe_size&column=nocolon');
    assertProblem(mapBad, 400, 'validation');
    assert.equal(mapBad.body.errors.column.length, 2);
    const twice = await post(user, 'Email,E-mail\na@example.com,b@example.com\n');
    assertProblem(twice, 400, 'validation');
    assert.match(twice.body.errors.header[0], /^repeated columns: Email/);
    const notText = Buffer.from([0x65, 0x6d, 0x61, 0x69, 0x6c, 0x0a, 0x81, 0x41, 0x0a]);
    const odd = await post(user, notText);
    assertProblem(odd, 400, 'bad_request');
    assert.match(odd.body.detail, /^The file is neither UTF-8 nor Windows-1252: byte 0x81 on line 2 is in neither\./);
    const charset = await post(user, 'email\na@example.com\n', 'text/csv; charset=klingon');
    assertProblem(charset, 415, 'unsupported_media_type');
    assert.match(charset.body.detail, /"klingon" is not an encoding/);
    assert.deepEqual(await contacts(user), []);
  });

  test('a wrong Content-Type is told what this endpoint takes', async () => {
    const user = await freshUser();
    for (const type of ['application/json', 'text/plain', 'multipart/form-data; boundary=x', 'application/octet-stream']) {
      const reply = await post(user, 'email\na@example.com\n', type);
      assertProblem(reply, 415, 'unsupported_media_type');
      assert.match(reply.body.detail, /^This endpoint takes the file itself as the body: text\/csv /, type);
      assert.match(reply.body.detail, new RegExp(`The request's Content-Type is ${type.split(';')[0]}\\.$`));
    }
    const none = await as(user).post(`/v3/users/${user.id}/contacts/import`, 'email\na@example.com\n', { 'content-type': '' });
    assert.equal(none.status, 415, none.raw);
    assert.deepEqual(await contacts(user), []);
  });
});
