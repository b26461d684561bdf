import { type Hopper, unwrap } from '../../typescript/src/index.ts';
import { type Io, table } from './output.ts';

/**
 * `hopper domains check DOMAIN`: the records of GET /v3/domains/{domain}/check as a table, then
 * the value to publish for each that is not ok. Answers 0 when every record is ok, 1 otherwise,
 * so a deployment script can stop on a domain not set up.
 */
export async function checkDomain(io: Io, hopper: Hopper, domain: string, json: boolean): Promise<number> {
  const check = await unwrap(hopper.api.GET('/v3/domains/{domain}/check', { params: { path: { domain } } }));
  const failing = check.records.filter((record) => record.status !== 'ok');
  if (json) {
    io.stdout.write(`${JSON.stringify(check, null, 2)}\n`);
    return failing.length === 0 ? 0 : 1;
  }
  io.stdout.write(`${check.domain}, checked ${check.checked_at}\n`);
  io.stdout.write(
    table(
      ['RECORD', 'STATUS', 'NAME', 'DETAIL'],
      check.records.map((record) => [record.type, record.status, record.name, record.detail]),
    ),
  );
  for (const record of failing) {
    if (record.expected) io.stdout.write(`\nPublish for ${record.type} at ${record.name}:\n  ${record.expected}\n`);
  }
  return failing.length === 0 ? 0 : 1;
}
