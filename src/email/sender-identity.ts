import addressparser from 'nodemailer/lib/addressparser';
import type { Config } from '../config.ts';
import { type SenderFields, senderName } from '../identity/users.ts';

interface Address {
  name: string;
  address: string;
}

/** Who an email is from, and where answers go when the inbound receiver is off. */
export interface SenderIdentity {
  from: Address;
  /** The sender's own address when From cannot be it (its domain is not authenticated at the relay). */
  replyTo: Address | undefined;
  /** Where answers are forwarded to: the sender's own address. */
  own: Address;
  /** The footer's postal address: the user's, else the operator's; null when neither is set. */
  postalAddress: string | null;
}

/**
 * The sender rules: the sender's own address is From when its domain is one of SENDER_DOMAINS
 * (authenticated at the relay, so SPF and DKIM align for DMARC); otherwise From is MAIL_FROM's
 * address under the sender's name, and Reply-To is the sender's own address.
 */
export function senderIdentity(
  user: SenderFields,
  config: Pick<Config, 'mailFrom' | 'senderDomains' | 'mailPostalAddress'>,
): SenderIdentity {
  const own = { name: senderName(user), address: user.sender_email ?? user.email };
  const domain = own.address.slice(own.address.lastIndexOf('@') + 1).toLowerCase();
  const postalAddress = user.postal_address ?? config.mailPostalAddress ?? null;
  if (config.senderDomains.includes(domain)) return { from: own, replyTo: undefined, own, postalAddress };
  return { from: { name: own.name, address: mailFromAddress(config.mailFrom) }, replyTo: own, own, postalAddress };
}

/** The bare address of MAIL_FROM (`Hopper <no-reply@example.com>` → `no-reply@example.com`). */
export function mailFromAddress(mailFrom: string): string {
  const [first] = addressparser(mailFrom, { flatten: true });
  return first?.address || mailFrom;
}
