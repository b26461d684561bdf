import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { wavFile } from '../media/fixtures.ts';
import { type DocumentProxy, startDocumentProxy } from '../support/document-proxy.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

type Json = any;

/**
 * An acceptance-style run through a validating proxy (test/support/document-proxy.ts): every
 * operation of the document is called as its reference page shows it (the JSON examples, ids of
 * what the run made), then the requests a newcomer makes — a contact read and sent back, a file
 * uploaded, a CSV imported, the unsubscribe page with a bad token, provider callbacks, and the
 * usual mistakes (no key, a wrong id, a wrong type, an invalid field, a duplicate). Every answer
 * must be one the document describes, and every request Hopper accepts one it declares.
 */
describe('the document matches the server', () => {
  let t: TestApp;
  let proxy: DocumentProxy;
  let doc: Json;
  before(async () => {
    t = await startTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const upstream = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    doc = await (await fetch(`${upstream}/v3/openapi.json`)).json();
    proxy = await startDocumentProxy(doc, upstream);
  });
  after(async () => {
    await proxy?.close();
    await t.close();
  });

  const call = async (
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
    key: string | null = t.adminKey,
  ) => {
    const init: RequestInit = { method, headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers } };
    if (body instanceof FormData || typeof body === 'string') init.body = body;
    else if (body !== undefined) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
    }
    const answer = await fetch(`${proxy.url}${path}`, init);
    const text = await answer.text();
    return { status: answer.status, body: /json/.test(answer.headers.get('content-type') ?? '') && text ? JSON.parse(text) : text };
  };
  const operations = (): [string, string, Json][] =>
    Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item as object).map(([m, op]): [string, string, Json] => [m, path, op]),
    );
  const example = (op: Json) => op.requestBody?.content?.['application/json']?.example;

  test('every answer of an acceptance-style run is one the document describes', { timeout: 120_000 }, async () => {
    // Audio first: the examples' media_id is 1.
    const form = new FormData();
    form.append('file', new Blob([wavFile(6)], { type: 'audio/wav' }), 'open-house.wav');
    form.append('name', 'open-house');
    const media = await call('POST', `/v3/users/${t.adminId}/media/upload`, form);
    assert.equal(media.status, 201, JSON.stringify(media.body));
    const older = new FormData();
    older.append('file', new Blob([wavFile(6)], { type: 'audio/wav' }), 'older.wav');
    assert.equal((await call('POST', `/v3/users/${t.adminId}/media`, older)).status, 201, 'the deprecated form still creates');
    const publicFile = new URL(media.body.full_url).pathname;
    assert.equal((await call('GET', publicFile, undefined, {}, null)).status, 200);
    assert.equal((await call('HEAD', publicFile, undefined, {}, null)).status, 200);
    await call('GET', '/health', undefined, {}, null);

    // Every create as its reference sample sends it, then every read, then every update; ids are 1 (the first of each).
    const keyed = operations().filter(([, , op]) => !(Array.isArray(op.security) && op.security.length === 0));
    const withId = (path: string) => path.replace(/\{(\w+)\}/g, (_, name: string) => (name === 'user_id' ? String(t.adminId) : '1'));
    for (const [method, path, op] of keyed.filter(
      ([m, , op]) => m === 'post' && example(op) && !['importMedia', 'createMedia'].includes(op.operationId),
    )) {
      const answer = await call('POST', withId(path), example(op));
      assert.ok(answer.status < 300, `${op.operationId}: ${answer.status} ${JSON.stringify(answer.body)}`);
      void method;
    }
    for (const [method, path] of keyed.filter(([m]) => m === 'get' || m === 'head')) await call(method.toUpperCase(), withId(path));
    for (const [, path, op] of keyed.filter(([m, , op]) => m === 'put' && example(op))) await call('PUT', withId(path), example(op));
    await call('POST', '/v3/webhooks/1/rotate');
    await call('POST', '/v3/webhooks/1/test');
    // Resuming a user's sending (nothing paused them: it lifts nothing, and answers the user).
    await call('POST', '/v3/users/2/sending/resume');
    // An invitation link for user 2 (201, or 409 when the example PUT gave them a password).
    await call('POST', '/v3/users/2/invitation');

    // What a newcomer does next: read a contact and send it back as read.
    const contact = await call('POST', `/v3/users/${t.adminId}/contacts`, {
      first_name: 'Ana',
      email: 'ana.back@example.com',
      tags: ['Buyer'],
    });
    assert.equal(contact.status, 201);
    const read = await call('GET', `/v3/contacts/${contact.body.id}`);
    const sentBack = await call('PUT', `/v3/contacts/${contact.body.id}`, { ...read.body, first_name: 'Anna' });
    assert.equal(sentBack.status, 200, JSON.stringify(sentBack.body));
    // A drop read and sent back; its reason written, as the specification lists it among the body parameters.
    const drop = await call('GET', '/v3/voicemail_drops/1');
    assert.equal((await call('PUT', '/v3/voicemail_drops/1', { ...drop.body, name: 'Renamed' })).status, 200);
    const reasoned = await call('PUT', '/v3/voicemail_drops/1', { reason: 'Waiting for the new listing' });
    assert.equal(reasoned.status, 200);
    assert.equal(reasoned.body.reason, 'Waiting for the new listing');
    // A CSV import, a JSON-lines import.
    const csv = await call('POST', `/v3/users/${t.adminId}/contacts/import`, 'email,first_name,tags\nbo@example.com,Bo,Buyers;VIP\n', {
      'content-type': 'text/csv',
    });
    assert.equal(csv.status, 200, JSON.stringify(csv.body));
    await call('POST', `/v3/users/${t.adminId}/contacts/import`, '{"email":"cy@example.com"}\n', {
      'content-type': 'application/x-ndjson',
    });
    // A URL to import media from that does not answer: a documented error.
    await call('POST', `/v3/users/${t.adminId}/media/import`, { full_url: 'http://127.0.0.1:9/none.wav' });

    // Pages reached by recipients, with tokens that do not exist.
    await call('GET', '/unsubscribe/not-a-token', undefined, {}, null);
    await call(
      'POST',
      '/unsubscribe/not-a-token',
      'List-Unsubscribe=One-Click',
      { 'content-type': 'application/x-www-form-urlencoded' },
      null,
    );
    await call('GET', '/t/o/not-a-token.gif', undefined, {}, null);
    await call('GET', '/t/c/not-a-token?u=https%3A%2F%2Fexample.com', undefined, {}, null);
    await call('GET', '/media/not-a-token/a.wav', undefined, {}, null);
    // Provider callbacks without their credentials.
    await call('POST', '/v3/callbacks/sendgrid', [{ event: 'delivered', email: 'a@example.com' }], {}, null);
    await call('POST', '/v3/callbacks/postmark', { RecordType: 'Bounce' }, {}, null);
    await call('POST', '/v3/callbacks/ses', { Type: 'Notification' }, {}, null);
    await call('POST', '/v3/callbacks/slybroadcast/not-the-token', 'var=x', { 'content-type': 'application/x-www-form-urlencoded' }, null);
    await call('POST', '/v3/callbacks/dropcowboy', {}, {}, null);
    await call('POST', '/v3/callbacks/dropcowboy/callback/not-a-token', {}, {}, null);

    // The usual mistakes.
    await call('GET', '/v3/users', undefined, {}, null);
    await call('GET', '/v3/users', undefined, {}, 'hop_not-a-key');
    await call('GET', '/v3/contacts/999999');
    await call('GET', '/v3/contacts/abc');
    await call('POST', `/v3/users/${t.adminId}/contacts`, { email: 5, bogus: true });
    await call('POST', `/v3/users/${t.adminId}/contacts`, { email: 'ana.back@example.com' });
    await call('POST', `/v3/users/${t.adminId}/contacts`, 'email=x', { 'content-type': 'text/plain' });
    await call('POST', `/v3/users/${t.adminId}/contacts`, '{"email": ', { 'content-type': 'application/json' });
    await call('DELETE', '/v3/users');
    await call('POST', `/v3/users/${t.adminId}/tags`, { name: 'Once' }, { 'idempotency-key': 'conformance-1' });
    await call('POST', `/v3/users/${t.adminId}/tags`, { name: 'Twice' }, { 'idempotency-key': 'conformance-1' });

    // Finally a user cancelled (the one the createUser sample made), and every delete on the first
    // of each: the Administrator's own key (api_keys/1) last.
    assert.equal((await call('POST', '/v3/users/2/cancel')).status, 200);
    const deletes = keyed.filter(([m]) => m === 'delete').map(([, path]) => path);
    for (const path of deletes.sort((a, b) => Number(a.includes('api_keys')) - Number(b.includes('api_keys')))) {
      const answer = await call('DELETE', withId(path));
      assert.ok(answer.status < 300, `DELETE ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
    }

    assert.deepEqual(proxy.violations, [], `${proxy.violations.length} answers depart from the document:\n${proxy.violations.join('\n')}`);
    const operationsSeen = new Set([...proxy.checked].map((line) => line.split(' ').slice(0, 2).join(' ')));
    const missed = operations()
      .map(([method, path]) => `${method.toUpperCase()} ${path}`)
      .filter((name) => !operationsSeen.has(name));
    assert.deepEqual(missed, [], 'every operation of the document was called');
  });
});
