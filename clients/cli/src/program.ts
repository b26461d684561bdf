import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import * as tls from 'node:tls';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { createHopper, type Hopper, unwrap } from '../../typescript/src/index.ts';
import { describeProfiles, loadProfile, maskKey, type Profile, saveProfile } from './config.ts';
import { createDrop, createdLine, createEmail, liftSuppressions, recipientsOf, textOf, watchMessage } from './create.ts';
import { checkDomain } from './domains.ts';
import { defaultErrorsPath, importContacts } from './import.ts';
import { cancelMessage, KINDS, listMessages, reportMessage, sendMessage, showMessage } from './messages.ts';
import { CliError, describeError, type Io } from './output.ts';

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * `hopper`, the command-line tool of Hopper's API (docs/cli.md). It speaks the API through the
 * typed client with the key in HOPPER_KEY to the server in HOPPER_URL; a refused request prints
 * the problem's title and detail and exits 1, a usage error exits 2.
 */
export async function main(argv: string[], io: Io): Promise<number> {
  let hopper: Hopper | undefined;
  /** Where the server and key come from: --profile, else HOPPER_URL and HOPPER_KEY, else the default profile. */
  let settings: { url: string; key: string; user?: number; from: string } | undefined;
  const connection = async () => {
    if (settings) return settings;
    const named = program.opts<{ profile?: string }>().profile ?? io.env.HOPPER_PROFILE;
    const fromEnv = !program.opts<{ profile?: string }>().profile && io.env.HOPPER_URL && io.env.HOPPER_KEY;
    const profile = fromEnv ? undefined : await loadProfile(io, named);
    if (fromEnv) {
      settings = { url: io.env.HOPPER_URL as string, key: io.env.HOPPER_KEY as string, from: 'HOPPER_URL' };
    } else if (profile) {
      if (profile.ca) trust(profile.ca);
      settings = { url: profile.url, key: profile.key, user: profile.user, from: `profile ${profile.name}` };
    } else {
      throw new CliError(
        'Say which server and key to use: hopper configure --url https://localhost:8443 --key hop_… (kept in a file only you can read), ' +
          'or set HOPPER_URL and HOPPER_KEY.',
        2,
      );
    }
    return settings;
  };
  const client = async (): Promise<Hopper> => {
    if (hopper) return hopper;
    const { url, key } = await connection();
    hopper = createHopper({ url, key });
    return hopper;
  };
  /** The user named by --user, HOPPER_USER or the profile, else the one user the key reaches. */
  const userOf = async (option: number | undefined): Promise<number> => {
    if (option !== undefined) return option;
    const fromEnv = io.env.HOPPER_USER;
    if (fromEnv) {
      if (!/^[1-9]\d*$/.test(fromEnv)) throw new CliError(`HOPPER_USER must be a user id (a positive whole number), not "${fromEnv}".`, 2);
      return Number(fromEnv);
    }
    const { user } = await connection();
    if (user) return user;
    const users = await unwrap((await client()).api.GET('/v3/users', { params: { query: { per_page: 2 } } }));
    const [only] = users.data;
    if (users.meta.total === 1 && only) return only.id;
    throw new CliError(
      `This key reaches ${users.meta.total} users: name one with --user ID (or HOPPER_USER, or hopper configure --user ID).`,
      2,
    );
  };

  const program = new Command('hopper')
    .description(
      "Hopper's API from the command line. Configure it once (hopper configure --url URL --key KEY), " +
        'or set HOPPER_URL and HOPPER_KEY.',
    )
    .version(`hopper ${VERSION}`, '-V, --version', 'print the version')
    .option(
      '--profile <name>',
      'the configured profile to use (default: HOPPER_PROFILE, else HOPPER_URL and HOPPER_KEY, else the default profile)',
    )
    .showHelpAfterError('(run with --help for the commands and their options)')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
    });
  const userOption = () =>
    new Option('--user <id>', 'the user whose resources these are (default: HOPPER_USER, or the only user the key reaches)').argParser(
      parseId,
    );
  const json = () => new Option('--json', 'print the JSON the API answered');

  program
    .command('configure')
    .description('keep the server, the key and the user to act for under a profile, in a file only you can read (0600)')
    .option('--url <url>', 'the server, e.g. https://localhost:8443')
    .option('--key <key>', 'the API key (hop_…); - reads it from standard input, which keeps it out of the shell history')
    .addOption(new Option('--user <id>', 'the user to act for by default').argParser(parseId))
    .option('--ca <file>', "a certificate to trust (PEM): a default install's own, data/tls/cert.pem")
    .option('--default', 'make this profile the default')
    .addHelpText('after', '\nWithout options it lists the profiles. The profile is --profile NAME (default: "default").')
    .action(async (options: { url?: string; key?: string; user?: number; ca?: string; default?: boolean }) => {
      const name = program.opts<{ profile?: string }>().profile ?? 'default';
      if (!options.url && !options.key && !options.user && !options.ca) {
        io.stdout.write(await describeProfiles(io));
        return;
      }
      const changes: Partial<Profile> = {};
      if (options.url) changes.url = checkUrl(options.url);
      if (options.key) changes.key = options.key === '-' ? (await readAll(io)).trim() : options.key;
      if (changes.key !== undefined && !/^hop_\S+$/.test(changes.key))
        throw new CliError('An API key starts with hop_ (the key, not its id).', 2);
      if (options.user) changes.user = options.user;
      if (options.ca) {
        changes.ca = resolve(options.ca);
        const pem = await readFile(changes.ca, 'utf8').catch((error: Error) => {
          throw new CliError(`Cannot read the certificate ${changes.ca}: ${error.message}`, 2);
        });
        if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new CliError(`${changes.ca} is not a PEM certificate.`, 2);
      }
      const path = await saveProfile(io, name, changes, Boolean(options.default));
      const saved = await loadProfile(io, name);
      io.stdout.write(`Saved profile ${name} (${saved?.url}, key ${maskKey(saved?.key ?? '')}) in ${path}, readable by you only.\n`);
      // Tried at once, so a wrong URL, key or certificate shows now rather than at the first command.
      settings = undefined;
      hopper = undefined;
      program.setOptionValue('profile', name);
      const users = await unwrap((await client()).api.GET('/v3/users', { params: { query: { per_page: 1 } } }));
      io.stdout.write(`The key works: it reaches ${users.meta.total} user${users.meta.total === 1 ? '' : 's'}.\n`);
    });

  const contacts = program.command('contacts').description('contacts: import a CSV file as exported');
  contacts
    .command('import')
    .description('import contacts from a CSV file whose header row names the fields; rerunning it creates nothing new')
    .argument(
      '<file>',
      'CSV with a header row: first_name, last_name, email, phone, time_zone, status, tags (separated by ;), or the columns of a ' +
        'Google, Outlook or Apple Contacts export',
    )
    .addOption(new Option('--tag <name>', 'add this tag to every contact imported (repeatable)').argParser(collect).default([], 'none'))
    .addOption(userOption())
    .option('--errors <path>', 'where refused rows go (line,field,reason) (default: FILE.refused.csv)')
    .addOption(new Option('--chunk <rows>', 'rows per request').argParser(parseId).default(1000))
    .addOption(
      new Option('--column <name:field>', 'read the column NAME as this field, or ignore it (e.g. --column Handy:phone; repeatable)')
        .argParser(collect)
        .default([], 'by their names'),
    )
    .action(async (file: string, options: { tag: string[]; user?: number; errors?: string; chunk: number; column: string[] }) => {
      const errorsPath = options.errors ?? defaultErrorsPath(file);
      const summary = await importContacts(io, await client(), file, {
        userId: await userOf(options.user),
        tags: options.tag,
        errorsPath,
        chunkRows: options.chunk,
        columns: options.column,
      });
      io.stdout.write(
        `${file}: ${summary.rows} rows, ${summary.created} created, ${summary.updated} updated, ${summary.refused.length} refused\n`,
      );
      if (summary.refused.length > 0) {
        const first = summary.refused
          .slice(0, 3)
          .map((row) => `line ${row.line}`)
          .join(', ');
        io.stdout.write(`Refused rows (${first}${summary.refused.length > 3 ? ', …' : ''}) and why: ${errorsPath}\n`);
      }
      const mapped = Object.entries(summary.columns).map(([column, field]) => (column === field ? field : `${column} → ${field}`));
      io.stdout.write(
        `Read as ${summary.encoding}, separated by ${SEPARATOR_NAMES[summary.separator] ?? summary.separator}: ${mapped.join(', ')}\n`,
      );
      if (summary.ignored.length > 0) io.stdout.write(`Ignored columns: ${summary.ignored.join(', ')}\n`);
    });

  for (const [name, kind] of [
    ['drops', KINDS.drop],
    ['emails', KINDS.email],
  ] as const) {
    const group = program.command(name).description(`${kind.noun.toLowerCase()}s: create, list, show, send, cancel`);
    const create = group
      .command('create')
      .description(`create a ${kind.noun.toLowerCase()}: a draft, or sent now with --send, or at a time with --at`)
      .addOption(userOption())
      .addOption(new Option('--tag <name>', 'send to the contacts of this tag (repeatable)').argParser(collect).default([], 'none'))
      .addOption(new Option('--tag-id <id>', 'send to the contacts of this tag id (repeatable)').argParser(collectId).default([], 'none'))
      .addOption(new Option('--contact <id>', 'send to this contact (repeatable)').argParser(collectId).default([], 'none'))
      .option('--send', 'schedule it to go now')
      .option('--at <time>', 'schedule it for this time (ISO 8601, e.g. 2026-12-01T15:00:00Z)')
      .addOption(json());
    if (name === 'emails') {
      create
        .requiredOption('--subject <text>', 'the subject')
        .option('--body <html>', 'the body (HTML; {{first_name}} and the other merge fields work)')
        .option('--body-file <path>', 'read the body from this file (- for standard input)')
        .addOption(new Option('--signature <id>', 'the signature to append').argParser(parseId))
        .action(async (options: EmailCreateOptions) => {
          const hopper = await client();
          const userId = await userOf(options.user);
          const body = await textOf(io, options.body, options.bodyFile, 'body');
          const recipients = await recipientsOf(hopper, userId, options);
          const email = await createEmail(hopper, userId, { ...options, body, recipients });
          io.stdout.write(options.json ? `${JSON.stringify(email, null, 2)}\n` : createdLine(kind, email, name));
        });
    } else {
      create
        .requiredOption('--name <text>', 'its name (yours; recipients do not see it)')
        .addOption(new Option('--media <id>', 'the audio to leave (a media id)').argParser(parseId).makeOptionMandatory())
        .requiredOption('--callback-number <phone>', 'the number recipients see and call back')
        .addOption(
          new Option('--provider <name>', 'who delivers it').choices(['Slybroadcast', 'Drop Cowboy', 'Sandbox']).makeOptionMandatory(),
        )
        .action(async (options: DropCreateOptions) => {
          const hopper = await client();
          const userId = await userOf(options.user);
          const recipients = await recipientsOf(hopper, userId, options);
          const drop = await createDrop(hopper, userId, { ...options, media: options.media, recipients });
          io.stdout.write(options.json ? `${JSON.stringify(drop, null, 2)}\n` : createdLine(kind, drop, name));
        });
    }
    group
      .command('list')
      .description(`list ${kind.noun.toLowerCase()}s, every page (filters are OR-combined, as in the API)`)
      .addOption(userOption())
      .addOption(new Option('--status <status>', 'only those with this status (repeatable)').argParser(collect).default([], 'any'))
      .addOption(
        new Option(
          `--${name === 'drops' ? 'name' : 'subject'} <text>`,
          `whose ${name === 'drops' ? 'name' : 'subject'} contains this (repeatable)`,
        )
          .argParser(collect)
          .default([], 'any'),
      )
      .addOption(json())
      .action(async (options: { user?: number; status: string[]; name?: string[]; subject?: string[]; json?: boolean }) => {
        const query = { status: nonEmpty(options.status) as never, name: nonEmpty(options.name ?? options.subject ?? []) };
        await listMessages(io, await client(), kind, await userOf(options.user), query, Boolean(options.json));
      });
    group
      .command('show')
      .description(`show one ${kind.noun.toLowerCase()}`)
      .argument('<id>', 'its id', parseId)
      .addOption(json())
      .action(async (id: number, options: { json?: boolean }) => showMessage(io, await client(), kind, id, Boolean(options.json)));
    group
      .command('send')
      .description('schedule it to send now (status Scheduled, send_type Now)')
      .argument('<id>', 'its id', parseId)
      .action(async (id: number) => sendMessage(io, await client(), kind, id));
    group
      .command('cancel')
      .description('stop it: a Scheduled one goes back to Saved (a draft), a Sending one becomes Cancelled')
      .argument('<id>', 'its id', parseId)
      .action(async (id: number) => cancelMessage(io, await client(), kind, id));
  }

  program
    .command('report')
    .description('the counters and the deliveries by state of a voicemail drop or a templated email')
    .argument('<kind>', 'drop or email', kindOf)
    .argument('<id>', 'its id', parseId)
    .addOption(json())
    .action(async (kind: 'drop' | 'email', id: number, options: { json?: boolean }) =>
      reportMessage(io, await client(), KINDS[kind], id, Boolean(options.json)),
    );

  program
    .command('watch')
    .description("follow a voicemail drop's or a templated email's status and counters until it is Sent, Failed or Cancelled")
    .argument('<kind>', 'drop or email', kindOf)
    .argument('<id>', 'its id', parseId)
    .addOption(new Option('--interval <seconds>', 'how often to look').argParser(parseSeconds).default(2))
    .addOption(new Option('--timeout <seconds>', 'stop watching after this long (0: never)').argParser(parseSeconds).default(0))
    .option('--json', 'a JSON line each time something changes')
    .addHelpText('after', '\nExits 0 once it is Sent, 1 when it Failed or was Cancelled, is a draft, or the time ran out.')
    .action(async (kind: 'drop' | 'email', id: number, options: { interval: number; timeout: number; json?: boolean }) => {
      exitCode = await watchMessage(io, await client(), KINDS[kind], id, {
        intervalMs: options.interval * 1000,
        timeoutMs: options.timeout * 1000,
        json: Boolean(options.json),
      });
    });

  program
    .command('suppressions')
    .description('suppressed email addresses and phone numbers')
    .command('lift')
    .description("let suppressed contacts receive again (bounces, failures; never an unsubscribe or a complaint, the person's own word)")
    .addOption(new Option('--channel <channel>', 'email addresses or phone numbers').choices(['email', 'phone']).makeOptionMandatory())
    .addOption(
      new Option('--reason <reason>', 'only those suppressed for this reason (repeatable)').argParser(collect).default([], 'any liftable'),
    )
    .option('--since <time>', 'only those suppressed at or after this time (ISO 8601)')
    .option('--until <time>', 'only those suppressed before this time (ISO 8601)')
    .addOption(new Option('--contact <id>', 'only this contact (repeatable)').argParser(collectId).default([], 'any'))
    .addOption(userOption())
    .addOption(json())
    .action(
      async (options: {
        channel: 'email' | 'phone';
        reason: string[];
        since?: string;
        until?: string;
        contact: number[];
        user?: number;
        json?: boolean;
      }) => liftSuppressions(io, await client(), await userOf(options.user), options),
    );

  program
    .command('domains')
    .description('sender domains')
    .command('check')
    .description("check a sender domain's SPF, DKIM, DMARC, MX and Return-Path records; exits 1 unless every one is ok")
    .argument('<domain>', 'the domain emails are sent from, e.g. maplerealty.com')
    .addOption(json())
    .action(async (domain: string, options: { json?: boolean }) => {
      exitCode = await checkDomain(io, await client(), domain, Boolean(options.json));
    });

  let exitCode = 0;
  try {
    await program.parseAsync(argv);
    if (exitCode !== 0) return exitCode;
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
    io.stderr.write(`hopper: ${describeError(error, settings)}\n`);
    return error instanceof CliError ? error.exitCode : 1;
  }
}

function parseId(value: string): number {
  const id = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(id) || id < 1) throw new InvalidArgumentError('Expected a positive whole number.');
  return id;
}

function collectId(value: string, all: number[]): number[] {
  return [...all, parseId(value)];
}

function collect(value: string, all: string[]): string[] {
  return [...all, value];
}

function nonEmpty<T>(values: T[]): T[] | undefined {
  return values.length > 0 ? values : undefined;
}

const SEPARATOR_NAMES: Record<string, string> = { ',': 'commas', ';': 'semicolons', '\t': 'tabs' };

function kindOf(value: string): 'drop' | 'email' {
  if (value !== 'drop' && value !== 'email') throw new InvalidArgumentError('Say drop or email.');
  return value;
}

function parseSeconds(value: string): number {
  const seconds = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || seconds > 86_400) throw new InvalidArgumentError('Expected a number of seconds (at most 86400).');
  return seconds;
}

function checkUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(`--url must be the server's address, e.g. https://localhost:8443, not "${value}".`, 2);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new CliError(`--url must start with https:// (or http://), not ${url.protocol}.`, 2);
  return value.replace(/\/+$/, '');
}

/** Trusts one more certificate for this process, as NODE_EXTRA_CA_CERTS would. */
function trust(path: string): void {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (error) {
    throw new CliError(`Cannot read the certificate ${path} the profile names: ${(error as Error).message}`, 2);
  }
  // Node 22.19 and 24.5 have it; on an older Node the environment variable does the same.
  if (typeof tls.setDefaultCACertificates !== 'function') {
    throw new CliError(`This Node (${process.version}) cannot add a certificate itself: export NODE_EXTRA_CA_CERTS=${path} instead.`, 2);
  }
  tls.setDefaultCACertificates([...tls.getCACertificates('default'), pem]);
}

async function readAll(io: Io): Promise<string> {
  if (!io.stdin) throw new CliError('There is no standard input to read the key from.', 2);
  const chunks: Buffer[] = [];
  for await (const chunk of io.stdin) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

interface CreateOptions {
  user?: number;
  tag: string[];
  tagId: number[];
  contact: number[];
  send?: boolean;
  at?: string;
  json?: boolean;
}

interface EmailCreateOptions extends CreateOptions {
  subject: string;
  body?: string;
  bodyFile?: string;
  signature?: number;
}

interface DropCreateOptions extends CreateOptions {
  name: string;
  media: number;
  callbackNumber: string;
  provider: 'Slybroadcast' | 'Sandbox' | 'Drop Cowboy';
}
