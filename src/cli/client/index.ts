// The `berth` client: the commands that talk to a Berth server over its APIs. `src/cli/index.ts`
// loads this module only for these commands.
import { parseArgs } from 'node:util';
import { GLOBAL_OPTIONS, makeContext, type Command, type Options } from './command.js';
import { ApiError, UsageError } from './http.js';
import { err, printJson } from './output.js';
import { CLIENT_COMMANDS } from './names.js';
import { accountCommands } from './commands/account.js';
import { applyCommands } from './commands/apply.js';
import { appCommands } from './commands/apps.js';
import { dbCommands } from './commands/db.js';
import { storageCommands } from './commands/storage.js';
import { toolsCommands } from './commands/tools.js';
import { completionCommands } from './commands/completion.js';

export const COMMANDS: Command[] = [
  ...accountCommands,
  ...applyCommands,
  ...appCommands,
  ...dbCommands,
  ...storageCommands,
  ...toolsCommands,
  // The whole table, this command included, once it exists.
  ...completionCommands(() => COMMANDS),
];

const GROUPS = new Set(COMMANDS.filter((c) => c.name.includes(' ')).map((c) => c.name.split(' ')[0]!));

function optionUsage(options: Options): string {
  return Object.entries(options)
    .map(
      ([name, o]) => `  ${o.short ? `-${o.short}, ` : '    '}--${name}${o.type === 'string' ? ' VALUE' : ''}`,
    )
    .join('\n');
}

export function commandHelp(command: Command): string {
  const lines = [
    `berth ${command.name} — ${command.summary}`,
    '',
    `Usage: berth ${command.name} ${command.usage}`.trimEnd(),
  ];
  if (command.details) lines.push('', command.details);
  if (command.options && Object.keys(command.options).length > 0)
    lines.push('', 'Options:', optionUsage(command.options));
  lines.push(
    '',
    'Every command: --profile NAME, --output json|human (or --json), --help.',
    'Environment: BERTH_URL, BERTH_TOKEN, BERTH_TOOLS_KEY, BERTH_DB_USER, BERTH_DB_PASSWORD, BERTH_PROFILE, NO_COLOR.',
  );
  if (command.examples?.length) lines.push('', 'Examples:', ...command.examples.map((e) => `  ${e}`));
  return lines.join('\n') + '\n';
}

function groupHelp(group: string): string {
  const summary = CLIENT_COMMANDS.find(([name]) => name === group)?.[1] ?? '';
  const members = COMMANDS.filter((c) => c.name.startsWith(`${group} `));
  const width = Math.max(...members.map((c) => `${c.name} ${c.usage}`.length));
  return [
    `berth ${group} — ${summary}`,
    '',
    'Commands:',
    ...members.map((c) => `  berth ${`${c.name} ${c.usage}`.padEnd(width)}  ${c.summary}`),
    '',
    `See berth ${group} COMMAND --help.`,
    '',
  ].join('\n');
}

/** The index of the command word: the first argument that is neither a global flag nor its value. */
function commandIndex(argv: string[]): number {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--profile' || arg === '--output') i++;
    else if (!arg.startsWith('-')) return i;
  }
  return -1;
}

function fail(message: string, code: number): number {
  process.stderr.write(`${err('red', 'berth:')} ${message}\n`);
  return code;
}

/** One line: the API's message and, for a field error, each field with its messages. */
export function describeError(error: ApiError): string {
  const fields = Object.entries(error.errors).map(([field, messages]) => `${field}: ${messages.join(' ')}`);
  const status = error.status ? ` (${error.code ?? error.status})` : '';
  return `${error.message}${status}${fields.length ? ` — ${fields.join('; ')}` : ''}`;
}

export async function runClient(argv: string[]): Promise<number> {
  const split = argv.indexOf('--');
  const args = split >= 0 ? argv.slice(0, split) : argv;
  const rest = split >= 0 ? argv.slice(split + 1) : [];
  const at = commandIndex(args);
  const first = args[at] ?? '';
  let name = first;
  let words = 1;
  if (GROUPS.has(first)) {
    const subAt = commandIndex(args.slice(at + 1));
    const sub = subAt >= 0 ? args[at + 1 + subAt] : undefined;
    if (sub === undefined || sub === 'help') {
      process.stdout.write(groupHelp(first));
      return sub === undefined && !args.includes('--help') && !args.includes('-h') ? 2 : 0;
    }
    name = `${first} ${sub}`;
    if (!COMMANDS.some((c) => c.name === name))
      return fail(`unknown ${first} command '${sub}'; see berth ${first} --help`, 2);
    args.splice(at + 1 + subAt, 1);
    words = 1;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) return fail(`unknown command '${first}'; see berth --help`, 2);
  args.splice(at, words);

  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: { ...GLOBAL_OPTIONS, ...command.options },
    });
  } catch (error) {
    return fail(`${(error as Error).message.split('\n')[0]} See berth ${command.name} --help.`, 2);
  }
  if (parsed.values.help) {
    process.stdout.write(commandHelp(command));
    return 0;
  }
  let context;
  try {
    context = makeContext(parsed.values, parsed.positionals, rest);
    return (await command.run(context)) ?? 0;
  } catch (error) {
    const json = context?.format === 'json';
    if (error instanceof UsageError) {
      if (json) printJson({ error: { message: error.message } });
      return fail(error.message, 2);
    }
    if (error instanceof ApiError) {
      if (json)
        printJson({
          error: { message: error.message, status: error.status, code: error.code, errors: error.errors },
        });
      return fail(describeError(error), 1);
    }
    throw error;
  }
}
