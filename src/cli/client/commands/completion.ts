// Shell completion scripts, generated from the command table.
import { UsageError } from '../http.js';
import type { Command } from '../command.js';

const SERVER = ['serve', 'admin'];

function table(commands: readonly Command[]): {
  top: string[];
  subs: Record<string, string[]>;
  flags: Record<string, string[]>;
} {
  const top = new Set<string>(SERVER);
  const subs: Record<string, string[]> = {
    admin: [
      'create-user',
      'create-credential',
      'list-credentials',
      'revoke-credential',
      'set-credits',
      'maintenance',
    ],
  };
  const flags: Record<string, string[]> = {};
  for (const c of commands) {
    const [first, second] = c.name.split(' ') as [string, string | undefined];
    top.add(first);
    if (second) (subs[first] ??= []).push(second);
    flags[c.name] = ['--profile', '--output', '--help', ...Object.keys(c.options ?? {}).map((o) => `--${o}`)];
  }
  return { top: [...top], subs, flags };
}

function bash(t: ReturnType<typeof table>): string {
  const cases = Object.entries(t.flags)
    .map(([name, flags]) => `    '${name}') flags='${flags.join(' ')}' ;;`)
    .join('\n');
  const subCases = Object.entries(t.subs)
    .map(([group, list]) => `    ${group}) subs='${list.join(' ')}' ;;`)
    .join('\n');
  return `# berth completion for bash: source <(berth completion bash)
_berth() {
  local cur=\${COMP_WORDS[COMP_CWORD]} first=\${COMP_WORDS[1]} second=\${COMP_WORDS[2]} subs='' flags=''
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W '${t.top.join(' ')}' -- "$cur")); return
  fi
  case "$first" in
${subCases}
  esac
  if [ -n "$subs" ] && [ "$COMP_CWORD" -eq 2 ]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur")); return
  fi
  local name="$first"; [ -n "$subs" ] && name="$first $second"
  case "$name" in
${cases}
  esac
  if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "$flags" -- "$cur")); return; fi
  COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o default -F _berth berth
`;
}

function zsh(t: ReturnType<typeof table>): string {
  return `#compdef berth
# berth completion for zsh: source <(berth completion zsh)
${bash(t)
  .split('\n')
  .filter((l) => !l.startsWith('#'))
  .join('\n')}`.replace(/^/, 'autoload -U +X bashcompinit && bashcompinit\n');
}

function fish(t: ReturnType<typeof table>): string {
  const lines = ['# berth completion for fish: berth completion fish | source', 'complete -c berth -f'];
  lines.push(`complete -c berth -n __fish_use_subcommand -a '${t.top.join(' ')}'`);
  for (const [group, list] of Object.entries(t.subs))
    lines.push(`complete -c berth -n '__fish_seen_subcommand_from ${group}' -a '${list.join(' ')}'`);
  for (const [name, flags] of Object.entries(t.flags)) {
    const last = name.split(' ').at(-1);
    for (const flag of flags)
      lines.push(`complete -c berth -n '__fish_seen_subcommand_from ${last}' -l ${flag.slice(2)}`);
  }
  return lines.join('\n') + '\n';
}

/**
 * The completion command over the whole command table, which includes it: the table is handed in
 * (read when the command runs) rather than imported, which would be an import cycle.
 */
const completion = (commands: () => readonly Command[]): Command => ({
  name: 'completion',
  summary: 'print a shell completion script',
  usage: 'bash|zsh|fish',
  examples: [
    'source <(berth completion bash)',
    'berth completion zsh > "${fpath[1]}/_berth"',
    'berth completion fish | source',
  ],
  run({ positionals }) {
    const shell = positionals[0];
    const t = table(commands());
    if (shell === 'bash') process.stdout.write(bash(t));
    else if (shell === 'zsh') process.stdout.write(zsh(t));
    else if (shell === 'fish') process.stdout.write(fish(t));
    else throw new UsageError('usage: berth completion bash|zsh|fish');
    return Promise.resolve();
  },
});

export const completionCommands = (commands: () => readonly Command[]): Command[] => [completion(commands)];
