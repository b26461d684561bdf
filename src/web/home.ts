import type { App } from '../http/fastify-types.ts';
import { PROBLEMS, type ProblemCode } from '../http/problems.ts';
import { PAGE_SCHEMA, sendMessage } from './render.ts';

/** What each problem means and what to do about it: the page a problem's `type` URL answers with. */
const EXPLANATIONS: Record<ProblemCode, string> = {
  validation:
    'A field of the request is invalid. The problem\'s "errors" names each field and what is wrong with it; correct them and send it again.',
  bad_request:
    'The request cannot be read: malformed JSON or CSV, a malformed URL, or a value Hopper cannot take (such as a NUL character).',
  unauthorized:
    'The request carries no API key, or one that is unknown or revoked. Send Authorization: Bearer <key>; keys are made under /v3/users/{id}/api_keys or in account settings.',
  forbidden: 'The key is valid but may not do this: the resource belongs to a user it cannot reach, or the action needs another role.',
  account_cancelled: 'The account was cancelled: during its grace period it can still read, but not create or change anything.',
  https_required: 'This server is behind a proxy that terminates TLS; repeat the request with https://.',
  invalid_signature: 'A webhook arrived without a valid signature from its provider; check the secret configured on both sides.',
  webhook_not_configured: 'A webhook arrived for a provider this server has no secret for; configure it before pointing the provider here.',
  not_found: 'Nothing with this id (or path) exists that the key can reach. The API lives under /v3; see /docs.',
  method_not_allowed: 'The path exists but not with this method; the Allow header lists the methods it takes.',
  payload_too_large:
    'The body is larger than the route accepts: 1 MiB for JSON, 20 MB for a contact import, and the media limit for uploads.',
  unsupported_media_type:
    'The body is in a media type the route does not take: JSON routes want application/json, the contact import text/csv or application/x-ndjson.',
  request_timeout: 'The request took too long to arrive (a slow or stalled client); send it again in one go.',
  conflict:
    'The request clashes with what exists: for example a contact with this email address already exists (the detail names it), or the resource is in a state that does not allow the change.',
  range_not_satisfiable: 'The Range header asks for bytes past the end of the file.',
  request_header_fields_too_large:
    'The request line or its headers are too large (16 KiB in all); send a shorter query string or fewer headers.',
  idempotency_conflict:
    'A request with this Idempotency-Key is still running. Wait for it to finish, then retry: the retry gets its stored answer.',
  idempotency_mismatch:
    'This Idempotency-Key was already used with a different request (another method, path or body). Use a new key for a new request.',
  too_many_requests:
    'The API key made more requests this minute than the rate limit allows. Wait the seconds Retry-After gives; RateLimit-* headers tell how many remain.',
  internal: 'The server failed. The detail carries an error id to find the failure in the server log; tell the operator.',
  service_unavailable: 'The server is stopping or overloaded. Retry after the seconds the Retry-After header gives.',
  database_unavailable:
    'The server cannot reach its database right now. Nothing was changed; retry after the seconds the Retry-After header gives.',
};

/** One page per problem type, under the pages' strict CSP (the problem's `type` URL). */
export async function homePages(web: App): Promise<void> {
  web.get('/problems/:code', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const { code } = request.params as { code: string };
    if (!Object.hasOwn(PROBLEMS, code)) {
      return sendMessage(reply, 404, {
        title: 'No such problem',
        text: `Hopper has no problem type called “${code}”.`,
        link: { href: '/docs', label: 'API reference' },
      });
    }
    const problem = PROBLEMS[code as ProblemCode];
    return sendMessage(reply, 200, {
      title: `${problem.title} (${problem.status})`,
      text: EXPLANATIONS[code as ProblemCode],
      link: { href: '/docs', label: 'API reference' },
    });
  });
}
