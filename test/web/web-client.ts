import assert from 'node:assert/strict';
import type { App } from '../../src/http/fastify-types.ts';
import { asKey } from '../support/client.ts';
import type { TestApp } from '../support/test-app.ts';

export interface Page {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  html: string;
  location: string | undefined;
}

/** A form's fields; a list is sent once per value (a group of checkboxes). */
type Form = Record<string, string | string[]>;

/**
 * A browser stand-in over `app.inject`: keeps cookies between requests, posts forms as
 * application/x-www-form-urlencoded, and reads the hidden CSRF field of the last page.
 */
export function browser(app: App, remoteAddress = '127.0.0.1') {
  const jar = new Map<string, string>();
  let lastHtml = '';

  async function request(method: 'GET' | 'POST', url: string, form?: Form | Multipart): Promise<Page> {
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
    const response = await app.inject({
      method,
      url,
      remoteAddress,
      headers: {
        ...(cookie ? { cookie } : {}),
        ...(form instanceof Multipart
          ? { 'content-type': form.type }
          : form
            ? { 'content-type': 'application/x-www-form-urlencoded' }
            : {}),
      },
      // A list is a field sent once per value, as a browser sends a group of checkboxes.
      payload:
        form instanceof Multipart
          ? form.body
          : form
            ? new URLSearchParams(Object.entries(form).flatMap(([k, v]) => [v].flat().map((one): [string, string] => [k, one]))).toString()
            : undefined,
    });
    for (const set of response.cookies as { name: string; value: string; expires?: Date; maxAge?: number }[]) {
      const expired = set.value === '' || set.maxAge === 0 || (set.expires !== undefined && set.expires.getTime() <= Date.now());
      if (expired) jar.delete(set.name);
      else jar.set(set.name, set.value);
    }
    lastHtml = response.body;
    const location = response.headers.location;
    return { status: response.statusCode, headers: response.headers, html: response.body, location: location as string | undefined };
  }

  return {
    jar,
    get: (url: string) => request('GET', url),
    /** Posts a form; `_csrf` is taken from the last page unless the form sets it (or sets it to '' to leave it out). */
    post(url: string, form: Form = {}) {
      const token = csrfToken(lastHtml);
      const fields = { ...(token ? { _csrf: token } : {}), ...form };
      if (fields._csrf === '') delete (fields as Form)._csrf;
      return request('POST', url, fields);
    },
    /**
     * Posts a multipart/form-data form, its parts in this order (a file is `{ name, bytes }`);
     * `_csrf` from the last page goes first unless `token` is false.
     */
    upload(url: string, parts: [string, string | { name: string; bytes: Buffer }][], token = true) {
      const csrf = csrfToken(lastHtml);
      return request('POST', url, new Multipart([...(token && csrf ? [['_csrf', csrf] as [string, string]] : []), ...parts]));
    },
    async signIn(email: string, password: string): Promise<Page> {
      await request('GET', '/login');
      return this.post('/login', { email, password });
    },
  };
}

/** A multipart/form-data body, its parts in order. */
class Multipart {
  readonly type: string;
  readonly body: Buffer;
  constructor(parts: [string, string | { name: string; bytes: Buffer }][]) {
    const boundary = `----hopper-test-${Math.random().toString(36).slice(2)}`;
    const chunks: Buffer[] = [];
    for (const [field, value] of parts) {
      const file = typeof value === 'string' ? undefined : value;
      // As browsers write it: a quote in a file name as %22, a line break as %0A.
      const fileName = file?.name.replaceAll('"', '%22').replaceAll('\r', '%0D').replaceAll('\n', '%0A');
      const disposition = `form-data; name="${field}"${file ? `; filename="${fileName}"` : ''}`;
      const head = `--${boundary}\r\nContent-Disposition: ${disposition}\r\n${file ? 'Content-Type: application/octet-stream\r\n' : ''}\r\n`;
      chunks.push(Buffer.from(head), file ? file.bytes : Buffer.from(value as string), Buffer.from('\r\n'));
    }
    chunks.push(Buffer.from(`--${boundary}--\r\n`));
    this.type = `multipart/form-data; boundary=${boundary}`;
    this.body = Buffer.concat(chunks);
  }
}

export function csrfToken(html: string): string | undefined {
  return /name="_csrf" value="([^"]+)"/.exec(html)?.[1];
}

/** The text of the page's alert, if any. */
export function alertText(html: string): string | undefined {
  return /class="alert[^"]*"[^>]*>([\s\S]*?)<\/(p|div)>/
    .exec(html)?.[1]
    ?.replace(/<[^>]+>/g, '')
    .trim();
}

/** Sets a user's password through the API, as an Administrator would. */
export async function setPassword(t: TestApp, userId: number, password: string): Promise<void> {
  const reply = await asKey(t.app, t.adminKey).put(`/v3/users/${userId}`, { password });
  assert.equal(reply.status, 200, reply.raw);
}
