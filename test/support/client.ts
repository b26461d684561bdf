import type { App } from '../../src/http/fastify-types.ts';

export interface Reply<T = any> {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: T;
  raw: string;
}

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH' | 'HEAD' | 'OPTIONS';

/** `asKey(app, key).get(url)`: requests through Fastify's inject, parsed as JSON when they are JSON. */
export function asKey(app: App, key: string | undefined) {
  const send = async (method: Method, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> => {
    const response = await app.inject({
      method,
      url,
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(body !== undefined && typeof body !== 'string' && !Buffer.isBuffer(body) ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      // A string or a Buffer (a file's bytes) is sent as it is; anything else as JSON.
      payload: body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
    });
    const type = String(response.headers['content-type'] ?? '');
    return {
      status: response.statusCode,
      headers: response.headers,
      body: type.includes('json') && response.body ? JSON.parse(response.body) : response.body,
      raw: response.body,
    };
  };
  return {
    get: (url: string, headers?: Record<string, string>) => send('GET', url, undefined, headers),
    post: (url: string, body?: unknown, headers?: Record<string, string>) => send('POST', url, body, headers),
    put: (url: string, body?: unknown, headers?: Record<string, string>) => send('PUT', url, body, headers),
    delete: (url: string, headers?: Record<string, string>) => send('DELETE', url, undefined, headers),
    send,
  };
}
