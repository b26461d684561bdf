import { Type } from 'typebox';
import { checkDomain, DomainCheck, domainDns } from '../../email/domain-check.ts';
import { noteDomainCheck } from '../../email/domain-watch.ts';
import { DomainError } from '../../errors.ts';
import { RANK } from '../../identity/roles.ts';
import { findSenderFields } from '../../identity/users.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { AUTHENTICATED_ERRORS, problems } from '../schemas.ts';

const DomainParams = Type.Object(
  {
    domain: Type.String({
      maxLength: 253,
      pattern: '^(?=.{1,253}$)([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)+[A-Za-z]{2,63}\\.?$',
      description: 'A domain name such as maplerealty.com',
    }),
  },
  { additionalProperties: false },
);

/** Sender domains: whether their DNS records are as docs/email-setup.md says (email/domain-check.ts). */
export const domainRoutes: RoutePlugin = async (app, { database: { db }, config, clock }) => {
  const dns = domainDns(config.dnsServers);

  app.get(
    '/domains/:domain/check',
    {
      schema: {
        tags: ['Domains'],
        operationId: 'checkDomain',
        summary: "Check a sender domain's SPF, DKIM, DMARC, MX and Return-Path records (Administrator, or a user for their own domain)",
        params: DomainParams,
        response: { 200: DomainCheck, ...problems(...AUTHENTICATED_ERRORS) },
      },
    },
    async (request) => {
      const domain = request.params.domain.toLowerCase().replace(/\.$/, '');
      if (request.principal.rank < RANK.Administrator) {
        const sender = await findSenderFields(db, request.principal.userId);
        const address = (sender?.sender_email ?? sender?.email ?? '').toLowerCase();
        if (address.slice(address.lastIndexOf('@') + 1) !== domain) {
          throw new DomainError(
            'forbidden',
            `You may check only the domain you send from; ${domain} is not it (an Administrator may check any).`,
          );
        }
      }
      const check = await checkDomain(config, dns, domain, clock());
      noteDomainCheck(config, check);
      return check;
    },
  );
};
