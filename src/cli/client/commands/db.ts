// Managed databases over `/1.3` with the database API credential of the profile, or over
// `/api/v1/managed-databases` with its API token when it has no such credential (see databaseRoute).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Maintenance, MigrationStatus, Task } from '../answers.js';
import { requireArg, stringOption, type Command, type CommandContext } from '../command.js';
import { UsageError, type Api, type RequestOptions } from '../http.js';
import { clean, err, out, print, printJson, spinner, statusStyle, table } from '../output.js';
import { databaseRoute, getDatabase, listDatabases, resolveDatabase, type DbService } from '../resolve.js';

/**
 * The path and options of a call on one database's operations, with the credential that reaches them
 * (see databaseRoute): `api.json('POST', ...on(api, uuid, '/clone', { json }))`.
 */
function on(
  api: Api,
  uuid: string,
  pathname: string,
  options: RequestOptions = {},
): [string, RequestOptions] {
  const route = databaseRoute(api, uuid);
  return [`${route.path}${pathname}`, { ...options, credential: route.credential }];
}

/** A service object with its passwords masked, unless the user asked for them. */
function masked(service: DbService, reveal: boolean): DbService {
  if (reveal) return service;
  const copy = JSON.parse(JSON.stringify(service)) as DbService;
  copy.service_uri = copy.service_uri.replace(/:\/\/([^:@/]*):[^@]*@/, '://$1:****@');
  if ('password' in copy.service_uri_params) copy.service_uri_params.password = '****';
  for (const u of copy.users) if (u.password !== undefined) u.password = '****';
  return copy;
}

/** The engine's major: UpCloud's service object has it in properties.version. */
function versionOf(service: DbService): string {
  return service.properties.version ?? '';
}

async function target(context: CommandContext): Promise<{ api: Api; service: DbService }> {
  const api = context.api();
  const ref = requireArg(context.positionals[0], 'NAME (a managed database name or uuid)');
  return { api, service: await resolveDatabase(api, ref) };
}

/** Whether a settled database is what was asked for, and the line that says so. */
type Verdict = (service: DbService) => { ok: boolean; text: string };

const runningIsOk: Verdict = (service) => ({ ok: service.state === 'running', text: service.state });

async function waitForState(
  api: Api,
  uuid: string,
  label: string,
  verdict: Verdict = runningIsOk,
  timeoutMs = 30 * 60_000,
): Promise<DbService> {
  const progress = spinner(`${label}: pending`);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const service = await getDatabase(api, uuid);
    progress.update(`${label}: ${clean(service.state)}`);
    if (['running', 'error', 'stopped'].includes(service.state) || Date.now() > deadline) {
      const { ok, text } = verdict(service);
      progress.stop(`${ok ? err('green', '✓') : err('red', '✗')} ${label}: ${clean(text)}`);
      return service;
    }
    await sleep(1000);
  }
}

async function runTask(api: Api, uuid: string, body: unknown, label: string): Promise<Task> {
  let task = await api.json<Task>('POST', ...on(api, uuid, '/tasks', { json: body }));
  const progress = spinner(`${label}…`);
  while (task.success === null) {
    await sleep(1000);
    task = await api.json<Task>('GET', ...on(api, uuid, `/tasks/${encodeURIComponent(task.id)}`));
  }
  progress.stop(`${task.success ? err('green', '✓') : err('red', '✗')} ${label}: ${clean(task.result)}`);
  for (const c of task.result_codes)
    process.stderr.write(`  ${c.code}${c.dbname ? ` (${clean(c.dbname)})` : ''}: ${clean(c.message)}\n`);
  return task;
}

/** A secret given as `-` is read from stdin, so it stays out of the shell history and `ps`. */
function secretValue(value: string | undefined): string | undefined {
  return value === '-' ? fs.readFileSync(0, 'utf8').trim() : value;
}

const list: Command = {
  name: 'db list',
  summary: 'managed databases of your teams',
  usage: '',
  examples: ['berth db list', 'berth db list --output json'],
  async run({ api, format }) {
    const services = await listDatabases(api());
    if (format === 'json') return printJson(services.map((s) => masked(s, false)));
    if (services.length === 0) return print('No managed databases.');
    print(
      table(
        ['NAME', 'TYPE', 'VERSION', 'PLAN', 'ZONE', 'STATE', 'UUID'],
        services.map((s) => [
          s.name,
          s.type,
          versionOf(s),
          s.plan,
          s.zone,
          out(statusStyle(s.state), clean(s.state)),
          s.uuid,
        ]),
      ),
    );
  },
};

const show: Command = {
  name: 'db show',
  summary: 'one managed database: state, version, connection (password masked unless --show-password)',
  usage: 'NAME [--show-password]',
  options: { 'show-password': { type: 'boolean' } },
  examples: [
    'berth db show main-db',
    'berth db show main-db --show-password --output json | jq -r .service_uri',
  ],
  async run(context) {
    const { service } = await target(context);
    const shown = masked(service, context.values['show-password'] === true);
    if (context.format === 'json') return printJson(shown);
    print(
      `${out('bold', clean(shown.name))}  ${out(statusStyle(shown.state), clean(shown.state))}${shown.powered ? '' : ' (powered off)'}`,
    );
    print(`  uuid        ${shown.uuid}`);
    print(`  engine      ${shown.type} ${clean(versionOf(shown))}`);
    print(`  plan, zone  ${shown.plan}, ${shown.zone}`);
    print(`  uri         ${clean(shown.service_uri || '—')}`);
  },
};

const clone: Command = {
  name: 'db clone',
  summary: 'clone a managed database (now, or at a point in time) into a new one',
  usage: 'NAME --name NEW [--title T] [--plan P] [--zone Z] [--at ISO-8601] [--wait]',
  options: {
    name: { type: 'string' },
    title: { type: 'string' },
    plan: { type: 'string' },
    zone: { type: 'string' },
    at: { type: 'string' },
    wait: { type: 'boolean' },
  },
  details:
    '--at clones the state at that time (PostgreSQL point-in-time recovery). --wait follows it until running.',
  examples: [
    'berth db clone main-db --name main-db-copy --wait',
    'berth db clone main-db --name before-bug --at 2026-11-25T10:00:00Z',
  ],
  async run(context) {
    const { api, service } = await target(context);
    const name = requireArg(stringOption(context.values, 'name'), '--name NEW');
    const body: Record<string, string> = { name };
    for (const key of ['title', 'plan', 'zone'] as const) {
      const value = stringOption(context.values, key);
      if (value !== undefined) body[key] = value;
    }
    const at = stringOption(context.values, 'at');
    if (at !== undefined) body.recovery_time = at;
    let created = await api.json<DbService>('POST', ...on(api, service.uuid, '/clone', { json: body }));
    if (context.format !== 'json')
      print(
        `Clone ${clean(created.name)} (${created.uuid}) of ${clean(service.name)} created: ${created.state}.`,
      );
    if (context.values.wait === true)
      created = await waitForState(api, created.uuid, `Clone ${created.name}`);
    if (context.format === 'json') printJson(masked(created, false));
    return created.state === 'error' ? 1 : 0;
  },
};

const upgrade: Command = {
  name: 'db upgrade',
  summary: 'upgrade PostgreSQL to a newer major: runs the upgrade check, then the upgrade',
  usage: 'NAME --version V [--check-only] [--wait]',
  options: { version: { type: 'string' }, 'check-only': { type: 'boolean' }, wait: { type: 'boolean' } },
  details: [
    'The upgrade starts only when its upgrade_check task passed. --wait follows it until the database runs',
    'again and exits 1 unless it then runs the new major (a failed upgrade leaves the old one running).',
  ].join('\n'),
  examples: [
    'berth db upgrade main-db --version 17 --check-only',
    'berth db upgrade main-db --version 17 --wait',
  ],
  async run(context) {
    const { api, service } = await target(context);
    const version = requireArg(stringOption(context.values, 'version'), '--version V');
    const task = await runTask(
      api,
      service.uuid,
      { operation: 'upgrade_check', target_version: version },
      `Upgrade check to ${version}`,
    );
    if (!task.success || context.values['check-only'] === true) {
      if (context.format === 'json') printJson(task);
      return task.success ? 0 : 1;
    }
    let upgraded = await api.json<DbService>(
      'POST',
      ...on(api, service.uuid, '/upgrade', { json: { target_version: version } }),
    );
    const done = (s: DbService) => s.state === 'running' && versionOf(s) === version;
    if (context.values.wait === true)
      upgraded = await waitForState(api, service.uuid, `Upgrade of ${service.name} to ${version}`, (s) => ({
        ok: done(s),
        text:
          s.state === 'running'
            ? done(s)
              ? `running PostgreSQL ${version}`
              : `failed; still running PostgreSQL ${versionOf(s)}`
            : s.state,
      }));
    if (context.format === 'json') printJson(masked(upgraded, false));
    else if (context.values.wait === true)
      print(`${clean(service.name)}: ${clean(upgraded.state)}, PostgreSQL ${clean(versionOf(upgraded))}`);
    else
      print(
        `Upgrade of ${clean(service.name)} to ${version} started (${clean(upgraded.state)}); follow it with berth db show ${clean(service.name)}.`,
      );
    if (context.values.wait !== true) return upgraded.state === 'error' ? 1 : 0;
    return done(upgraded) ? 0 : 1;
  },
};

const migrate: Command = {
  name: 'db migrate',
  summary:
    'copy a source server into a managed database (the source URI from --from, - for stdin, or BERTH_SOURCE_URI)',
  usage:
    'NAME (--from URI|- | BERTH_SOURCE_URI=URI) [--method dump|replication] [--ignore-dbs a,b] [--no-ssl] [--check-only] [--wait]',
  options: {
    from: { type: 'string' },
    method: { type: 'string' },
    'ignore-dbs': { type: 'string' },
    'no-ssl': { type: 'boolean' },
    'check-only': { type: 'boolean' },
    wait: { type: 'boolean' },
  },
  details: [
    'A migration check runs first; the migration starts only when it passes. --no-ssl connects to the',
    'source without TLS (the check says when a source has none). --wait follows the migration until every',
    'database is copied (exit 0) or it fails (exit 1); otherwise follow it with berth db migration-status.',
  ].join('\n'),
  examples: [
    'echo "postgres://user:pass@old.example.com:5432/postgres" | berth db migrate main-db --from - --wait',
    'BERTH_SOURCE_URI=mysql://root:pw@old:3306/ berth db migrate shop-db --method dump --check-only',
  ],
  async run(context) {
    const { api, service } = await target(context);
    const source = secretValue(stringOption(context.values, 'from')) ?? process.env.BERTH_SOURCE_URI;
    if (!source)
      throw new UsageError('the source is required: --from URI, --from - (stdin) or BERTH_SOURCE_URI');
    const options: Record<string, string | boolean> = { source_service_uri: source };
    const method = stringOption(context.values, 'method');
    if (method) options.method = method;
    const ignore = stringOption(context.values, 'ignore-dbs');
    if (ignore) options.ignore_dbs = ignore;
    if (context.values['no-ssl'] === true) options.ssl = false;
    const task = await runTask(
      api,
      service.uuid,
      { operation: 'migration_check', migration_check: options },
      'Migration check',
    );
    if (!task.success || context.values['check-only'] === true) {
      if (context.format === 'json') printJson(task);
      return task.success ? 0 : 1;
    }
    // The migration would require TLS the source does not offer: never dropped without being asked.
    if (options.ssl === undefined && task.result_codes.some((c) => c.code === 'SSL_NOT_SUPPORTED')) {
      if (context.format === 'json') printJson(task);
      process.stderr.write(
        `${err('red', 'berth:')} the source does not accept TLS; nothing started. Run again with --no-ssl to migrate without it.\n`,
      );
      return 1;
    }
    const started = await api.json<DbService>(
      'POST',
      ...on(api, service.uuid, '/migration', { json: options }),
    );
    if (context.values.wait !== true) {
      if (context.format === 'json') printJson(masked(started, false));
      else
        print(
          `Migration into ${clean(service.name)} started; see berth db migration-status ${clean(service.name)}.`,
        );
      return 0;
    }
    if (context.format !== 'json') print(`Migration into ${clean(service.name)} started.`);
    const status = await followMigration(api, service);
    if (context.format === 'json') printJson(status);
    else printMigration(service, status);
    return status.status === 'failed' ? 1 : 0;
  },
};

const migrationOf = (api: Api, service: DbService) =>
  api.json<MigrationStatus>('GET', ...on(api, service.uuid, '/migration-status'));

/** Polls the migration until it is no longer running (a replication has then copied every database). */
async function followMigration(api: Api, service: DbService): Promise<MigrationStatus> {
  const progress = spinner(`Migration into ${service.name}: running`);
  for (;;) {
    const s = await migrationOf(api, service);
    const copied = s.databases.filter((d) => d.status === 'done' || d.status === 'syncing').length;
    progress.update(
      `Migration into ${service.name}: ${clean(s.status)}${s.databases.length ? ` (${copied}/${s.databases.length} databases)` : ''}`,
    );
    if (s.status !== 'running') {
      progress.stop(
        `${s.status === 'failed' ? err('red', '✗') : err('green', '✓')} Migration into ${clean(service.name)}: ${clean(s.status)}${s.error ? `: ${clean(s.error)}` : ''}`,
      );
      return s;
    }
    await sleep(1000);
  }
}

function printMigration(service: DbService, s: MigrationStatus): void {
  print(
    `${out('bold', clean(service.name))}: migration ${out(statusStyle(s.status === 'done' ? 'success' : s.status), clean(s.status))}${s.method ? ` (${clean(s.method)})` : ''}${s.error ? `: ${clean(s.error)}` : ''}`,
  );
  if (s.method === 'replication') print(`  ${s.seconds_behind_master}s behind the source`);
  if (s.databases.length)
    print(
      table(
        ['DATABASE', 'METHOD', 'STATUS', 'ERROR'],
        s.databases.map((d) => [d.dbname, d.method, d.status, d.error ?? '']),
      ),
    );
}

const migrationStatus: Command = {
  name: 'db migration-status',
  summary: 'the status of the migration into a managed database',
  usage: 'NAME',
  examples: ['berth db migration-status main-db'],
  async run(context) {
    const { api, service } = await target(context);
    const s = await migrationOf(api, service);
    if (context.format === 'json') return printJson(s);
    printMigration(service, s);
  },
};

const maintenance: Command = {
  name: 'db maintenance',
  summary: 'apply pending maintenance now (the database restarts)',
  usage: 'NAME',
  examples: ['berth db maintenance main-db'],
  async run(context) {
    const { api, service } = await target(context);
    const progress = context.format === 'json' ? undefined : spinner(`Maintenance of ${service.name}…`);
    try {
      const result = await api.json<Maintenance>('POST', ...on(api, service.uuid, '/maintenance'));
      progress?.stop();
      if (context.format === 'json') printJson(result);
      else print(clean(result.message));
    } finally {
      progress?.stop();
    }
  },
};

const CLIENTS: Record<string, string[]> = {
  pg: ['psql'],
  mysql: ['mariadb', 'mysql'],
  valkey: ['valkey-cli', 'redis-cli'],
};

function which(program: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, program);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // next
    }
  }
  return undefined;
}

/** What a client needs to connect, from the service URI: every value checked before it is used. */
function connection(service: DbService) {
  if (!service.service_uri)
    throw new UsageError(`${service.name} has no connection yet (state ${service.state})`);
  const url = new URL(service.service_uri);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const port = url.port;
  const user = decodeURIComponent(url.username);
  const password = decodeURIComponent(url.password);
  const database = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9.:_-]+$/.test(host) || host.startsWith('-') || !/^\d*$/.test(port))
    throw new UsageError(`the server gave an unusable address for ${service.name}`);
  return { uri: service.service_uri, host, port, user, password, database };
}

/**
 * argv and environment for the engine's client. Server values go in the environment or a 0600
 * option file we write; the only options built here are ours (a file path, host and port checked above).
 */
export function clientInvocation(
  service: DbService,
  program: string,
  tmp: string,
): { args: string[]; env: Record<string, string> } {
  const c = connection(service);
  const base = path.basename(program);
  if (base === 'psql')
    return {
      args: [],
      env: {
        PGHOST: c.host,
        PGPORT: c.port,
        PGUSER: c.user,
        PGPASSWORD: c.password,
        PGDATABASE: c.database || 'defaultdb',
        PGSSLMODE: 'prefer',
      },
    };
  if (base === 'mariadb' || base === 'mysql') {
    const file = path.join(tmp, 'client.cnf');
    const quote = (v: string) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
    fs.writeFileSync(
      file,
      `[client]\nhost=${quote(c.host)}\nport=${c.port || 3306}\nuser=${quote(c.user)}\npassword=${quote(c.password)}\ndatabase=${quote(c.database || 'defaultdb')}\n`,
      { mode: 0o600 },
    );
    return { args: [`--defaults-extra-file=${file}`], env: {} };
  }
  const args = ['-h', c.host, '-p', c.port || '6379'];
  if (c.user && c.user !== 'default') args.push('--user', c.user);
  return { args, env: { REDISCLI_AUTH: c.password } };
}

const connect: Command = {
  name: 'db connect',
  summary: "open the engine's client (psql, mariadb/mysql, valkey-cli/redis-cli) on a managed database",
  usage: 'NAME [-- CLIENT-ARGS…]',
  details:
    'The password travels in the environment (or a 0600 option file for MariaDB), never on the command line. Arguments after -- go to the client.',
  examples: ['berth db connect main-db', "berth db connect main-db -- -c 'select 1'"],
  async run(context) {
    const { service } = await target(context);
    const programs = CLIENTS[service.type] ?? [];
    const program = programs.map(which).find((p) => p !== undefined);
    if (!program)
      throw new UsageError(
        `install ${programs.join(' or ')} to connect to ${service.name} (${service.type})`,
      );
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-connect-'));
    try {
      const { args, env } = clientInvocation(service, program, tmp);
      // The user's own arguments come last; the client never receives a server value as an option.
      const child = spawn(program, [...args, ...context.rest], {
        stdio: 'inherit',
        env: { ...process.env, ...env },
      });
      return await new Promise<number>((resolve) => {
        child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
        child.on('error', () => resolve(1));
      });
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  },
};

export const dbCommands = [list, show, clone, upgrade, migrate, migrationStatus, maintenance, connect];
