import { chmod, mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { CliError, type Io } from './output.ts';

/**
 * `hopper configure`: the server, the key, the user acted for and the certificate to trust, kept
 * under a profile name in one JSON file, readable by its owner only (0600, in a 0700 directory),
 * as ssh and the AWS CLI keep theirs. The file is `HOPPER_CONFIG`, else
 * `$XDG_CONFIG_HOME/hopper/config.json`, else `~/.config/hopper/config.json`.
 */

export interface Profile {
  url: string;
  key: string;
  user?: number;
  /** A certificate (PEM) to trust besides the system's: the one a default install generates. */
  ca?: string;
}

interface ConfigFile {
  default_profile: string;
  profiles: Record<string, Profile>;
}

export function configPath(env: NodeJS.ProcessEnv): string {
  if (env.HOPPER_CONFIG) return resolve(env.HOPPER_CONFIG);
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return join(base, 'hopper', 'config.json');
}

async function readConfig(path: string, io: Io): Promise<ConfigFile | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CliError(`Cannot read the configuration ${path}: ${(error as Error).message}`);
  }
  const mode = (await stat(path)).mode & 0o777;
  if (mode & 0o077) {
    io.stderr.write(
      `hopper: warning: ${path} holds an API key and can be read by others (mode ${mode.toString(8)}); run chmod 600 on it.\n`,
    );
  }
  try {
    const config = JSON.parse(text) as ConfigFile;
    if (typeof config.profiles !== 'object' || config.profiles === null) throw new Error('it has no "profiles" object');
    return config;
  } catch (error) {
    throw new CliError(`The configuration ${path} is not what hopper configure writes (${(error as Error).message}); fix or remove it.`);
  }
}

/** The profile named (or the default one), undefined when there is no file or no default. */
export async function loadProfile(io: Io, name: string | undefined): Promise<(Profile & { name: string }) | undefined> {
  const path = configPath(io.env);
  const config = await readConfig(path, io);
  const wanted = name ?? config?.default_profile;
  if (!wanted) return undefined;
  const profile = config?.profiles[wanted];
  if (!profile) {
    if (name === undefined) return undefined;
    const known = Object.keys(config?.profiles ?? {});
    throw new CliError(
      `There is no profile "${name}" in ${path}${known.length > 0 ? ` (there is ${known.join(', ')})` : ''}: make it with hopper configure --profile ${name} --url URL --key KEY.`,
      2,
    );
  }
  return { ...profile, name: wanted };
}

/** Writes (or updates) one profile: the file replaced in one rename, 0600 from its first byte. */
export async function saveProfile(io: Io, name: string, changes: Partial<Profile>, makeDefault: boolean): Promise<string> {
  const path = configPath(io.env);
  const config: ConfigFile = (await readConfig(path, io)) ?? { default_profile: name, profiles: {} };
  const merged = { ...config.profiles[name], ...changes } as Partial<Profile>;
  if (!merged.url || !merged.key) {
    throw new CliError(`Profile "${name}" needs both --url and --key the first time it is configured.`, 2);
  }
  config.profiles[name] = merged as Profile;
  if (makeDefault || !config.profiles[config.default_profile]) config.default_profile = name;
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  // The new file is made in a directory of its own with a name nobody can guess (mkdtemp: 0700,
  // created exclusively), and itself created exclusively ('wx': O_CREAT|O_EXCL, which never
  // follows a symlink): nothing another user planted beside the configuration is written through.
  // Then one rename puts it in place, in the same file system.
  const scratch = await mkdtemp(join(dirname(path), `.${basename(path)}.`));
  try {
    const temporary = join(scratch, basename(path));
    await writeFile(temporary, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
    await chmod(temporary, 0o600);
    await rename(temporary, path);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return path;
}

/** Every profile, its key shortened to its first characters. */
export async function describeProfiles(io: Io): Promise<string> {
  const path = configPath(io.env);
  const config = await readConfig(path, io);
  if (!config || Object.keys(config.profiles).length === 0) {
    return `No profiles in ${path} yet: hopper configure --url https://localhost:8443 --key hop_…\n`;
  }
  const lines = [`Profiles in ${path}:`];
  for (const [name, profile] of Object.entries(config.profiles)) {
    const parts = [profile.url, `key ${maskKey(profile.key)}`];
    if (profile.user) parts.push(`user ${profile.user}`);
    if (profile.ca) parts.push(`ca ${profile.ca}`);
    lines.push(`${name === config.default_profile ? '*' : ' '} ${name}: ${parts.join(', ')}`);
  }
  return `${lines.join('\n')}\n`;
}

export function maskKey(key: string): string {
  return key.length > 12 ? `${key.slice(0, 8)}…` : '…';
}
