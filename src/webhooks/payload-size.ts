/**
 * Thin, stable event bodies (docs/webhooks.md, "Size"): an event names its resource rather than
 * carrying every byte of it. A text field over INLINE_TEXT_LIMIT (an email's `body` and `text`) is
 * always left out; then, while the body is still over EVENT_PAYLOAD_LIMIT, the resource's other
 * bulky fields go too, in the order listed. `omitted` names what went and `href` is where to read it.
 * What is left is bounded by the resources' field limits: every event body is under
 * EVENT_PAYLOAD_LIMIT (test/webhooks/contract.test.ts).
 */
export const EVENT_PAYLOAD_LIMIT = 16 * 1024;
export const INLINE_TEXT_LIMIT = 4 * 1024;

export const BULKY_FIELDS = {
  contact: ['tags'],
  templated_email: ['body', 'text', 'recipients', 'description'],
  voicemail_drop: ['recipients', 'description'],
} as const satisfies Record<string, readonly string[]>;

const TEXT_FIELDS: readonly string[] = ['body', 'text'];

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value) ?? '');

/** The event's `data`, its bulky fields left out as the rules above say. */
export function thinData(resource: string, data: Record<string, unknown>, href: string, envelopeBytes: number): Record<string, unknown> {
  const bulky: readonly string[] = BULKY_FIELDS[resource as keyof typeof BULKY_FIELDS] ?? [];
  if (bulky.length === 0) return data;
  const thin: Record<string, unknown> = { ...data };
  const omitted: string[] = [];
  const leaveOut = (name: string) => {
    if (!(name in thin)) return;
    delete thin[name];
    omitted.push(name);
  };
  for (const name of bulky) {
    if (TEXT_FIELDS.includes(name) && typeof thin[name] === 'string' && Buffer.byteLength(thin[name] as string) > INLINE_TEXT_LIMIT)
      leaveOut(name);
  }
  // Room for `omitted` and `href` themselves.
  const room = EVENT_PAYLOAD_LIMIT - envelopeBytes - 512 - Buffer.byteLength(href);
  for (const name of bulky) {
    if (bytes(thin) <= room) break;
    leaveOut(name);
  }
  return omitted.length === 0 ? data : { ...thin, omitted, href };
}
