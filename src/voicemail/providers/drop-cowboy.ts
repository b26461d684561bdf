import type { FastifyBaseLogger } from 'fastify';
import type { DropCowboyConfig } from '../../config.ts';
import type { Db } from '../../db/database.ts';
import type { Clock } from '../../time.ts';
import { type DropSubmission, describeFetchError, type SubmitResult, type VoicemailAdapter } from '../providers.ts';
import { ensureSubmission, noteAccepted, remoteMediaId, saveRemoteMediaId } from '../submissions.ts';

/**
 * Drop Cowboy, API v2, as its own repository documents it (`Drop-Cowboy/dropcowboy`,
 * examples/api/CONTRACT.md and docs/concepts/*.md; summarised in PROVIDERS.md):
 *
 * - every call carries `x-key`/`x-secret`; routes hang off DROPCOWBOY_URL;
 * - `POST /rvm` with `Idempotency-Key: <UUID v4>`, the same key (and the same body) on every try
 *   of one delivery, kept in `provider_submissions`; answered `202 {status: "queued", message_id}`
 *   before anything is checked;
 * - the body: `to` (E.164), `phone_line_id` (retail: DROPCOWBOY_PHONE_LINE_ID or the account's
 *   default line) or `caller_id` (bring-your-own-carrier only), exactly one audio field —
 *   `media_id` of the item uploaded once to Drop Cowboy's media library, or `audio_url` where
 *   support enabled it — `foreign_id` (the delivery) and `callback_url` with a secret token;
 * - media import by URL: `POST /media/public/media {name, type: "rvm", url, ext}` →
 *   `{data: {media_id}}`; lines: `GET /phone/public/lines` → `data[]` with `is_default`/`default`.
 */
const SUBMIT_TIMEOUT_MS = 30_000;
const IMPORT_TIMEOUT_MS = 120_000;
const EXTENSIONS: Record<string, string> = { wav: '.wav', mp3: '.mp3' };

export function dropCowboyAdapter(
  config: DropCowboyConfig,
  publicUrl: string,
  db: Db,
  clock: Clock,
  log: FastifyBaseLogger,
): VoicemailAdapter {
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json',
    'x-key': config.key,
    'x-secret': config.secret,
  };
  // Uploads in progress in this process, by media id: two deliveries of a drop upload once.
  const uploads = new Map<number, Promise<string>>();
  let defaultLine: Promise<string | undefined> | undefined;

  async function call(method: 'GET' | 'POST', path: string, body: unknown, timeoutMs: number, extra: Record<string, string> = {}) {
    const response = await fetch(`${config.url}${path}`, {
      method,
      headers: { ...headers, ...extra },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    return { status: response.status, ok: response.ok, json: parseJson(text) };
  }

  async function mediaIdFor(drop: DropSubmission): Promise<string> {
    const known = await remoteMediaId(db, 'Drop Cowboy', drop.mediaId);
    if (known) return known;
    let upload = uploads.get(drop.mediaId);
    if (!upload) {
      upload = (async () => {
        const reply = await call(
          'POST',
          '/media/public/media',
          { name: `hopper-${drop.mediaId}${EXTENSIONS[drop.audioType]}`, type: 'rvm', url: drop.audioUrl, ext: EXTENSIONS[drop.audioType] },
          IMPORT_TIMEOUT_MS,
        );
        const data = isObject(reply.json?.data) ? reply.json.data : undefined;
        const mediaId = data?.media_id;
        if (!reply.ok || typeof mediaId !== 'string' || mediaId === '') {
          throw new CallError(
            reply.status,
            `Drop Cowboy did not import the audio into its media library (HTTP ${reply.status}${problemText(reply.json)})`,
          );
        }
        await saveRemoteMediaId(db, 'Drop Cowboy', drop.mediaId, mediaId, clock());
        log.info({ mediaId: drop.mediaId, remoteMediaId: mediaId }, 'audio uploaded to the Drop Cowboy media library');
        return mediaId;
      })();
      uploads.set(drop.mediaId, upload);
      upload.then(
        () => uploads.delete(drop.mediaId),
        () => uploads.delete(drop.mediaId),
      );
    }
    return upload;
  }

  function lineId(): Promise<string | undefined> {
    if (config.phoneLineId) return Promise.resolve(config.phoneLineId);
    if (!defaultLine) {
      defaultLine = (async () => {
        const reply = await call('GET', '/phone/public/lines', undefined, SUBMIT_TIMEOUT_MS);
        if (!reply.ok)
          throw new CallError(reply.status, `Drop Cowboy did not list the phone lines (HTTP ${reply.status}${problemText(reply.json)})`);
        const line = listOf(reply.json).find((item) => item.is_default === true || item.default === true);
        const id = line?.ivr_id ?? line?.phone_line_id ?? line?.id;
        return typeof id === 'string' && id !== '' ? id : undefined;
      })();
      // A failed look-up is tried again by the next delivery.
      defaultLine.catch(() => {
        defaultLine = undefined;
      });
    }
    return defaultLine;
  }

  return {
    provider: 'Drop Cowboy',
    async submit(drop): Promise<SubmitResult> {
      const to = `+1${drop.phone}`;
      const submission = await ensureSubmission(db, { deliveryId: drop.deliveryId, provider: 'Drop Cowboy', phone: to }, clock());
      let audio: { media_id: string } | { audio_url: string };
      let sender: { phone_line_id: string } | { caller_id: string };
      try {
        if (config.audioUrl) audio = { audio_url: drop.audioUrl };
        else if (!EXTENSIONS[drop.audioType]) {
          return {
            ok: false,
            retryable: false,
            reason: `Drop Cowboy plays MP3 and WAV audio only; this drop's audio is ${drop.audioType.toUpperCase()}.`,
          };
        } else audio = { media_id: await mediaIdFor(drop) };
        if (config.byoc) sender = { caller_id: `+1${drop.callerId}` };
        else {
          const line = await lineId();
          if (!line) {
            return {
              ok: false,
              retryable: false,
              reason:
                'Drop Cowboy has no phone line to send from: set DROPCOWBOY_PHONE_LINE_ID, or a default line on the account (reason 4010).',
            };
          }
          sender = { phone_line_id: line };
        }
      } catch (error) {
        // Refused (a key without media:write, a URL Drop Cowboy cannot fetch): trying again will not help.
        if (error instanceof CallError) return { ok: false, retryable: retryableStatus(error.status), reason: error.message };
        return { ok: false, retryable: true, reason: `Drop Cowboy could not be reached: ${describeFetchError(error)}` };
      }
      const body = {
        to,
        ...sender,
        ...audio,
        foreign_id: String(drop.deliveryId),
        callback_url: `${publicUrl}/v3/callbacks/dropcowboy/callback/${submission.callback_token}`,
      };
      let reply: Awaited<ReturnType<typeof call>>;
      try {
        reply = await call('POST', '/rvm', body, SUBMIT_TIMEOUT_MS, { 'idempotency-key': submission.idempotency_key });
      } catch (error) {
        return { ok: false, retryable: true, reason: `Drop Cowboy could not be reached: ${describeFetchError(error)}` };
      }
      if (reply.ok) {
        const messageId = reply.json?.message_id;
        const reference = typeof messageId === 'string' || typeof messageId === 'number' ? String(messageId) : undefined;
        await noteAccepted(db, drop.deliveryId, reference);
        return { ok: true, reference };
      }
      const reason = `Drop Cowboy answered HTTP ${reply.status}${problemText(reply.json)}`;
      // The same key is sent again, so a retry after a 5xx or a lost reply never drops twice.
      return { ok: false, retryable: retryableStatus(reply.status), reason };
    },
  };
}

/** A Drop Cowboy call answered with an error status. */
class CallError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** Worth trying again (with the same Idempotency-Key): Drop Cowboy was down, busy or still working. */
function retryableStatus(status: number): boolean {
  return status >= 500 || [408, 409, 425, 429].includes(status);
}

/** `title`/`detail`/`code` (or `message`/`error`) of an error body, for the delivery's last error. */
function problemText(json: Record<string, unknown> | undefined): string {
  if (!json) return '';
  const parts = ['title', 'detail', 'code', 'message', 'error']
    .map((k) => json[k])
    .filter((v): v is string | number => typeof v === 'string' || typeof v === 'number');
  return parts.length > 0 ? `: ${parts.join(' — ').slice(0, 200)}` : '';
}

function listOf(json: Record<string, unknown> | undefined): Record<string, unknown>[] {
  const data = json?.data;
  const list = Array.isArray(data) ? data : isObject(data) ? (data.lines ?? data.items ?? data.data) : undefined;
  return Array.isArray(list) ? list.filter(isObject) : [];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}
