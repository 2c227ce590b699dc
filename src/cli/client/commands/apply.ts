// apply, diff and export: the declarative workflow.
import fs from 'node:fs';
import { createInterface } from 'node:readline/promises';
import type { ApplyAnswer } from '../answers.js';
import { stringOption, type Command, type CommandContext } from '../command.js';
import { followDeployment, followProvisioning } from '../follow.js';
import { ApiError, UsageError, type Api } from '../http.js';
import { clean, err, out, print, printJson, spinner, type Painter } from '../output.js';
import { resolveApp, resolveTeam } from '../resolve.js';

/**
 * The apply answer. An older server (before issue 17) sends no resource_changes: the plan is then read
 * from structured_changes and the change lines. `errors` is not read (a refused document is a 422).
 */
export type ApplyResponse = Omit<ApplyAnswer, 'resource_changes' | 'errors'> &
  Partial<Pick<ApplyAnswer, 'resource_changes'>>;
/** An entry of `resource_changes`: the fields that change, structured. */
export type ResourceChange = ApplyAnswer['resource_changes'][number];
type Action = ResourceChange['action'];
type StructuredChanges = ApplyAnswer['structured_changes'];
/** Any entry of structured_changes, read by the fields a group labels it with. */
type Entry = { action: Action } & Partial<Record<'name' | 'domain' | 'key' | 'type', string>>;

/**
 * The blocks of a plan in document order: their key in structured_changes, heading, kind in
 * resource_changes, the word the change lines use, an entry's label.
 */
const GROUPS: Array<{
  key: keyof StructuredChanges;
  heading: string;
  resource: string;
  kind: string;
  label(e: Entry): string;
}> = [
  {
    key: 'application',
    heading: 'Application',
    resource: 'application',
    kind: 'application',
    label: (e) => e.name ?? '',
  },
  { key: 'domains', heading: 'Domains', resource: 'domain', kind: 'domain', label: (e) => e.domain ?? '' },
  { key: 'secrets', heading: 'Secrets', resource: 'secret', kind: 'secret', label: (e) => e.key ?? '' },
  { key: 'volumes', heading: 'Volumes', resource: 'volume', kind: 'volume', label: (e) => e.name ?? '' },
  { key: 'services', heading: 'Services', resource: 'service', kind: 'service', label: (e) => e.name ?? '' },
  {
    key: 'container_services',
    heading: 'Container services',
    resource: 'container_service',
    kind: 'container service',
    label: (e) => e.name ?? '',
  },
  {
    key: 'managed_databases',
    heading: 'Managed databases',
    resource: 'managed_database',
    kind: 'managed database',
    label: (e) => e.name ?? '',
  },
  {
    key: 'object_storage',
    heading: 'Object storage',
    resource: 'object_storage',
    kind: 'object storage',
    label: (e) => e.name ?? '',
  },
];

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The change lines that speak of one entry (`Service 'cache' (valkey) updated (memory)`). */
function linesOf(changes: string[], kind: string, label: string): string[] {
  const subject = new RegExp(`(?:^|\\s)${escape(kind)} '${escape(label)}'`, 'i');
  const container = new RegExp(`container ${escape(kind)} '${escape(label)}'`, 'i');
  return changes.filter((line) => subject.test(line) && (kind !== 'service' || !container.test(line)));
}

/** What changes in an updated entry (its fields), or what needs action and why, read from change lines. */
function detailFromLines(lines: string[], kind: string, label: string, action: Action): string {
  const parts: string[] = [];
  for (const raw of lines) {
    const line = raw.replace(/^\[DRY RUN\]\s*/, '');
    const after = line.slice(
      line.toLowerCase().indexOf(`${kind} '${label.toLowerCase()}'`) + kind.length + label.length + 3,
    );
    if (action === 'needs_action') {
      const moves = [...line.matchAll(/(\w+) change from '([^']*)' to '([^']*)'/g)];
      parts.push(...(moves.length ? moves.map((m) => `${m[1]} ${m[2]} → ${m[3]}`) : [after.trim()]));
      continue;
    }
    const groups = [...after.matchAll(/\(([^)]*)\)/g)]
      .map((m) => m[1]!)
      .filter((g) => !/not applied|provisioning|GB at/.test(g));
    const fields = groups.at(-1);
    if (fields) parts.push(...fields.split(', '));
    else if (!/^\s*(\([^)]*\)\s*)?(updated|created|added)\s*$/i.test(after))
      parts.push(after.replace(/^\s*\([^)]*\)\s*/, '').trim());
  }
  return [...new Set(parts.filter(Boolean))].join(', ');
}

/** What changes in an entry of resource_changes: its fields, then each change left to the panel. */
function detailOf(change: ResourceChange): string {
  return [...change.fields, ...change.pending.map((p) => `${p.field} ${p.from} → ${p.to}`)].join(', ');
}

interface PlanEntry {
  group: (typeof GROUPS)[number];
  label: string;
  type: string | null;
  action: Action;
  detail: string;
}

/**
 * The plan's entries in document order: from resource_changes, or (an older server) from
 * structured_changes with the fields read out of the change lines.
 */
function planEntries(response: ApplyResponse): PlanEntry[] {
  if (Array.isArray(response.resource_changes)) {
    return GROUPS.flatMap((group) =>
      response
        .resource_changes!.filter((c) => c.resource === group.resource)
        .map((c) => ({ group, label: c.name, type: c.type, action: c.action, detail: detailOf(c) })),
    );
  }
  return GROUPS.flatMap((group) => {
    const value = response.structured_changes[group.key];
    const entries: Entry[] = value == null ? [] : Array.isArray(value) ? value : [value];
    return entries.map((entry) => {
      const label = group.label(entry);
      const lines = linesOf(response.changes, group.kind, label);
      return {
        group,
        label,
        type: entry.type ?? null,
        action: entry.action,
        detail: detailFromLines(lines, group.kind, label, entry.action),
      };
    });
  });
}

export interface PlanCounts {
  created: number;
  updated: number;
  unchanged: number;
  needs_action: number;
}

export function countPlan(response: ApplyResponse): PlanCounts {
  const counts: PlanCounts = { created: 0, updated: 0, unchanged: 0, needs_action: 0 };
  for (const entry of planEntries(response)) counts[entry.action] += 1;
  return counts;
}

/** The plan as a diff grouped by resource: `+` created, `~` updated with its fields, `!` needs action, unchanged counted. */
export function renderPlan(response: ApplyResponse, paint: Painter = out): string {
  const lines: string[] = [];
  const all = planEntries(response);
  for (const group of GROUPS) {
    const entries = all.filter((e) => e.group === group);
    if (entries.length === 0) continue;
    lines.push(paint('bold', group.heading));
    let unchanged = 0;
    for (const entry of entries) {
      const shown =
        clean(entry.label) + (entry.type && group.key !== 'application' ? ` (${clean(entry.type)})` : '');
      const detail = entry.detail;
      switch (entry.action) {
        case 'created':
          lines.push(paint('green', `  + ${shown}`));
          break;
        case 'updated':
          lines.push(`${paint('yellow', `  ~ ${shown}`)}${detail ? `: ${clean(detail)}` : ''}`);
          break;
        case 'needs_action':
          lines.push(
            `${paint('magenta', `  ! ${shown}`)}: ${clean(detail || 'change')} ${paint('dim', '— needs action in the panel')}`,
          );
          break;
        case 'unchanged':
          unchanged += 1;
          break;
      }
    }
    if (unchanged > 0) lines.push(paint('dim', `  = ${unchanged} unchanged`));
  }
  const c = countPlan(response);
  const parts = response.dry_run
    ? [`${c.created} to create`, `${c.updated} to update`]
    : [`${c.created} created`, `${c.updated} updated`];
  if (c.needs_action) parts.push(`${c.needs_action} needs action in the panel`);
  parts.push(`${c.unchanged} unchanged`);
  const noChange = c.created + c.updated + c.needs_action === 0;
  lines.push(
    '',
    `${paint('bold', response.dry_run ? 'Plan:' : 'Applied:')} ${parts.join(', ')}.${noChange ? ' No changes.' : ''}`,
  );
  return lines.join('\n');
}

interface DocumentInput {
  text: string;
  label: string;
}

function readDocument(file: string | undefined): DocumentInput {
  if (!file) throw new UsageError('-f FILE is required (- reads the document from stdin)');
  if (file === '-') return { text: fs.readFileSync(0, 'utf8'), label: '<stdin>' };
  try {
    return { text: fs.readFileSync(file, 'utf8'), label: file };
  } catch (error) {
    throw new UsageError(
      `cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
}

/** `--team` replaces metadata.team in place (its line stays where it was). */
async function withTeam(text: string, team: string | undefined): Promise<string> {
  if (team === undefined) return text;
  // The YAML library loads only when needed: most runs never parse the document here.
  const { parseDocument } = await import('yaml');
  const doc = parseDocument(text);
  if (doc.errors.length > 0) return text;
  doc.setIn(['metadata', 'team'], /^\d+$/.test(team) ? Number(team) : team);
  return doc.toString();
}

/** Whether the document names a repository to build from; without one, the source must be sent. */
async function namesRepository(text: string): Promise<boolean> {
  const { parse } = await import('yaml');
  try {
    const doc = parse(text) as { spec?: { application?: { repository?: unknown } } } | null;
    return doc?.spec?.application?.repository != null;
  } catch {
    return true; // the server took it: say no more than before
  }
}

/** A 400 or 422 of apply: every error with its line; exit code 2. */
async function reportInvalid(
  error: ApiError,
  input: DocumentInput,
  sent: string,
  format: CommandContext['format'],
): Promise<number> {
  const { locator } = await import('../yaml-lines.js');
  const where = locator(sent);
  const list = Object.entries(error.errors)
    .flatMap(([path, messages]) =>
      messages.map((message) => ({ path, line: where.line(path) ?? null, message })),
    )
    .sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
  if (format === 'json') {
    printJson({ valid: false, status: error.status, message: error.message, errors: list });
  }
  if (list.length === 0) {
    process.stderr.write(`${err('red', `${input.label}:`)} ${clean(error.message)}\n`);
    return 2;
  }
  for (const e of list)
    process.stderr.write(
      `${err('bold', `${input.label}:${e.line ?? '?'}`)}: ${err('cyan', e.path)}: ${clean(e.message)}\n`,
    );
  process.stderr.write(
    `${err('red', 'berth:')} ${clean(error.message)}: ${list.length} error${list.length === 1 ? '' : 's'} in ${input.label}\n`,
  );
  return 2;
}

async function post(api: Api, sent: string, dryRun: boolean, deploy: boolean): Promise<ApplyResponse> {
  return api.json<ApplyResponse>('POST', '/api/v1/infrastructure/apply', {
    query: { dry_run: dryRun, auto_deploy: deploy },
    body: sent,
    contentType: 'application/yaml',
  });
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

export const interactive = () => process.stdin.isTTY === true && process.stderr.isTTY === true;

async function applyOrDiff(context: CommandContext, dryRun: boolean): Promise<number> {
  const { values, format } = context;
  const input = readDocument(stringOption(values, 'file'));
  const sent = await withTeam(input.text, stringOption(values, 'team'));
  const api = context.api();
  const deploy = values['no-deploy'] !== true;
  const request = async (dry: boolean) => {
    const progress = format === 'json' ? undefined : spinner(dry ? 'Planning…' : 'Applying…');
    try {
      return await post(api, sent, dry, deploy);
    } finally {
      progress?.stop();
    }
  };
  let response: ApplyResponse;
  let shown = false;
  try {
    // On a terminal, something that needs action is shown and confirmed before anything is written.
    if (!dryRun && values.yes !== true && interactive() && format !== 'json') {
      const plan = await request(true);
      const counts = countPlan(plan);
      if (counts.needs_action > 0) {
        print(renderPlan(plan));
        shown = true;
        if (!(await confirm('Some changes need action in the panel and are not applied. Apply the rest?'))) {
          print('Nothing applied.');
          return 1;
        }
      }
    }
    response = await request(dryRun);
  } catch (error) {
    if (error instanceof ApiError && (error.status === 422 || error.status === 400))
      return reportInvalid(error, input, sent, format);
    throw error;
  }
  if (format === 'json') printJson(response);
  else if (!shown) print(renderPlan(response));
  else print(renderPlan(response).split('\n').at(-1));
  if (dryRun) return 0;
  if (format !== 'json') {
    if (response.deployment_id !== null)
      print(`Deployment ${response.deployment_id} started for ${clean(response.application_name)}.`);
    else if (response.needs_deployment && !response.auto_deploy_enabled) {
      // Without a repository a plain deploy has nothing to build until a source is sent.
      const source = (await namesRepository(sent))
        ? ''
        : ' --source DIR|FILE (the document names no repository)';
      print(
        `The application needs a deployment (not started: --no-deploy); run berth deploy ${clean(response.application_name)}${source}.`,
      );
    }
  }
  if (values.wait !== true) return 0;
  let ok = true;
  if (response.deployment_id !== null && response.application_id !== null) {
    const deployment = await followDeployment(api, response.application_id, response.deployment_id);
    ok = deployment.status === 'success';
  }
  const entries = (key: string) =>
    planEntries(response)
      .filter((e) => e.group.key === key && (e.action === 'created' || e.action === 'updated'))
      .map((e) => e.label);
  const provisioned = await followProvisioning(
    api,
    response.team,
    entries('managed_databases'),
    entries('object_storage'),
  );
  return ok && provisioned ? 0 : 1;
}

const FILE_OPTIONS = {
  file: { type: 'string', short: 'f' },
  team: { type: 'string' },
} as const;

const apply: Command = {
  name: 'apply',
  summary: 'apply an infrastructure document and print the plan as a diff',
  usage: '-f FILE|- [--dry-run] [--no-deploy] [--wait] [--team T] [--yes]',
  options: {
    ...FILE_OPTIONS,
    'dry-run': { type: 'boolean' },
    'no-deploy': { type: 'boolean' },
    wait: { type: 'boolean' },
    yes: { type: 'boolean', short: 'y' },
  },
  details: [
    'The plan is grouped by resource: + created, ~ updated (with the fields that change), ! needs action in',
    'the panel (plan or zone changes, not applied), and the unchanged entries counted. On a terminal, a plan',
    'with something that needs action is confirmed first (--yes skips the question).',
    '--wait follows the deployment (its build output streams) and the provisioning of managed databases and',
    'object storage until they run. --team replaces metadata.team.',
    'Exit codes: 0 applied (and, with --wait, running); 1 failed (the API refused, or the deployment or',
    'provisioning failed); 2 invalid document (every error listed as FILE:LINE: path: message) or bad usage.',
  ].join('\n'),
  examples: [
    'berth apply -f shop.yaml',
    'berth apply -f shop.yaml --wait',
    'cat shop.yaml | berth apply -f - --no-deploy --output json',
    'berth apply -f team.yaml --team acme --yes',
  ],
  run: (context) => applyOrDiff(context, context.values['dry-run'] === true),
};

const diff: Command = {
  name: 'diff',
  summary: 'what applying a document would change (a dry run: nothing is written)',
  usage: '-f FILE|- [--team T]',
  options: { ...FILE_OPTIONS },
  details:
    'Exit codes: 0 the document is valid (the plan is printed), 1 the API refused, 2 invalid document.',
  examples: ['berth diff -f shop.yaml', 'berth export --app shop | berth diff -f -'],
  run: (context) => applyOrDiff(context, true),
};

const exportCommand: Command = {
  name: 'export',
  summary: 'export a team (managed databases, object storage) or an application as a document',
  usage: '[--team T | --app NAME] [-o FILE]',
  options: {
    team: { type: 'string' },
    app: { type: 'string' },
    out: { type: 'string', short: 'o' },
  },
  details: 'Credentials are never exported: they appear as placeholders that apply understands.',
  examples: ['berth export --team acme -o acme.yaml', 'berth export --app shop > shop.yaml'],
  async run({ values, api: apiOf }) {
    const api = apiOf();
    const appName = stringOption(values, 'app');
    const teamName = stringOption(values, 'team');
    let path: string;
    if (appName !== undefined)
      path = `/api/v1/applications/${(await resolveApp(api, appName, teamName)).id}/export-yaml`;
    else path = `/api/v1/teams/${encodeURIComponent((await resolveTeam(api, teamName)).name)}/export-yaml`;
    const text = await (await api.send('GET', path, { accept: 'application/yaml' })).text();
    const file = stringOption(values, 'out');
    if (file === undefined || file === '-') process.stdout.write(text);
    else {
      fs.writeFileSync(file, text);
      process.stderr.write(`Wrote ${file}\n`);
    }
  },
};

export const applyCommands = [apply, diff, exportCommand];
