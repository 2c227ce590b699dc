#!/usr/bin/env node
// The `berth` command: serve, and admin tasks against the same store; the client commands (apply,
// deploy, logs, …, in ./client/) talk to a Berth server over its APIs and load only when named.
import { parseArgs } from 'node:util';
import path from 'node:path';
import { CONFIG_VARIABLES, ConfigError, loadConfig, type ConfigOverrides } from '../config/index.js';
import type { CredentialKind, Role } from '../db/schema/foundation.js';
import { CLIENT_COMMAND_NAMES, CLIENT_COMMANDS } from './client/names.js';

const KINDS: CredentialKind[] = ['api_token', 'tools_key', 'db_api'];

const HELP = `berth — self-hostable cloud platform

Usage:
  berth serve [flags]                 start the API server and its background work
  berth admin create-user --email E --team T [--role owner|member] [--password-stdin] [--sign-in-link]
                                      create a user (and the team if needed); prints its credentials as JSON,
                                      with a first sign-in link if asked; the password is read from stdin
  berth admin set-password --email E  set a user's password, read from stdin (their other sessions go on)
  berth admin sign-in-link --email E  print a one-time sign-in link for the user (valid 15 minutes)
  berth admin outbox --email E        the account mail (sign-in links, invitations) not sent by SMTP
  berth admin create-credential --email E --kind api_token|tools_key|db_api [--name N]
                                      issue one more credential; prints it once as JSON
  berth admin list-credentials --email E
                                      list a user's credentials (never their secrets)
  berth admin revoke-credential --id N
                                      revoke a credential at once
  berth admin set-credits --email E --credits N|default
                                      give one user a monthly tools allowance other than the server-wide one
  berth admin maintenance on|off      put every replica in (or out of) maintenance mode (503)
  berth admin audit [--team T] [--action A] [--actor E] [--since TIME] [--until TIME] [--limit N] [--json]
                                      the audit log of every team (newest first); --action takes a
                                      prefix ending in * (application.*); a table, or JSON with --json
  berth admin stop-all                stop what serves the applications (replicas, edge, services,
                                      databases) while Berth is down; the next berth serve starts them
  berth admin k8s-check [--json]      whether the kubernetes runtime driver's cluster (--kubeconfig,
                                      BERTH_KUBECONFIG) is reachable and grants every right Berth needs,
                                      each missing one named; exit 1 when not
  berth admin backup --to DIR|s3://BUCKET/PREFIX
                                      a backup of the whole platform while Berth serves (store, sealed
                                      key, managed databases, objects, volumes, releases); a second
                                      run to the same place copies only what changed; passphrase from
                                      BERTH_BACKUP_PASSPHRASE, else stdin (asked for on a terminal)
  berth admin restore --from DIR|s3://BUCKET/PREFIX
                                      verify a backup and restore it into this (fresh) data dir and
                                      empty store; then berth serve brings everything back
  berth --help                        this text

Client commands (against a Berth server; berth login first, or BERTH_URL and BERTH_TOKEN):
${CLIENT_COMMANDS.map(([name, summary]) => `  berth ${name.padEnd(29)} ${summary}`).join('\n')}
  berth COMMAND --help                each client command's options and examples (docs/cli.md)

Flags (every command; each overrides its environment variable):
${Object.values(CONFIG_VARIABLES)
  .map((v) => `  --${v.flag.padEnd(24)} ${v.env}: ${v.doc}`)
  .join('\n')}
`;

function configOptions() {
  return Object.fromEntries(
    Object.values(CONFIG_VARIABLES).map((v) => [v.flag, { type: 'string' as const }]),
  );
}

function overridesFrom(values: Record<string, unknown>): ConfigOverrides {
  const overrides: ConfigOverrides = {};
  for (const [key, variable] of Object.entries(CONFIG_VARIABLES)) {
    const value = values[variable.flag];
    if (typeof value === 'string') overrides[key as keyof ConfigOverrides] = value;
  }
  return overrides;
}

/** A secret given on standard input (never as an argument, which `ps` shows), without its final newline. */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

/** The backup passphrase: stdin when it is a pipe, else asked for on the terminal without echo. */
async function readPassphrase(): Promise<string> {
  if (!process.stdin.isTTY) return readStdin();
  process.stderr.write('Backup passphrase: ');
  process.stdin.setRawMode(true);
  let text = '';
  try {
    for await (const chunk of process.stdin) {
      for (const char of (chunk as Buffer).toString('utf8')) {
        if (char === '\r' || char === '\n') return text;
        if (char === '\u0003') fail('cancelled');
        if (char === '\u007f') text = text.slice(0, -1);
        else text += char;
      }
    }
    return text;
  } finally {
    process.stdin.setRawMode(false);
    process.stdin.pause();
    process.stderr.write('\n');
  }
}

function fail(message: string): never {
  process.stderr.write(`berth: ${message}\n`);
  process.exit(2);
}

/** Flags whose value is the next argument: the server's and the client's global ones. */
const VALUE_FLAGS = new Set([
  ...Object.values(CONFIG_VARIABLES).map((v) => `--${v.flag}`),
  ...['email', 'team', 'role', 'kind', 'name', 'id', 'credits', 'profile', 'output', 'to', 'from'].map(
    (f) => `--${f}`,
  ),
  ...['action', 'actor', 'since', 'until', 'limit'].map((f) => `--${f}`),
]);

/** The command word: the first argument that is neither a flag nor a flag's value. */
function commandWord(argv: string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (VALUE_FLAGS.has(arg)) i++;
    else if (arg === '--') return undefined;
    else if (!arg.startsWith('-')) return arg;
  }
  return undefined;
}

async function main(argv: string[]): Promise<void> {
  const word = commandWord(argv);
  if (word !== undefined && CLIENT_COMMAND_NAMES.has(word)) {
    const { runClient } = await import('./client/index.js');
    process.exitCode = await runClient(argv);
    return;
  }
  if (word !== undefined && !['serve', 'admin', 'help'].includes(word))
    fail(`unknown command '${word}'; see berth --help`);
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...configOptions(),
      help: { type: 'boolean', short: 'h' },
      email: { type: 'string' },
      team: { type: 'string' },
      role: { type: 'string' },
      kind: { type: 'string' },
      name: { type: 'string' },
      id: { type: 'string' },
      credits: { type: 'string' },
      action: { type: 'string' },
      actor: { type: 'string' },
      since: { type: 'string' },
      until: { type: 'string' },
      limit: { type: 'string' },
      to: { type: 'string' },
      from: { type: 'string' },
      'password-stdin': { type: 'boolean' },
      'sign-in-link': { type: 'boolean' },
      json: { type: 'boolean' },
    },
  });
  const [command, sub, arg] = positionals;
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(HELP);
    return;
  }
  const config = loadConfig(process.env, overridesFrom(values));

  // The server's modules (routes, engines) load only for `serve`: admin commands start in half the time.
  if (command === 'serve') {
    const { tuneHeapForServing } = await import('../heap-tuning.js');
    tuneHeapForServing();
    const { startServer, stopOnSignals } = await import('../main.js');
    await startServer(config, { onStarted: stopOnSignals });
    return;
  }
  if (command !== 'admin') fail(`unknown command '${command}'; see berth --help`);

  // The cluster only, not Berth's store: it checks a cluster before Berth is set to use it.
  if (sub === 'k8s-check') {
    const { runK8sCheck } = await import('./k8s-check.js');
    const streams = { stdout: process.stdout, stderr: process.stderr };
    process.exitCode = await runK8sCheck(config, { json: values.json === true, ...streams });
    return;
  }

  if (sub === 'backup' || sub === 'restore') {
    const target = sub === 'backup' ? values.to : values.from;
    if (!target)
      fail(
        sub === 'backup'
          ? '--to DIR or s3://bucket/prefix is required'
          : '--from DIR or s3://bucket/prefix is required',
      );
    const passphrase = config.backupPassphrase ?? (await readPassphrase());
    if (passphrase === '') fail('the backup passphrase is empty (BERTH_BACKUP_PASSPHRASE or stdin): refused');
    const backup = await import('../backup.js');
    const progress = (line: string) => process.stderr.write(`berth: ${line}\n`);
    const where = backup.backupTarget(config, target);
    if (sub === 'restore') {
      // Before the context: it would make a new key and migrate a new store.
      const restored = await backup.restoreFoundation(config, where, passphrase, progress);
      const { createContext } = await import('../context.js');
      const ctx = await createContext(config, {});
      try {
        await backup.restoreDatabases(ctx, restored, progress);
      } finally {
        await ctx.close();
      }
      process.stdout.write(
        JSON.stringify({ restored: where.description, created_at: restored.manifest.created_at }, null, 2) +
          '\n',
      );
      return;
    }
    const { createContext } = await import('../context.js');
    const ctx = await createContext(config, {});
    try {
      const manifest = await backup.runBackup(ctx, where, passphrase, progress);
      process.stdout.write(
        JSON.stringify(
          { to: where.description, created_at: manifest.created_at, ...manifest.stats },
          null,
          2,
        ) + '\n',
      );
    } finally {
      // The instances this process looked at are the serving Berth's: they run on.
      await ctx.close({ keepRunning: true });
    }
    return;
  }

  const { createContext } = await import('../context.js');
  const ctx = await createContext(config, {});
  try {
    // Every change an admin command makes is recorded as the operator's (issue 31, item 2).
    await ctx.services.audit.asOperator(() => admin());
  } finally {
    await ctx.close();
  }

  async function admin(): Promise<void> {
    const print = (value: unknown) => process.stdout.write(JSON.stringify(value, null, 2) + '\n');
    const userByEmail = async () => {
      if (!values.email) fail('--email is required');
      const user = await ctx.identity.findUserByEmail(values.email);
      if (!user) fail(`no user with e-mail ${values.email}`);
      return user;
    };
    switch (sub ?? '') {
      case 'create-user': {
        if (!values.email || !values.team) fail('--email and --team are required');
        const role = (values.role ?? 'owner') as Role;
        if (role !== 'owner' && role !== 'member') fail('--role must be owner or member');
        const password = values['password-stdin'] ? await readStdin() : undefined;
        const created = await ctx.identity.createUser({ email: values.email, team: values.team, role });
        if (password !== undefined) await ctx.services.accounts.forcePassword(created.user_id, password);
        const link = values['sign-in-link']
          ? await ctx.services.accounts.signInLinkFor(created.user_id)
          : undefined;
        print({ ...created, ...(link ? { sign_in_link: link } : {}) });
        break;
      }
      case 'set-password': {
        const user = await userByEmail();
        await ctx.services.accounts.forcePassword(user.id, await readStdin());
        print({ email: user.email, password: 'set' });
        break;
      }
      case 'sign-in-link': {
        const user = await userByEmail();
        print({ email: user.email, sign_in_link: await ctx.services.accounts.signInLinkFor(user.id) });
        break;
      }
      case 'outbox': {
        const user = await userByEmail();
        print(await ctx.services.accounts.unsentMail(user.id));
        break;
      }
      case 'create-credential': {
        const kind = values.kind as CredentialKind;
        if (!KINDS.includes(kind)) fail(`--kind must be one of ${KINDS.join(', ')}`);
        const user = await userByEmail();
        print(await ctx.identity.issueCredential(user.id, kind, values.name ?? 'cli'));
        break;
      }
      case 'list-credentials': {
        const user = await userByEmail();
        print(await ctx.identity.listCredentials(user.id));
        break;
      }
      case 'revoke-credential': {
        const id = Number(values.id);
        if (!Number.isInteger(id) || id < 1) fail('--id must be a credential id');
        await ctx.identity.revokeCredential(undefined, id);
        print({ revoked: id });
        break;
      }
      case 'set-credits': {
        const text = values.credits ?? '';
        const credits = text === 'default' ? null : /^\d{1,9}$/.test(text) ? Number(text) : undefined;
        if (credits === undefined) fail('--credits must be a whole number of at least 0, or default');
        const user = await userByEmail();
        // The tools service's own ledger (its engines start only when a conversion needs them).
        const ledger = ctx.services.tools.credits;
        await ledger.setAllowance(user.id, credits);
        print({ email: user.email, ...(await ledger.balance(user.id)) });
        break;
      }
      case 'maintenance': {
        if (arg !== 'on' && arg !== 'off') fail('usage: berth admin maintenance on|off');
        await ctx.maintenance.set(arg === 'on');
        print({ maintenance: arg });
        break;
      }
      case 'stop-all': {
        const { stopDataPlane } = await import('../lifecycle.js');
        print(await stopDataPlane(ctx));
        break;
      }
      case 'audit': {
        const { auditQueryOf, formatAuditTable } = await import('./audit.js');
        const query = auditQueryOf(values);
        if (typeof query === 'string') fail(query);
        const entries = await ctx.services.audit.all(query);
        if (values.json) print(entries);
        else process.stdout.write(formatAuditTable(entries));
        break;
      }
      default:
        fail(`unknown admin command '${sub ?? ''}'; see berth --help`);
    }
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof ConfigError) fail(error.message);
  // A refused value names its field (`password: A password has at least 10 characters`).
  const fields = (error as { errors?: Record<string, string[]> }).errors;
  const detail = fields
    ? Object.entries(fields)
        .map(([field, messages]) => `${field}: ${messages.join('; ')}`)
        .join('\n')
    : undefined;
  process.stderr.write(`berth: ${detail ?? (error instanceof Error ? error.message : String(error))}\n`);
  process.exit(1);
});

export const CLI_ENTRY = path.resolve(import.meta.dirname, 'index.js');
