import type { DKIMSignOptions } from 'mailauth';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import type { DkimConfig } from '../config.ts';

/**
 * DKIM signing (RFC 6376) of outgoing RFC 5322 text by mailauth's signer, relaxed/relaxed, with
 * the key from DKIM_PRIVATE_KEY_FILE (RSA or Ed25519: the algorithm follows the key). Both send
 * paths sign here: the message composed by compose-mime.ts and the one nodemailer composes.
 */
export const DKIM_SIGNED_HEADERS = [
  'From',
  'Reply-To',
  'To',
  'Subject',
  'Date',
  'Message-ID',
  'MIME-Version',
  'Content-Type',
  'Content-Transfer-Encoding',
  'List-Unsubscribe',
  'List-Unsubscribe-Post',
].join(':');

export type DkimSigner = (raw: string | Buffer, fromAddress: string) => Promise<string | Buffer>;

/** A signer for DKIM_DOMAIN; emails whose From is another domain (not a subdomain) pass unsigned. */
export function createDkimSigner(config: DkimConfig): DkimSigner {
  const { domain, selector, privateKey } = config;
  return async (raw, fromAddress) => {
    const fromDomain = fromAddress.slice(fromAddress.lastIndexOf('@') + 1).toLowerCase();
    if (fromDomain !== domain && !fromDomain.endsWith(`.${domain}`)) return raw;
    // The signer reads its keys from signatureData (one entry per signature), whatever its
    // type declarations say.
    const { signatures, errors } = await dkimSign(raw, {
      canonicalization: 'relaxed/relaxed',
      headerList: DKIM_SIGNED_HEADERS,
      signatureData: [{ signingDomain: domain, selector, privateKey }],
    } as unknown as DKIMSignOptions);
    if (errors?.length || !signatures) throw new Error(`DKIM signing failed: ${errors?.map((e) => e.err?.message).join('; ')}`);
    return typeof raw === 'string' ? signatures + raw : Buffer.concat([Buffer.from(signatures), raw]);
  };
}
