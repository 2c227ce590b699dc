// Object storage: the team's storages and the credentials of one.
import type { StorageDetail, TeamStorage } from '../answers.js';
import { requireArg, stringOption, type Command } from '../command.js';
import { clean, out, print, printJson, statusStyle, table } from '../output.js';
import { resolveTeam } from '../resolve.js';

const TEAM = { team: { type: 'string' } } as const;

const list: Command = {
  name: 'storage list',
  summary: "the team's object storages",
  usage: '[--team T]',
  options: TEAM,
  examples: ['berth storage list --team acme'],
  async run({ api: apiOf, values, format }) {
    const api = apiOf();
    const team = await resolveTeam(api, stringOption(values, 'team'));
    const storages = await api.data<TeamStorage[]>(
      'GET',
      `/api/v1/teams/${encodeURIComponent(team.name)}/object-storage`,
    );
    if (format === 'json') return printJson(storages);
    if (storages.length === 0) return print('No object storage.');
    print(
      table(
        ['NAME', 'ZONE', 'STATE', 'BUCKETS', 'USERS'],
        storages.map((s) => [
          s.name,
          s.zone,
          out(statusStyle(s.state), clean(s.state)),
          s.buckets.join(', '),
          s.users.map((u) => u.username).join(', '),
        ]),
      ),
    );
  },
};

const credentials: Command = {
  name: 'storage credentials',
  summary:
    'endpoint and access keys of an object storage (secret keys shown only with --show-secret; owners only)',
  usage: 'NAME [--team T] [--show-secret] [--env]',
  options: { ...TEAM, 'show-secret': { type: 'boolean' }, env: { type: 'boolean' } },
  details: '--env prints AWS_* variables of the first user (with its secret) for eval "$(…)".',
  examples: ['berth storage credentials files', 'eval "$(berth storage credentials files --env)"'],
  async run({ api: apiOf, values, positionals, format }) {
    const api = apiOf();
    const name = requireArg(positionals[0], 'NAME (an object storage)');
    const team = await resolveTeam(api, stringOption(values, 'team'));
    const s = await api.data<StorageDetail>(
      'GET',
      `/api/v1/teams/${encodeURIComponent(team.name)}/object-storage/${encodeURIComponent(name)}`,
    );
    const reveal = values['show-secret'] === true || values.env === true;
    const users = s.users.map((u) => ({
      ...u,
      secret_key: u.secret_key === null ? null : reveal ? u.secret_key : '****',
    }));
    if (values.env === true) {
      const user = users[0];
      if (!user) return print('# no users');
      const quote = (v: string) => `'${v.replace(/'/g, `'\\''`)}'`;
      print(`export AWS_ENDPOINT_URL=${quote(s.endpoint)}`);
      print(`export AWS_REGION=${quote(s.region)}`);
      print(`export AWS_ACCESS_KEY_ID=${quote(user.access_key_id)}`);
      if (user.secret_key) print(`export AWS_SECRET_ACCESS_KEY=${quote(user.secret_key)}`);
      return;
    }
    if (format === 'json') return printJson({ ...s, users });
    print(
      `${out('bold', clean(s.name))}  endpoint ${clean(s.endpoint)}  region ${clean(s.region)}${s.path_style ? '  (path-style)' : ''}`,
    );
    // The endpoint that names this storage (its bucket names are its own): docs/drivers-objectstorage.md.
    print(
      `storage endpoint ${clean(s.endpoints.path)}${s.endpoints.virtual_host ? ` or ${clean(s.endpoints.virtual_host)}` : ''}`,
    );
    print(
      table(
        ['USER', 'ACCESS KEY', 'SECRET KEY'],
        users.map((u) => [u.username, u.access_key_id, u.secret_key ?? '(owners only)']),
      ),
    );
  },
};

export const storageCommands = [list, credentials];
