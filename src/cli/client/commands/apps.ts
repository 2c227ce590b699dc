// Applications: list, status, deploy, rollback, deployments, logs, exec, suspend, resume, delete,
// scheduled deletion, push to deploy's webhook.
import { createInterface } from 'node:readline/promises';
import { integerOption, requireArg, stringOption, type Command, type CommandContext } from '../command.js';
import type {
  AppStatus,
  AppSummary,
  DeletedApplication,
  Deployment,
  ExecResult,
  GitWebhook,
  LogLine,
  Schedule,
} from '../answers.js';
import { followDeployment } from '../follow.js';
import { events, UsageError, type Api } from '../http.js';
import { clean, out, print, printJson, statusStyle, table } from '../output.js';
import { resolveApp } from '../resolve.js';
import { interactive } from './apply.js';
import { uploadSource } from '../upload.js';

const TEAM = { team: { type: 'string' } } as const;

async function appOf(context: CommandContext): Promise<{ api: Api; app: AppSummary }> {
  const api = context.api();
  const ref = requireArg(context.positionals[0], 'APP (an application name or id)');
  return { api, app: await resolveApp(api, ref, stringOption(context.values, 'team')) };
}

const ago = (iso: string | null | undefined) => {
  if (!iso) return '';
  const seconds = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)}m ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)}h ago`;
  return `${Math.round(seconds / 86400)}d ago`;
};

const coloured = (status: string) => out(statusStyle(status), clean(status));

function deploymentRow(d: Deployment): unknown[] {
  return [
    d.id,
    coloured(d.status),
    d.step ?? '',
    d.reason ?? '',
    d.branch ?? '',
    d.commit_sha ? d.commit_sha.slice(0, 10) : '',
    d.duration_seconds != null ? `${d.duration_seconds}s` : '',
    ago(d.created_at),
  ];
}

async function deployAndMaybeWait(
  context: CommandContext,
  api: Api,
  app: AppSummary,
  deployment: Deployment,
  verb: string,
): Promise<number> {
  if (context.values.wait !== true) {
    if (context.format === 'json') printJson(deployment);
    else
      print(
        `${verb} ${deployment.id} of ${clean(app.name)} queued; see berth deployments ${clean(app.name)} (or add --wait).`,
      );
    return 0;
  }
  if (context.format !== 'json') print(`${verb} ${deployment.id} of ${clean(app.name)} queued.`);
  const ended = await followDeployment(api, app.id, deployment.id, { quiet: context.format === 'json' });
  if (context.format === 'json') printJson(ended);
  return ended.status === 'success' ? 0 : 1;
}

const apps: Command = {
  name: 'apps',
  summary: 'list applications of your teams',
  usage: '[--team T]',
  options: TEAM,
  examples: ['berth apps', 'berth apps --team acme --output json'],
  async run({ api, values, format }) {
    const list = await api().data<AppSummary[]>('GET', '/api/v1/applications', {
      query: { team: stringOption(values, 'team') },
    });
    if (format === 'json') return printJson(list);
    if (list.length === 0) return print('No applications.');
    print(
      table(
        ['ID', 'NAME', 'TEAM', 'TYPE', 'HEALTH', 'DELETION'],
        list.map((a) => [
          a.id,
          a.name,
          a.team_id,
          a.type,
          a.health_check?.status ?? '',
          a.scheduled_deletion_at ?? '',
        ]),
      ),
    );
  },
};

const status: Command = {
  name: 'status',
  summary: "an application's status, replicas, health, hostnames and latest deployment",
  usage: 'APP [--team T]',
  options: TEAM,
  examples: ['berth status shop', 'berth status shop --output json | jq .replicas'],
  async run(context) {
    const { api, app } = await appOf(context);
    const s = await api.data<AppStatus>('GET', `/api/v1/applications/${app.id}/status`);
    if (context.format === 'json') return printJson(s);
    print(
      `${out('bold', clean(s.name))}  ${coloured(s.status)}${s.status_reason ? ` (${clean(s.status_reason)})` : ''}${s.suspended ? out('yellow', ' suspended') : ''}`,
    );
    print(`  replicas     ${s.replicas.running}/${s.replicas.desired} running`);
    print(`  health       ${s.health_check.enabled ? coloured(s.health_check.status) : 'not monitored'}`);
    print(
      `  release      ${clean(s.release ?? '—')}${s.live_deployment_id ? ` (deployment ${s.live_deployment_id})` : ''}`,
    );
    print(`  hostnames    ${s.hostnames.map(clean).join(', ') || '—'}`);
    const d = s.latest_deployment;
    if (d)
      print(
        `  latest       deployment ${d.id} ${coloured(d.status)}${d.step ? ` (${d.step})` : ''} ${ago(d.created_at)}${d.error ? `: ${clean(d.error)}` : ''}`,
      );
    if (s.recent_events.length) {
      print();
      print(out('bold', 'Recent events'));
      for (const e of s.recent_events.slice(0, 10))
        print(`  ${e.at}  ${clean(e.kind)}  ${clean(e.instance)}  ${clean(e.message)}`);
    }
  },
};

const deploy: Command = {
  name: 'deploy',
  summary:
    'deploy an application (fetch, build, roll out), or upload its source (--source); --wait follows it',
  usage: 'APP [--branch B] [--skip-build] [--wait] [--team T] | APP --source DIR|FILE [--team T]',
  options: {
    ...TEAM,
    branch: { type: 'string' },
    'skip-build': { type: 'boolean' },
    wait: { type: 'boolean' },
    source: { type: 'string' },
  },
  details: [
    '--source DIR packs the directory: the files git lists (tracked and untracked, less .gitignore) when it',
    'is in a git work tree, else every file less those its .gitignore files exclude; then less the patterns',
    'of DIR/.berthignore (gitignore syntax); never .git/. --source FILE sends a .tar.gz, .tgz or .zip as it',
    'is. At most 100 MB is sent. The deployment of the upload is then followed, as with --wait.',
    'Exit codes with --wait or --source: 0 the deployment succeeded, 1 it failed (or the upload was refused).',
  ].join('\n'),
  examples: [
    'berth deploy shop --wait',
    'berth deploy shop --branch release --skip-build',
    'berth deploy shop --source .',
    'berth deploy shop --source build/shop.tar.gz',
  ],
  async run(context) {
    const source = stringOption(context.values, 'source');
    if (
      source !== undefined &&
      (context.values.branch !== undefined || context.values['skip-build'] === true)
    )
      throw new UsageError('--source deploys what it sends: it takes neither --branch nor --skip-build');
    const { api, app } = await appOf(context);
    if (source !== undefined) {
      const uploaded = await uploadSource(api, app.id, source);
      if (!uploaded.deployment)
        throw new UsageError('the server stored the source but started no deployment');
      return deployAndMaybeWait(
        { ...context, values: { ...context.values, wait: true } },
        api,
        app,
        uploaded.deployment,
        'Deployment',
      );
    }
    const branch = stringOption(context.values, 'branch');
    const deployment = await api.data<Deployment>('POST', `/api/v1/applications/${app.id}/deploy`, {
      json: { ...(branch ? { branch } : {}), skip_build: context.values['skip-build'] === true },
    });
    return deployAndMaybeWait(context, api, app, deployment, 'Deployment');
  },
};

const rollback: Command = {
  name: 'rollback',
  summary: 'roll back to a kept release (the one before the live one, or DEPLOYMENT)',
  usage: 'APP [DEPLOYMENT] [--wait] [--team T]',
  options: { ...TEAM, wait: { type: 'boolean' } },
  examples: ['berth rollback shop', 'berth rollback shop 41 --wait'],
  async run(context) {
    const { api, app } = await appOf(context);
    const target = context.positionals[1];
    if (target !== undefined && !/^\d+$/.test(target))
      throw new UsageError(`DEPLOYMENT must be a deployment id; got '${target}'`);
    const deployment = await api.data<Deployment>('POST', `/api/v1/applications/${app.id}/rollback`, {
      json: target ? { deployment_id: Number(target) } : {},
    });
    return deployAndMaybeWait(context, api, app, deployment, 'Rollback');
  },
};

const deployments: Command = {
  name: 'deployments',
  summary: "an application's deployments, newest first",
  usage: 'APP [--limit N] [--status S] [--team T]',
  options: { ...TEAM, limit: { type: 'string' }, status: { type: 'string' } },
  examples: ['berth deployments shop', 'berth deployments shop --status failed --limit 5'],
  async run(context) {
    const { api, app } = await appOf(context);
    const list = await api.data<Deployment[]>('GET', `/api/v1/applications/${app.id}/deployments`, {
      query: {
        per_page: integerOption(context.values, 'limit', 1) ?? 15,
        status: stringOption(context.values, 'status'),
      },
    });
    if (context.format === 'json') return printJson(list);
    if (list.length === 0) return print('No deployments.');
    print(
      table(
        ['ID', 'STATUS', 'STEP', 'REASON', 'BRANCH', 'COMMIT', 'TOOK', 'CREATED'],
        list.map(deploymentRow),
      ),
    );
  },
};

function logLine(l: LogLine, json: boolean): string {
  if (json) return JSON.stringify(l);
  const source = l.source ? out(l.stream === 'stderr' ? 'red' : 'cyan', `[${clean(l.source)}]`) + ' ' : '';
  return `${out('dim', l.at)} ${source}${clean(l.line)}`;
}

const logs: Command = {
  name: 'logs',
  summary: "an application's logs; -f follows new lines until interrupted",
  usage: 'APP [-f] [--tail N] [--since D] [--team T]',
  options: {
    ...TEAM,
    follow: { type: 'boolean', short: 'f' },
    tail: { type: 'string' },
    since: { type: 'string' },
  },
  details: '--since takes ISO 8601 or 30s, 15m, 2h, 1d. With --output json, one JSON object per line.',
  examples: ['berth logs shop --tail 50', 'berth logs shop -f --since 15m'],
  async run(context) {
    const { api, app } = await appOf(context);
    const json = context.format === 'json';
    const query = {
      tail: integerOption(context.values, 'tail', 1),
      since: stringOption(context.values, 'since'),
    };
    if (context.values.follow !== true) {
      const lines = await api.data<LogLine[]>('GET', `/api/v1/applications/${app.id}/logs`, { query });
      if (json) return printJson(lines);
      for (const l of lines) print(logLine(l, false));
      return;
    }
    const controller = new AbortController();
    process.once('SIGINT', () => controller.abort());
    process.once('SIGTERM', () => controller.abort());
    try {
      const response = await api.send('GET', `/api/v1/applications/${app.id}/logs`, {
        query: { ...query, follow: true },
        accept: 'text/event-stream',
        signal: controller.signal,
      });
      for await (const event of events(response)) {
        if (event.event === 'line') print(logLine(event.data as LogLine, json));
      }
    } catch (error) {
      if ((error as Error).name !== 'AbortError') throw error;
    }
  },
};

/** Arguments after `--` as one shell command: each quoted unless it is plainly safe. */
export function shellJoin(args: string[]): string {
  if (args.length === 1) return args[0]!;
  return args.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

const exec: Command = {
  name: 'exec',
  summary: 'run a one-off command in a fresh sandbox of the live release',
  usage: 'APP [--team T] -- CMD…',
  options: TEAM,
  details:
    "The output is printed; the exit code is the command's. One argument after -- is taken as a shell command line.",
  examples: ['berth exec shop -- php artisan migrate --force', "berth exec shop -- 'ls -la /data | head'"],
  async run(context) {
    if (context.rest.length === 0) throw new UsageError('the command goes after --: berth exec APP -- CMD…');
    const { api, app } = await appOf(context);
    const result = await api.data<ExecResult>('POST', `/api/v1/applications/${app.id}/exec`, {
      json: { command: shellJoin(context.rest) },
    });
    if (context.format === 'json') printJson(result);
    else {
      process.stdout.write(result.output);
      if (result.truncated) process.stderr.write('berth: (output truncated at the limit)\n');
    }
    return result.exit_code ?? 1;
  },
};

function lifecycle(action: 'suspend' | 'resume', summary: string): Command {
  return {
    name: action,
    summary,
    usage: 'APP [--team T]',
    options: TEAM,
    examples: [`berth ${action} shop`],
    async run(context) {
      const { api, app } = await appOf(context);
      const s = await api.data<AppStatus>('POST', `/api/v1/applications/${app.id}/${action}`);
      if (context.format === 'json') printJson(s);
      else print(`${clean(app.name)}: ${coloured(s.status)}${s.suspended ? ' (suspended)' : ''}`);
    },
  };
}

async function confirmName(name: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await rl.question(`Delete ${name} and all its data? Type its name to confirm: `)).trim() === name;
  } finally {
    rl.close();
  }
}

const deleteCommand: Command = {
  name: 'delete',
  summary: 'delete an application now, with its processes, releases, volumes, domains and secrets',
  usage: 'APP [--yes] [--team T]',
  options: { ...TEAM, yes: { type: 'boolean', short: 'y' } },
  details: 'On a terminal you type the name to confirm; elsewhere --yes is required.',
  examples: ['berth delete shop', 'berth delete shop --yes'],
  async run(context) {
    const { api, app } = await appOf(context);
    if (context.values.yes !== true) {
      if (!interactive()) throw new UsageError('deleting needs --yes when not on a terminal');
      if (!(await confirmName(app.name))) {
        print('Not deleted.');
        return 1;
      }
    }
    const result = await api.data<DeletedApplication>('DELETE', `/api/v1/applications/${app.id}`);
    if (context.format === 'json') printJson(result);
    else print(`${clean(result.name)}: ${coloured(result.status)}`);
  },
};

const scheduleDeletion: Command = {
  name: 'schedule-deletion',
  summary: 'schedule the deletion of an application (--at T) or cancel it (--cancel)',
  usage: 'APP (--at ISO-8601 | --cancel) [--team T]',
  options: { ...TEAM, at: { type: 'string' }, cancel: { type: 'boolean' } },
  details: 'The owners are warned by e-mail 7 days and 1 day before. A bare date is midnight UTC.',
  examples: [
    'berth schedule-deletion preview-42 --at 2030-01-31T12:00:00Z',
    'berth schedule-deletion preview-42 --cancel',
  ],
  async run(context) {
    const at = stringOption(context.values, 'at');
    const cancel = context.values.cancel === true;
    if ((at === undefined) === !cancel) throw new UsageError('give exactly one of --at T and --cancel');
    const { api, app } = await appOf(context);
    const schedule = await api.data<Schedule>('PATCH', `/api/v1/applications/${app.id}`, {
      json: { scheduled_deletion_at: cancel ? null : at },
    });
    if (context.format === 'json') printJson(schedule);
    else if (schedule.scheduled_deletion_at)
      print(`${clean(app.name)} will be deleted at ${schedule.scheduled_deletion_at}.`);
    else print(`${clean(app.name)}: no deletion scheduled.`);
  },
};

const gitWebhook: Command = {
  name: 'git-webhook',
  summary: "push to deploy: the URL and secret to give the repository's GitHub, GitLab or Gitea webhook",
  usage: 'APP [--rotate] [--team T]',
  options: { ...TEAM, rotate: { type: 'boolean' } },
  details:
    "A push event to the application's branch deploys it. GitHub and Gitea: the secret signs (content type application/json); GitLab: the secret token. --rotate makes a new secret; the old one stops working.",
  examples: ['berth git-webhook shop', 'berth git-webhook shop --rotate --output json'],
  async run(context) {
    const { api, app } = await appOf(context);
    const hook =
      context.values.rotate === true
        ? await api.data<GitWebhook>('POST', `/api/v1/applications/${app.id}/git-webhook/rotate`)
        : await api.data<GitWebhook>('GET', `/api/v1/applications/${app.id}/git-webhook`);
    if (context.format === 'json') return printJson(hook);
    print(`url     ${clean(hook.url)}`);
    print(`secret  ${clean(hook.secret)}`);
  },
};

export const appCommands = [
  apps,
  status,
  deploy,
  rollback,
  deployments,
  logs,
  exec,
  lifecycle('suspend', 'stop every process; the domains answer 503 until resumed'),
  lifecycle('resume', 'run a suspended application again on its live release'),
  deleteCommand,
  scheduleDeletion,
  gitWebhook,
];
