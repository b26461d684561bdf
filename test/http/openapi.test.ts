import assert from 'node:assert/strict';
import { isAbsolute, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { operationIdFor } from '../../src/http/openapi-document.ts';
import { asKey } from '../support/client.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * The served OpenAPI document is one to generate clients from: named components, ids, tags,
 * problem+json errors with their headers, request bodies without read-only fields — and real
 * answers validate against it. (Redocly and Spectral lint it in CI: npm run lint:openapi.)
 */
describe('OpenAPI document', () => {
  let t: TestApp;
  let doc: any;
  before(async () => {
    t = await startTestApp();
    doc = (await asKey(t.app, undefined).get('/v3/openapi.json')).body;
  });
  after(() => t.close());

  const operations = (): [string, string, any][] =>
    Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item as object).map(([method, op]): [string, string, any] => [method, path, op]),
    );

  test('every schema the resources use is a named component', () => {
    for (const name of [
      'VoicemailDrop',
      'TemplatedEmail',
      'Contact',
      'Tag',
      'Problem',
      'ValidationProblem',
      'VoicemailDropCollection',
      'PageMeta',
    ]) {
      assert.ok(doc.components.schemas[name], `components.schemas.${name}`);
    }
    // The resources of the client's named types (clients/typescript/src/index.ts).
    for (const name of ['Webhook', 'WebhookDelivery', 'TemplatedEmailReply', 'Team', 'ApiKey', 'Media', 'User', 'Delivery']) {
      assert.ok(doc.components.schemas[name], `components.schemas.${name}`);
    }
    const create = doc.paths['/v3/users/{user_id}/voicemail_drops'].post;
    assert.deepEqual(create.requestBody.content['application/json'].schema, { $ref: '#/components/schemas/VoicemailDropCreate' });
    assert.deepEqual(create.responses['201'].content['application/json'].schema, { $ref: '#/components/schemas/VoicemailDrop' });
  });

  test('every request and response body of every operation is a named component, never an inline object', () => {
    // Only a body that is one plain value may stay inline: a file, text, a CSV document.
    const scalar = (schema: any) => ['string', 'integer', 'number', 'boolean'].includes(schema?.type) && !schema.properties;
    const inline: string[] = [];
    for (const [method, path, op] of operations()) {
      const bodies: [string, any][] = Object.entries(op.requestBody?.content ?? {}).map(([type, media]) => [`request ${type}`, media]);
      for (const [status, response] of Object.entries(op.responses) as [string, any][]) {
        if (response.$ref) continue;
        for (const [type, media] of Object.entries(response.content ?? {})) bodies.push([`${status} ${type}`, media]);
      }
      for (const [where, media] of bodies) {
        const schema = media.schema;
        if (!schema || scalar(schema)) continue;
        if (!/^#\/components\/schemas\/[A-Z][A-Za-z]+$/.test(schema.$ref ?? '')) inline.push(`${method} ${path} ${where}`);
        else assert.ok(doc.components.schemas[schema.$ref.split('/').at(-1)], schema.$ref);
      }
    }
    assert.deepEqual(inline, [], 'inline object schemas: give them a title (openapi-names.ts)');
    // One schema, one name: the endpoints' operations share Webhook instead of a copy each.
    for (const path of ['/v3/webhooks/{id}']) {
      for (const method of ['get', 'put'])
        assert.deepEqual(doc.paths[path][method].responses['200'].content['application/json'].schema, {
          $ref: '#/components/schemas/Webhook',
        });
    }
    assert.deepEqual(doc.paths['/v3/users/{user_id}/webhooks'].get.responses['200'].content['application/json'].schema, {
      $ref: '#/components/schemas/WebhookCollection',
    });
    assert.equal(doc.components.schemas.WebhookCollection.properties.data.items.$ref, '#/components/schemas/Webhook');
    assert.equal(doc.components.schemas.WebhookDeliveryCollection.properties.data.items.$ref, '#/components/schemas/WebhookDelivery');
    assert.equal(
      doc.components.schemas.TemplatedEmailReplyCollection.properties.data.items.$ref,
      '#/components/schemas/TemplatedEmailReply',
    );
  });

  test('every operation has a unique operationId, a description and a declared, described tag', () => {
    const ids = new Set<string>();
    const tags = new Map(doc.tags.map((tag: { name: string; description: string }) => [tag.name, tag.description]));
    for (const [method, path, op] of operations()) {
      assert.match(op.operationId ?? '', /^[a-z][A-Za-z]+$/, `${method} ${path}`);
      assert.ok(!ids.has(op.operationId), `${op.operationId} is unique`);
      ids.add(op.operationId);
      assert.ok(op.description, `${op.operationId} has a description`);
      for (const tag of op.tags) assert.ok(tags.get(tag) && tags.get(tag) !== tag, `tag ${tag} is described`);
    }
    assert.equal(doc.paths['/v3/users/{user_id}/voicemail_drops'].get.operationId, 'listVoicemailDrops');
  });

  test('the introduction and code samples /docs shows: curl and the typed client on every key-protected operation', () => {
    for (const section of ['Authentication', 'Paging', 'Errors', 'Idempotency', 'Rate limits', 'Webhooks']) {
      assert.match(doc.info.description, new RegExp(`^## ${section}`, 'm'));
    }
    assert.match(doc.info.description, /^Hopper is a self-hosted outreach service/);
    for (const [method, path, op] of operations()) {
      const labels = (op['x-codeSamples'] ?? []).map((sample: { label: string }) => sample.label);
      const keyed = !(Array.isArray(op.security) && op.security.length === 0);
      assert.deepEqual(labels, keyed && method !== 'head' ? ['curl', 'Typed client'] : ['curl'], `${method} ${path}`);
    }
    const [curl, typed] = doc.paths['/v3/users/{user_id}/voicemail_drops'].post['x-codeSamples'];
    // The server answers with the certificate it generated: curl trusts that file, by its absolute path.
    assert.equal(
      curl.source.split(' \\\n  ').slice(0, 3).join('|'),
      `curl -X POST "$HOPPER_URL/v3/users/1/voicemail_drops"|--cacert ${join(t.dataDir, 'tls', 'cert.pem')}|-H "Authorization: Bearer $HOPPER_KEY"`,
    );
    assert.ok(isAbsolute(join(t.dataDir, 'tls', 'cert.pem')));
    assert.match(curl.source, /"callback_number":"\(727\) 232-9117"/);
    assert.match(
      typed.source,
      /hopper\.api\.POST\('\/v3\/users\/\{user_id\}\/voicemail_drops', \{ params: \{ path: \{ user_id: 1 \} \}, body: /,
    );
    assert.match(doc.paths['/v3/users/{user_id}/contacts'].get['x-codeSamples'][1].source, /for await \(const item of hopper\.paginate\(/);
  });

  test("with the operator's certificate (or behind a TLS-terminating proxy), no curl sample names a certificate file", async () => {
    const proxied = await startTestApp({ env: { TLS_CERT_FILE: '/etc/hopper/cert.pem', TLS_KEY_FILE: '/etc/hopper/key.pem' } });
    try {
      const served = (await asKey(proxied.app, undefined).get('/v3/openapi.json')).body;
      const curl: string = served.paths['/v3/users/{user_id}/voicemail_drops'].post['x-codeSamples'][0].source;
      assert.doesNotMatch(curl, /--cacert/);
      assert.match(curl, /^curl -X POST "\$HOPPER_URL\/v3\/users\/1\/voicemail_drops" \\\n {2}-H "Authorization: Bearer \$HOPPER_KEY"/);
    } finally {
      await proxied.close();
    }
  });

  test('operation ids derive from method and path', () => {
    assert.equal(operationIdFor('get', '/v3/templated_emails/{id}/deliveries'), 'listTemplatedEmailDeliveries');
    assert.equal(operationIdFor('post', '/v3/users/{user_id}/contacts/import'), 'importContacts');
    assert.equal(operationIdFor('post', '/v3/users/{id}/cancel'), 'cancelUser');
    assert.equal(operationIdFor('delete', '/v3/api_keys/{id}'), 'deleteApiKey');
    assert.equal(operationIdFor('head', '/v3/media/{id}/download'), 'headDownloadMedia');
    assert.equal(operationIdFor('post', '/v3/users/{user_id}/webhooks'), 'createWebhook');
    assert.equal(operationIdFor('post', '/v3/callbacks/ses'), 'receiveCallbackSes');
    assert.equal(doc.paths['/v3/callbacks/ses'].post.operationId, 'receiveCallbackSes');
    // The providers' first paths keep working, outside the document (no path there can be read as another).
    assert.equal(doc.paths['/v3/webhooks/ses'], undefined);
    assert.deepEqual(
      Object.keys(doc.paths).filter((path) => path.startsWith('/v3/webhooks/')),
      [
        '/v3/webhooks/{id}',
        '/v3/webhooks/{id}/rotate',
        '/v3/webhooks/{id}/test',
        '/v3/webhooks/{id}/deliveries',
        '/v3/webhooks/{id}/deliveries/{delivery_id}',
        '/v3/webhooks/{id}/resend',
      ],
    );
  });

  test('errors are application/problem+json with their headers; key-protected routes list 401, 403, 429 and 503', () => {
    for (const [method, path, op] of operations()) {
      for (const [status, response] of Object.entries(op.responses) as [string, { $ref?: string }][]) {
        if (Number(status) < 400) continue;
        // The unsubscribe page is for people: its 404 (a changed or cut link) is an HTML page, declared so.
        if (path.startsWith('/unsubscribe/') && status === '404') {
          assert.ok((response as any).content['text/html'], `${method} ${path} 404 is text/html`);
          continue;
        }
        const name = response.$ref?.split('/').at(-1) ?? '';
        const shared = doc.components.responses[name];
        assert.ok(shared?.content['application/problem+json'], `${method} ${path} ${status} is problem+json`);
        assert.ok(shared.headers['X-Request-Id']);
      }
      if (path.startsWith('/v3/') && !path.startsWith('/v3/callbacks/')) {
        for (const status of ['401', '403', '404', '405', '429', '503'])
          assert.ok(op.responses[status], `${method} ${path} documents ${status}`);
      }
      if (op.requestBody) for (const status of ['413', '415']) assert.ok(op.responses[status], `${method} ${path} documents ${status}`);
    }
    assert.ok(doc.components.responses.Unauthorized.headers['WWW-Authenticate']);
    assert.ok(doc.components.responses.TooManyRequests.headers['Retry-After']);
    assert.ok(doc.components.responses.TooManyRequests.headers['RateLimit-Remaining']);
    assert.ok(doc.paths['/v3/users/{user_id}/contacts'].post.responses['201'].headers.Location);
  });

  test('response headers: RateLimit-* on every answer, Idempotent-Replayed on POST successes, ranges on downloads', () => {
    const rateLimit = ['RateLimit-Policy', 'RateLimit', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'];
    const headersOf = (response: any) =>
      (response.$ref ? doc.components.responses[response.$ref.split('/').at(-1)] : response).headers ?? {};
    for (const [method, path, op] of operations()) {
      const keyed = !(Array.isArray(op.security) && op.security.length === 0);
      for (const [status, response] of Object.entries(op.responses) as [string, any][]) {
        const headers = headersOf(response);
        const code = Number(status);
        // Counted against the key or the client address, a 401 too; only headers too large (431) are refused first.
        if (code !== 431) for (const name of rateLimit) assert.ok(headers[name], `${method} ${path} ${status} documents ${name}`);
        if (keyed && method === 'post' && code < 300) assert.ok(headers['Idempotent-Replayed'], `${method} ${path} ${status}`);
      }
      if (keyed && method === 'post')
        assert.ok(
          op.parameters.some((p: any) => p.$ref === '#/components/parameters/IdempotencyKey'),
          `${method} ${path} takes Idempotency-Key`,
        );
    }
    for (const name of rateLimit) assert.ok(doc.components.responses.Unauthorized.headers[name], `a 401 carries ${name}`);

    for (const path of ['/v3/media/{id}/download', '/media/{token}/{file_name}']) {
      const { get, head } = doc.paths[path];
      for (const status of ['200', '206']) {
        const response = get.responses[status];
        assert.ok(response.content['audio/wav'] && response.content['audio/mpeg'] && response.content['audio/mp4'], `${path} ${status}`);
        assert.equal(response.headers['Accept-Ranges'].schema.enum[0], 'bytes');
        assert.equal(head.responses[status].content, undefined, `HEAD ${path} ${status} has no body`);
      }
      assert.ok(get.responses['206'].headers['Content-Range']);
      assert.equal(get.responses['416'].$ref, '#/components/responses/RangeNotSatisfiable');
    }
    assert.ok(doc.components.responses.RangeNotSatisfiable.headers['Content-Range']);
  });

  test('request bodies declare read-only fields as readOnly (ignored when sent); no sample sends one', () => {
    for (const [name, schema] of Object.entries(doc.components.schemas) as [string, { properties?: object }][]) {
      for (const [field, property] of Object.entries(schema.properties ?? {})) {
        assert.notDeepEqual(property, {}, `${name}.${field} is an ignored field without its readOnly mark`);
      }
    }
    // What a read answers may be sent back (docs/contacts.md): the write schemas name those fields, read-only.
    assert.equal(doc.components.schemas.VoicemailDropCreate.properties.id.readOnly, true);
    assert.equal(doc.components.schemas.VoicemailDropCreate.properties.reporting.readOnly, true);
    assert.equal(doc.components.schemas.ContactWrite.properties.full_name.readOnly, true);
    assert.equal(doc.components.schemas.ContactWrite.additionalProperties, false);
    for (const [, , op] of operations()) {
      const media = op.requestBody?.content?.['application/json'];
      const schema = media?.schema?.$ref ? doc.components.schemas[media.schema.$ref.split('/').at(-1)] : media?.schema;
      for (const field of Object.keys(media?.example ?? {}))
        assert.notEqual(schema?.properties?.[field]?.readOnly, true, `${op.operationId}'s sample sends the read-only ${field}`);
    }
    assert.equal(doc.components.schemas.VoicemailDrop.properties.id.readOnly, true);
    assert.equal(doc.components.schemas.VoicemailDrop.properties.reporting.readOnly, true);
    assert.equal(doc.components.schemas.VoicemailDrop.properties.name.readOnly, undefined);
  });

  test('real answers validate against the document, errors included', async () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addFormat('uri', true).addFormat('date-time', true).addFormat('email', true).addFormat('binary', true);
    ajv.addSchema({ ...doc, $id: 'openapi' });
    const check = (schema: string, body: unknown) => {
      const validate = ajv.getSchema(`openapi#/components/schemas/${schema}`);
      assert.ok(validate, schema);
      assert.ok(validate(body), `${schema}: ${JSON.stringify(validate.errors)}`);
    };
    const admin = asKey(t.app, t.adminKey);
    const contact = await admin.post(`/v3/users/${t.adminId}/contacts`, { email: 'doc@example.org', first_name: 'Doc' });
    assert.equal(contact.status, 201);
    check('Contact', contact.body);
    check('ContactCollection', (await admin.get(`/v3/users/${t.adminId}/contacts`)).body);
    check('UserCollection', (await admin.get('/v3/users')).body);
    const invalid = await admin.post(`/v3/users/${t.adminId}/contacts`, { email: 5 });
    assert.equal(invalid.headers['content-type'], 'application/problem+json; charset=utf-8');
    check('ValidationProblem', invalid.body);
    const missing = await admin.get('/v3/contacts/999999');
    check('Problem', missing.body);

    // The headers documented for an answer are the ones it carries.
    const replayed = await admin.post(`/v3/users/${t.adminId}/tags`, { name: 'Documented' }, { 'idempotency-key': 'doc-1' });
    const again = await admin.post(`/v3/users/${t.adminId}/tags`, { name: 'Documented' }, { 'idempotency-key': 'doc-1' });
    assert.equal(again.status, 201);
    for (const name of Object.keys(doc.paths['/v3/users/{user_id}/tags'].post.responses['201'].headers)) {
      assert.ok(again.headers[name.toLowerCase()], `the 201 carries ${name}`);
      if (name !== 'Idempotent-Replayed') assert.ok(replayed.headers[name.toLowerCase()], `the first 201 carries ${name}`);
    }
    for (const name of Object.keys(doc.components.responses.NotFound.headers)) assert.ok(missing.headers[name.toLowerCase()], name);

    const media = await upload(t.app, t.adminKey, t.adminId);
    const whole = await t.app.inject({ url: `/v3/media/${media.id}/download`, headers: { authorization: `Bearer ${t.adminKey}` } });
    const part = await t.app.inject({
      url: `/v3/media/${media.id}/download`,
      headers: { authorization: `Bearer ${t.adminKey}`, range: 'bytes=0-99' },
    });
    const outside = await t.app.inject({
      url: `/v3/media/${media.id}/download`,
      headers: { authorization: `Bearer ${t.adminKey}`, range: 'bytes=999999-' },
    });
    const download = doc.paths['/v3/media/{id}/download'].get.responses;
    for (const [answer, status] of [
      [whole, 200],
      [part, 206],
    ] as const) {
      assert.equal(answer.statusCode, status);
      assert.ok(download[status].content[String(answer.headers['content-type'])], `${status} ${answer.headers['content-type']}`);
      for (const name of Object.keys(download[status].headers)) assert.ok(answer.headers[name.toLowerCase()], `${status} carries ${name}`);
    }
    assert.equal(outside.statusCode, 416);
    for (const name of Object.keys(doc.components.responses.RangeNotSatisfiable.headers))
      assert.ok(outside.headers[name.toLowerCase()], `416 carries ${name}`);
  });

  test('every request example is one the API accepts, sent as its curl sample writes it to a new server', async () => {
    const fresh = await startTestApp();
    try {
      // The samples' ids are 1: the first of each resource, made by the create samples before the updates use them.
      const media = await upload(fresh.app, fresh.adminKey, 1);
      assert.equal(media.id, 1);
      const sent: string[] = [];
      const phase = (method: string) => (method === 'post' ? 0 : 1);
      const samples = operations()
        // importMedia's example is a file on the Internet, which a test does not fetch (test/media covers it).
        .filter(([, , op]) => Object.keys(op.requestBody?.content ?? {})[0] === 'application/json' && op.security?.length !== 0)
        .filter(([, , op]) => op.operationId !== 'importMedia')
        .sort(([a], [b]) => phase(a) - phase(b));
      for (const [method, , op] of samples) {
        const curl: string = op['x-codeSamples'][0].source;
        const url = /"\$HOPPER_URL([^"]+)"/.exec(curl)?.[1] ?? '';
        const body = /-d '([^']*)'/.exec(curl)?.[1] ?? '';
        assert.deepEqual(
          JSON.parse(body),
          op.requestBody.content['application/json'].example,
          `${op.operationId}: the curl body is the example /docs shows`,
        );
        assert.ok(Object.keys(JSON.parse(body)).length > 0, `${op.operationId} sends something`);
        const answer = await asKey(fresh.app, fresh.adminKey).send(method.toUpperCase() as 'POST', url, JSON.parse(body));
        assert.ok(answer.status < 300, `${op.operationId} ${method.toUpperCase()} ${url} ${body}: ${answer.status} ${answer.raw}`);
        sent.push(op.operationId);
      }
      for (const id of [
        'createContact',
        'updateContact',
        'createTemplatedEmail',
        'updateTemplatedEmail',
        'createVoicemailDrop',
        'updateWebhook',
      ])
        assert.ok(sent.includes(id), id);
      for (const sample of doc.paths['/v3/users/{user_id}/media'].post['x-codeSamples'])
        assert.match(sample.source, /open-house\.wav/, 'the file the README makes');
    } finally {
      await fresh.close();
    }
  });
});

/** Six seconds of a 440 Hz tone, made as the README makes open-house.wav, uploaded as the createMedia samples do. */
async function upload(app: TestApp['app'], key: string, userId: number): Promise<{ id: number }> {
  const rate = 8000;
  const samples = 6 * rate;
  const wav = Buffer.alloc(44 + 2 * samples);
  wav.write('RIFF');
  wav.writeUInt32LE(36 + 2 * samples, 4);
  wav.write('WAVEfmt ', 8);
  wav.writeUInt32LE(16, 16);
  wav.writeUInt16LE(1, 20);
  wav.writeUInt16LE(1, 22);
  wav.writeUInt32LE(rate, 24);
  wav.writeUInt32LE(2 * rate, 28);
  wav.writeUInt16LE(2, 32);
  wav.writeUInt16LE(16, 34);
  wav.write('data', 36);
  wav.writeUInt32LE(2 * samples, 40);
  for (let i = 0; i < samples; i++) wav.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate)), 44 + 2 * i);
  const form = new FormData();
  form.append('file', new Blob([wav]), 'open-house.wav');
  form.append('name', 'open-house');
  const request = new Request('http://hopper/', { method: 'POST', body: form });
  const answer = await app.inject({
    method: 'POST',
    url: `/v3/users/${userId}/media`,
    headers: { authorization: `Bearer ${key}`, 'content-type': request.headers.get('content-type') ?? '' },
    payload: Buffer.from(await request.arrayBuffer()),
  });
  assert.equal(answer.statusCode, 201, answer.body);
  return answer.json();
}
