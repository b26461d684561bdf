import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Ajv2020 } from 'ajv/dist/2020.js';

/**
 * A validating proxy in the manner of Prism's: every request passes through to Hopper, and every
 * answer is checked against the OpenAPI document before it goes back. The operation is found by
 * method and path (a static segment beats a parameter); the status must be one the operation
 * lists, the Content-Type one that answer declares, and a JSON body must validate against its
 * schema. A request Hopper accepted (2xx) must be one the document accepts too: its Content-Type
 * declared, and a JSON body valid against the request schema. Every departure is recorded.
 */
export interface DocumentProxy {
  url: string;
  /** `METHOD /path → status: what differs`, one line each. */
  violations: string[];
  /** Answers checked, by `METHOD template status`. */
  checked: Set<string>;
  close(): Promise<void>;
}

type Json = any;

/** application/json and the +json types (problem+json); not JSON lines (application/x-ndjson). */
const JSON_TYPE = /^application\/([\w.-]+\+)?json$/;

interface Route {
  method: string;
  template: string;
  pattern: RegExp;
  statics: number;
  op: Json;
}

const pointer = (...segments: string[]) =>
  segments.map((segment) => encodeURIComponent(segment.replaceAll('~', '~0').replaceAll('/', '~1'))).join('/');

export async function startDocumentProxy(doc: Json, upstream: string): Promise<DocumentProxy> {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat('uri', true).addFormat('date-time', true).addFormat('email', true).addFormat('binary', true);
  ajv.addSchema({ ...doc, $id: 'openapi' });
  const routes: Route[] = [];
  for (const [template, item] of Object.entries(doc.paths) as [string, Json][]) {
    for (const [method, op] of Object.entries(item)) {
      const segments = template.split('/');
      const pattern = new RegExp(
        `^${segments.map((s) => (s.includes('{') ? s.replace(/\{\w+\}/g, '[^/]+').replaceAll('.', '\\.') : s.replaceAll('.', '\\.'))).join('/')}$`,
      );
      routes.push({ method: method.toUpperCase(), template, pattern, statics: segments.filter((s) => !s.includes('{')).length, op });
    }
  }
  const violations: string[] = [];
  const checked = new Set<string>();

  const validate = (ref: string, value: unknown): string | undefined => {
    const check = ajv.getSchema(`openapi#/${ref}`);
    if (!check) return `no schema at ${ref}`;
    return check(value) ? undefined : JSON.stringify(check.errors?.slice(0, 3));
  };
  const resolveResponse = (op: Json, template: string, method: string, status: number): { ref: string; response: Json } | undefined => {
    const response = op.responses?.[String(status)] ?? op.responses?.default;
    if (!response) return undefined;
    if (response.$ref) {
      const name = String(response.$ref).split('/').at(-1) as string;
      return { ref: pointer('components', 'responses', name), response: doc.components.responses[name] };
    }
    const key = op.responses[String(status)] ? String(status) : 'default';
    return { ref: pointer('paths', template, method.toLowerCase(), 'responses', key), response };
  };

  const server: Server = createServer(async (request: IncomingMessage, reply) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const headers = new Headers();
    for (const [name, value] of Object.entries(request.headers)) {
      if (value === undefined || ['host', 'connection', 'content-length', 'transfer-encoding'].includes(name)) continue;
      headers.set(name, Array.isArray(value) ? value.join(', ') : value);
    }
    const method = request.method ?? 'GET';
    const answer = await fetch(`${upstream}${request.url}`, {
      method,
      headers,
      body: body.length > 0 && method !== 'GET' && method !== 'HEAD' ? body : undefined,
      redirect: 'manual',
    });
    const bytes = Buffer.from(await answer.arrayBuffer());
    const out: Record<string, string> = {};
    answer.headers.forEach((value, name) => {
      if (!['content-encoding', 'content-length', 'transfer-encoding', 'connection'].includes(name)) out[name] = value;
    });
    reply.writeHead(answer.status, {
      ...out,
      'content-length': String(method === 'HEAD' ? (answer.headers.get('content-length') ?? 0) : bytes.length),
    });
    reply.end(method === 'HEAD' ? undefined : bytes);

    const path = (request.url ?? '/').split('?')[0] as string;
    const line = `${method} ${request.url} → ${answer.status}`;
    const byPath = (r: Route) => r.pattern.test(path);
    const best = (a: Route, b: Route) => b.statics - a.statics || a.template.localeCompare(b.template);
    // A method the path does not have is answered 405, which each of the path's operations lists.
    const route =
      routes.filter((r) => r.method === method && byPath(r)).sort(best)[0] ??
      (answer.status === 405 ? routes.filter(byPath).sort(best)[0] : undefined);
    if (!route) {
      violations.push(`${line}: no operation of the document has this method and path`);
      return;
    }
    checked.add(`${route.method} ${route.template} ${answer.status}`);
    const found = resolveResponse(route.op, route.template, method, answer.status);
    if (!found) {
      violations.push(`${line}: ${route.op.operationId} does not list ${answer.status}`);
      return;
    }
    const type = (answer.headers.get('content-type') ?? '').split(';')[0]?.trim() ?? '';
    if (method !== 'HEAD' && bytes.length > 0) {
      const media = found.response.content?.[type];
      if (!media) {
        violations.push(
          `${line}: answered ${type || 'no Content-Type'}, the document has ${Object.keys(found.response.content ?? {}).join(', ') || 'no body'}`,
        );
      } else if (JSON_TYPE.test(type)) {
        const problem = validate(pointer(...decodeRef(found.ref), 'content', type, 'schema'), JSON.parse(bytes.toString('utf8')));
        if (problem) violations.push(`${line}: the body departs from the schema: ${problem}`);
      }
    }
    if (answer.status >= 200 && answer.status < 300 && body.length > 0) {
      const sent = (request.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
      const declared = route.op.requestBody?.content?.[sent];
      if (!declared) {
        violations.push(`${line}: accepted a ${sent || 'body without Content-Type'}, which the document does not declare`);
      } else if (JSON_TYPE.test(sent)) {
        const problem = validate(
          pointer('paths', route.template, method.toLowerCase(), 'requestBody', 'content', sent, 'schema'),
          JSON.parse(body.toString('utf8')),
        );
        if (problem) violations.push(`${line}: accepted a body the document refuses: ${problem}`);
      }
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    violations,
    checked,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function decodeRef(ref: string): string[] {
  return ref.split('/').map((segment) => decodeURIComponent(segment).replaceAll('~1', '/').replaceAll('~0', '~'));
}
