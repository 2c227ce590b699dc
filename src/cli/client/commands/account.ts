// login, logout, whoami, teams.
import fs from 'node:fs';
import os from 'node:os';
import { stringOption, type Command } from '../command.js';
import type { IssuedCredential, SignedIn, Team, User } from '../answers.js';
import { configPath, readConfig, writeConfig, type Profile } from '../config.js';
import { Api, UsageError } from '../http.js';
import { out, print, printJson, table } from '../output.js';

/** `-` reads the value from stdin, so a secret need not sit in the shell's history. */
function secretOption(value: string | undefined): string | undefined {
  if (value !== '-') return value;
  return fs.readFileSync(0, 'utf8').trim();
}

/**
 * Signs in as a person (password or sign-in link), has the server issue an API token for this
 * machine, and ends the browser session: the profile keeps a token, never a password.
 */
async function tokenBySignIn(api: Api, how: { email: string; password: string } | { link: string }) {
  const signIn =
    'link' in how
      ? { path: '/api/v1/auth/sign-in-links/consume', json: { token: how.link.replace(/^.*#token=/, '') } }
      : { path: '/api/v1/auth/sign-in', json: { email: how.email, password: how.password } };
  const response = await api.send('POST', signIn.path, { credential: 'none', json: signIn.json });
  const { data } = (await response.json()) as { data: SignedIn };
  const session = {
    cookie: (response.headers.get('set-cookie') ?? '').split(';')[0]!,
    'x-csrf-token': data.csrf_token,
  };
  try {
    const issued = await api.data<IssuedCredential>('POST', '/api/v1/user/tokens', {
      credential: 'none',
      headers: session,
      json: { name: `berth CLI on ${os.hostname()}`.slice(0, 100) },
    });
    return issued.token;
  } finally {
    await api
      .send('POST', '/api/v1/auth/sign-out', { credential: 'none', headers: session })
      .catch(() => undefined);
  }
}

const login: Command = {
  name: 'login',
  summary: 'store a Berth URL and credentials as a profile (0600, in your config dir)',
  usage:
    '--url URL [--token T|- | --email E --password -|--link URL|-] [--tools-key K|-] [--db-user U --db-password P|-] [--profile NAME]',
  options: {
    url: { type: 'string' },
    token: { type: 'string' },
    email: { type: 'string' },
    password: { type: 'string' },
    link: { type: 'string' },
    'tools-key': { type: 'string' },
    'db-user': { type: 'string' },
    'db-password': { type: 'string' },
  },
  details: [
    'The profile is written to $XDG_CONFIG_HOME/berth/config.json (or ~/.config/berth/config.json) with mode',
    '0600 and becomes the current one. Logging in again to the same profile keeps the credentials you do not',
    'give. A token is checked against the server before it is stored. A value "-" is read from stdin.',
    'Instead of a token, sign in as yourself: --email with --password - (or BERTH_PASSWORD), or --link with a',
    'sign-in link you were mailed; Berth then issues an API token named after this machine, which is what the',
    'profile keeps (revoke it in the account page or with DELETE /api/v1/user/tokens/ID).',
    'In CI, skip login: set BERTH_URL and BERTH_TOKEN (BERTH_TOOLS_KEY, BERTH_DB_USER, BERTH_DB_PASSWORD).',
  ].join('\n'),
  examples: [
    'berth login --url https://berth.example.com --token berth_pat_…',
    'echo "$TOKEN" | berth login --url https://berth.example.com --token -',
    'berth login --profile staging --url https://staging.example.com --token berth_pat_…',
    'echo "$PASSWORD" | berth login --url https://berth.example.com --email me@example.com --password -',
    "berth login --url https://berth.example.com --link 'https://berth.example.com/sign-in/link#token=…'",
    'berth login --db-user db_… --db-password -      # add the /1.3 credential to the current profile',
  ],
  async run({ values, format }) {
    const file = configPath();
    const config = readConfig(file);
    const name =
      stringOption(values, 'profile') ?? (config.profiles[config.current] ? config.current : 'default');
    const previous: Partial<Profile> = config.profiles[name] ?? {};
    const url = stringOption(values, 'url') ?? previous.url;
    if (!url) throw new UsageError('--url is required for a new profile');
    let parsedUrl: URL;
    try {
      parsedUrl = new URL(url);
    } catch {
      throw new UsageError(`--url must be a URL such as https://berth.example.com; got '${url}'`);
    }
    if (parsedUrl.protocol !== 'https:' && parsedUrl.protocol !== 'http:')
      throw new UsageError(`--url must be an http(s) URL; got '${url}'`);
    const profile: Profile = { ...previous, url: parsedUrl.href.replace(/\/$/, '') };
    let token = secretOption(stringOption(values, 'token'));
    const email = stringOption(values, 'email');
    const link = secretOption(stringOption(values, 'link'));
    if (token === undefined && (email !== undefined || link !== undefined)) {
      const password = secretOption(stringOption(values, 'password')) ?? process.env.BERTH_PASSWORD;
      if (link === undefined && !password)
        throw new UsageError('--email needs --password - (read from stdin) or BERTH_PASSWORD');
      const api = new Api({ name, ...profile });
      token = await tokenBySignIn(
        api,
        link !== undefined ? { link } : { email: email!, password: password! },
      );
    }
    const toolsKey = secretOption(stringOption(values, 'tools-key'));
    const dbUser = stringOption(values, 'db-user');
    const dbPassword = secretOption(stringOption(values, 'db-password'));
    if (token !== undefined) profile.token = token;
    if (toolsKey !== undefined) profile.tools_key = toolsKey;
    if (dbUser !== undefined) profile.db_user = dbUser;
    if (dbPassword !== undefined) profile.db_password = dbPassword;
    let user: User | undefined;
    if (profile.token) user = await new Api({ name, ...profile }).data<User>('GET', '/api/v1/user');
    config.profiles[name] = profile;
    config.current = name;
    writeConfig(config, file);
    const summary = {
      profile: name,
      url: profile.url,
      email: user?.email ?? null,
      credentials: {
        token: Boolean(profile.token),
        tools_key: Boolean(profile.tools_key),
        db_api: Boolean(profile.db_user && profile.db_password),
      },
      config: file,
    };
    if (format === 'json') printJson(summary);
    else {
      print(
        `Logged in to ${out('bold', profile.url)}${user ? ` as ${out('bold', user.email)}` : ''} (profile ${name}).`,
      );
      const have = Object.entries(summary.credentials)
        .filter(([, v]) => v)
        .map(([k]) => k);
      print(`Credentials stored: ${have.length ? have.join(', ') : 'none'} in ${file}`);
    }
  },
};

const logout: Command = {
  name: 'logout',
  summary: 'forget a profile and its credentials',
  usage: '[--profile NAME]',
  examples: ['berth logout', 'berth logout --profile staging'],
  run({ values, format }) {
    const file = configPath();
    const config = readConfig(file);
    const name = stringOption(values, 'profile') ?? config.current;
    if (!config.profiles[name]) throw new UsageError(`no profile '${name}'`);
    delete config.profiles[name];
    if (config.current === name) config.current = Object.keys(config.profiles)[0] ?? 'default';
    writeConfig(config, file);
    if (format === 'json') printJson({ removed: name, current: config.current });
    else print(`Logged out of profile ${name}.`);
    return Promise.resolve();
  },
};

const whoami: Command = {
  name: 'whoami',
  summary: 'the signed-in user, the profile and its teams',
  usage: '',
  examples: ['berth whoami', 'berth whoami --output json'],
  async run({ api, profile, format }) {
    const user = await api().data<User>('GET', '/api/v1/user');
    const p = profile();
    if (format === 'json') {
      printJson({ ...user, profile: p.name, url: p.url });
      return;
    }
    print(`${out('bold', user.email)} on ${p.url} (profile ${p.name})`);
    print(
      table(
        ['TEAM', 'ID', 'ROLE'],
        user.teams.map((t) => [t.name, t.id, t.role]),
      ),
    );
  },
};

const teams: Command = {
  name: 'teams',
  summary: 'your teams',
  usage: '',
  examples: ['berth teams'],
  async run({ api, format }) {
    const list = await api().data<Team[]>('GET', '/api/v1/teams');
    if (format === 'json') printJson(list);
    else
      print(
        table(
          ['ID', 'NAME', 'ROLE'],
          list.map((t) => [t.id, t.name, t.role ?? '']),
        ),
      );
  },
};

export const accountCommands = [login, logout, whoami, teams];
