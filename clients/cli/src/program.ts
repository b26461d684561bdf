import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { createHopper, type Hopper, unwrap } from '../../typescript/src/index.ts';
import { defaultErrorsPath, importContacts } from './import.ts';
import { cancelMessage, KINDS, listMessages, reportMessage, sendMessage, showMessage } from './messages.ts';
import { CliError, describeError, type Io } from './output.ts';

/**
 * `hopper`, the command-line tool of Hopper's API (docs/cli.md). It speaks the API through the
 * typed client with the key in HOPPER_KEY to the server in HOPPER_URL; a refused request prints
 * the problem's title and detail and exits 1, a usage error exits 2.
 */
export async function main(argv: string[], io: Io): Promise<number> {
  let hopper: Hopper | undefined;
  const client = (): Hopper => {
    if (hopper) return hopper;
    const url = io.env.HOPPER_URL;
    const key = io.env.HOPPER_KEY;
    if (!url || !key) {
      throw new CliError('Set HOPPER_URL (the server, e.g. https://localhost:8443) and HOPPER_KEY (an API key, hop_…).', 2);
    }
    hopper = createHopper({ url, key });
    return hopper;
  };
  /** The user named by --user or HOPPER_USER, else the one user the key reaches. */
  const userOf = async (option: number | undefined): Promise<number> => {
    if (option !== undefined) return option;
    const fromEnv = io.env.HOPPER_USER;
    if (fromEnv) {
      if (!/^[1-9]\d*$/.test(fromEnv)) throw new CliError(`HOPPER_USER must be a user id (a positive whole number), not "${fromEnv}".`, 2);
      return Number(fromEnv);
    }
    const users = await unwrap(client().api.GET('/v3/users', { params: { query: { per_page: 2 } } }));
    const [only] = users.data;
    if (users.meta.total === 1 && only) return only.id;
    throw new CliError(`This key reaches ${users.meta.total} users: name one with --user ID (or HOPPER_USER).`, 2);
  };

  const program = new Command('hopper')
    .description("Hopper's API from the command line: HOPPER_URL and HOPPER_KEY name the server and the key.")
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

  const contacts = program.command('contacts').description('contacts');
  contacts
    .command('import')
    .description('import contacts from a CSV file whose header row names the fields; rerunning it creates nothing new')
    .argument('<file>', 'CSV with a header row: first_name, last_name, email, phone, time_zone, status, tags (separated by ;)')
    .addOption(new Option('--tag <name>', 'add this tag to every contact imported (repeatable)').argParser(collect).default([], 'none'))
    .addOption(userOption())
    .option('--errors <path>', 'where refused rows go (line,field,reason) (default: FILE.refused.csv)')
    .addOption(new Option('--chunk <rows>', 'rows per request').argParser(parseId).default(1000))
    .action(async (file: string, options: { tag: string[]; user?: number; errors?: string; chunk: number }) => {
      const errorsPath = options.errors ?? defaultErrorsPath(file);
      const summary = await importContacts(io, client(), file, {
        userId: await userOf(options.user),
        tags: options.tag,
        errorsPath,
        chunkRows: options.chunk,
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
    });

  for (const [name, kind] of [
    ['drops', KINDS.drop],
    ['emails', KINDS.email],
  ] as const) {
    const group = program.command(name).description(`${kind.noun.toLowerCase()}s`);
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
        await listMessages(io, client(), kind, await userOf(options.user), query, Boolean(options.json));
      });
    group
      .command('show')
      .description(`show one ${kind.noun.toLowerCase()}`)
      .argument('<id>', 'its id', parseId)
      .addOption(json())
      .action(async (id: number, options: { json?: boolean }) => showMessage(io, client(), kind, id, Boolean(options.json)));
    group
      .command('send')
      .description('schedule it to send now (status Scheduled, send_type Now)')
      .argument('<id>', 'its id', parseId)
      .action(async (id: number) => sendMessage(io, client(), kind, id));
    group
      .command('cancel')
      .description('stop it: a Scheduled one goes back to Saved (a draft), a Sending one becomes Cancelled')
      .argument('<id>', 'its id', parseId)
      .action(async (id: number) => cancelMessage(io, client(), kind, id));
  }

  program
    .command('report')
    .description('the counters and the deliveries by state of a voicemail drop or a templated email')
    .argument('<kind>', 'drop or email', (value: string) => {
      if (value !== 'drop' && value !== 'email') throw new InvalidArgumentError('Say drop or email.');
      return value;
    })
    .argument('<id>', 'its id', parseId)
    .addOption(json())
    .action(async (kind: 'drop' | 'email', id: number, options: { json?: boolean }) =>
      reportMessage(io, client(), KINDS[kind], id, Boolean(options.json)),
    );

  program
    .command('suppressions')
    .description('suppressed email addresses and phone numbers')
    .command('lift')
    .description(
      'let contacts receive again, in bulk: email addresses retired by a hard bounce, repeated soft bounces or as invalid; phone numbers suppressed by a voicemail outcome (docs/outcomes.md)',
    )
    .addOption(new Option('--channel <channel>', 'email or phone').choices(['email', 'phone']).makeOptionMandatory())
    .addOption(
      new Option('--reason <reason>', 'only suppressions for this reason, e.g. hard_bounce, repeated_soft_bounce (repeatable)')
        .argParser(collect)
        .default([], 'every liftable one'),
    )
    .option('--since <time>', 'only suppressions decided at or after this time (ISO 8601, e.g. 2026-11-26T00:00:00Z)')
    .option('--until <time>', 'only suppressions decided before this time (ISO 8601)')
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
      }) => {
        const userId = await userOf(options.user);
        const body = {
          channel: options.channel,
          ...(options.reason.length > 0 ? { reasons: options.reason } : {}),
          ...(options.since ? { since: options.since } : {}),
          ...(options.until ? { until: options.until } : {}),
          ...(options.contact.length > 0 ? { contact_ids: options.contact } : {}),
        };
        const result = await unwrap(
          client().api.POST('/v3/users/{user_id}/suppressions/lift', { params: { path: { user_id: userId } }, body }),
        );
        if (options.json) io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
        else {
          const what = options.channel === 'email' ? 'email address' : 'phone number';
          io.stdout.write(`Lifted ${result.lifted} ${what} suppression${result.lifted === 1 ? '' : 's'}: those contacts receive again.\n`);
        }
      },
    );

  try {
    await program.parseAsync(argv);
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
    io.stderr.write(`hopper: ${describeError(error)}\n`);
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
