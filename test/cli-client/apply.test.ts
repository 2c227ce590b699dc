// The built `berth` client against a real Berth: profiles, apply and diff with the plan as a diff,
// dry runs that change nothing, invalid documents with their lines, JSON output, export round trips,
// and colour and progress on a terminal but not in a pipe.
import fs from 'node:fs';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.js';
import { ensureBuilt, ESC, Shell, startBerth } from './helpers.js';

const DOCUMENT = `apiVersion: v1
kind: Infrastructure
metadata:
  name: shop
  team: acme
spec:
  application:
    name: shop
    type: nodejs
    settings:
      replicas: 2
  domains:
    - domain: shop.example.com
  secrets:
    - key: APP_KEY
      value: first
  volumes:
    - name: data
      mount_path: /data
      volume_size: 1
  managed_databases:
    - name: main-db
      type: pg
      plan: 1x1xCPU-2GB-25GB
      zone: de-fra1
`;

let t: TestApp;
let url: string;
let shell: Shell;

beforeAll(async () => {
  await ensureBuilt();
  ({ t, url } = await startBerth());
  shell = new Shell();
  const login = await shell.run(['login', '--url', url, '--token', t.user.api_token]);
  expect(login.code, login.stderr).toBe(0);
}, 300_000);

afterAll(async () => {
  shell?.remove();
  await t?.close();
});

// Each run of the binary is a new Node.js process: seconds apiece on a loaded two-core machine.
describe('profiles', { timeout: 120_000 }, () => {
  it('signs in with a password or a mailed link and stores an API token issued for this machine, not the password', async () => {
    const password = 'the owner password 1';
    await t.ctx.services.accounts.forcePassword(t.user.user_id, password);
    const s = new Shell();
    try {
      const byPassword = await s.run(
        ['login', '--url', url, '--email', 'owner@example.com', '--password', '-'],
        { input: password + '\n' },
      );
      expect(byPassword.code, byPassword.stderr).toBe(0);
      expect(byPassword.stdout).toContain('owner@example.com');
      const config = fs.readFileSync(s.configFile, 'utf8');
      expect(config).not.toContain(password);
      const stored = JSON.parse(config) as { profiles: Record<string, { token: string }> };
      expect(stored.profiles.default!.token).toMatch(/^berth_pat_/);
      expect(stored.profiles.default!.token).not.toBe(t.user.api_token);
      const tokens = await t.ctx.identity.listCredentials(t.user.user_id, 'api_token');
      expect(tokens.map((row) => row.name)).toContain(`berth CLI on ${os.hostname()}`.slice(0, 100));
      // The browser session it signed in with was ended.
      expect(await t.ctx.services.accounts.listSessions(t.user.user_id)).toEqual([]);
      expect((await s.run(['whoami'])).stdout).toContain('owner@example.com');

      const link = await t.ctx.services.accounts.signInLinkFor(t.user.user_id);
      const byLink = await s.run(['login', '--profile', 'linked', '--url', url, '--link', '-'], {
        input: link,
      });
      expect(byLink.code, byLink.stderr).toBe(0);
      const wrong = await s.run(
        ['login', '--profile', 'wrong', '--url', url, '--email', 'owner@example.com', '--password', '-'],
        {
          input: 'not the password',
        },
      );
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toContain('The e-mail address or the password is wrong.');
    } finally {
      s.remove();
    }
  });

  it('login writes a 0600 profile, shows nothing secret, and whoami uses it', async () => {
    const s = new Shell();
    try {
      const login = await s.run(['login', '--url', url, '--token', t.user.api_token, '--tools-key', '-'], {
        input: t.user.tools_api_key + '\n',
      });
      expect(login.code, login.stderr).toBe(0);
      expect(login.stdout).toContain('owner@example.com');
      expect(login.stdout + login.stderr).not.toContain(t.user.api_token);
      expect(login.stdout + login.stderr).not.toContain(t.user.tools_api_key);
      expect(fs.statSync(s.configFile).mode & 0o777).toBe(0o600);
      const stored = JSON.parse(fs.readFileSync(s.configFile, 'utf8')) as {
        current: string;
        profiles: Record<string, { url: string; token: string; tools_key: string }>;
      };
      expect(stored.current).toBe('default');
      expect(stored.profiles.default).toMatchObject({
        url,
        token: t.user.api_token,
        tools_key: t.user.tools_api_key,
      });

      const whoami = await s.run(['whoami', '--output', 'json']);
      expect(whoami.code, whoami.stderr).toBe(0);
      const me = JSON.parse(whoami.stdout) as {
        email: string;
        profile: string;
        teams: Array<{ name: string }>;
      };
      expect(me).toMatchObject({ email: 'owner@example.com', profile: 'default' });
      expect(me.teams.map((team) => team.name)).toEqual(['acme']);

      // A second profile, chosen with --profile; logout forgets it.
      expect(
        (await s.run(['login', '--profile', 'other', '--url', url, '--token', t.user.api_token])).code,
      ).toBe(0);
      expect((await s.run(['teams', '--profile', 'other'])).stdout).toMatch(/acme\s+owner/);
      expect((await s.run(['logout', '--profile', 'other'])).code).toBe(0);
      const gone = await s.run(['teams', '--profile', 'other']);
      expect(gone.code).toBe(2);
      expect(gone.stderr).toContain("no profile 'other'");
      expect(fs.statSync(s.configFile).mode & 0o777).toBe(0o600);
    } finally {
      s.remove();
    }
  });

  it('a wrong token is refused at login and nothing is stored', async () => {
    const s = new Shell();
    try {
      const login = await s.run(['login', '--url', url, '--token', 'berth_pat_wrong']);
      expect(login.code).toBe(1);
      expect(login.stderr).toMatch(/^berth: .*\(401\)\n$/);
      expect(fs.existsSync(s.configFile)).toBe(false);
    } finally {
      s.remove();
    }
  });

  it('BERTH_URL and BERTH_TOKEN work without any config file (CI)', async () => {
    const s = new Shell({ BERTH_URL: url, BERTH_TOKEN: t.user.api_token });
    try {
      const teams = await s.run(['teams', '--output', 'json']);
      expect(teams.code, teams.stderr).toBe(0);
      expect((JSON.parse(teams.stdout) as Array<{ name: string }>)[0]!.name).toBe('acme');
      expect(fs.existsSync(s.configFile)).toBe(false);
    } finally {
      s.remove();
    }
  });

  it('without a profile, a command says how to log in (exit 2)', async () => {
    const s = new Shell();
    try {
      const run = await s.run(['apps']);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain('not logged in: run berth login');
    } finally {
      s.remove();
    }
  });
});

describe('apply and diff', { timeout: 120_000 }, () => {
  const exportTeam = async () => (await shell.run(['export', '--team', 'acme'])).stdout;
  const exportApp = async () => (await shell.run(['export', '--app', 'shop'])).stdout;

  it('diff of a new document prints the plan grouped by resource and stores nothing', async () => {
    const file = shell.file('shop.yaml', DOCUMENT);
    const diff = await shell.run(['diff', '-f', file]);
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toBe(
      [
        'Application',
        '  + shop',
        'Domains',
        '  + shop.example.com',
        'Secrets',
        '  + APP_KEY',
        'Volumes',
        '  + data',
        'Managed databases',
        '  + main-db (pg)',
        '',
        'Plan: 5 to create, 0 to update, 0 unchanged.',
        '',
      ].join('\n'),
    );
    expect((await shell.run(['apps', '--output', 'json'])).stdout.trim()).toBe('[]');
  });

  it('apply creates, then an update shows the changed fields, needs action and unchanged counts', async () => {
    const file = shell.file('shop.yaml', DOCUMENT);
    const applied = await shell.run(['apply', '-f', file, '--no-deploy']);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('Applied: 5 created, 0 updated, 0 unchanged.');
    // No repository: a plain `berth deploy shop` would have nothing to build, so the hint says --source.
    expect(applied.stdout).toContain(
      'The application needs a deployment (not started: --no-deploy); run berth deploy shop --source DIR|FILE (the document names no repository).',
    );

    const changed = DOCUMENT.replace('replicas: 2', 'replicas: 3\n      memory: 512Mi')
      .replace('value: first', 'value: second')
      .replace('1x1xCPU-2GB-25GB', '1x2xCPU-4GB-50GB');
    const updateFile = shell.file('shop-2.yaml', changed);
    const before = { team: await exportTeam(), app: await exportApp() };

    const diff = await shell.run(['diff', '-f', updateFile]);
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toBe(
      [
        'Application',
        '  ~ shop: settings.replicas, settings.memory',
        'Domains',
        '  = 1 unchanged',
        'Secrets',
        '  ~ APP_KEY: value',
        'Volumes',
        '  = 1 unchanged',
        'Managed databases',
        '  ! main-db (pg): plan 1x1xCPU-2GB-25GB → 1x2xCPU-4GB-50GB — needs action in the panel',
        '',
        'Plan: 0 to create, 2 to update, 1 needs action in the panel, 2 unchanged.',
        '',
      ].join('\n'),
    );
    // apply --dry-run is the same dry run: nothing changed either way.
    const dry = await shell.run(['apply', '--dry-run', '-f', updateFile]);
    expect(dry.stdout).toBe(diff.stdout);
    expect({ team: await exportTeam(), app: await exportApp() }).toEqual(before);

    // Not on a terminal: no question; what needs action is reported and left to the panel.
    const update = await shell.run(['apply', '-f', updateFile, '--no-deploy']);
    expect(update.code, update.stderr).toBe(0);
    expect(update.stdout).toContain('  ~ shop: settings.replicas, settings.memory');
    expect(update.stdout).toContain(
      'Applied: 0 created, 2 updated, 1 needs action in the panel, 2 unchanged.',
    );
    expect(await exportApp()).toContain('replicas: 3');

    // On a terminal, a plan that needs action is shown and asked about first; "n" applies nothing.
    const asking = shell.file('shop-3.yaml', changed.replace('replicas: 3', 'replicas: 5'));
    const asked = await shell.runInPty(['apply', '-f', asking], { input: 'n\n' });
    expect(asked.stdout).toContain('needs action in the panel');
    expect(asked.stdout).toContain('Apply the rest? [y/N]');
    expect(asked.stdout).toContain('Nothing applied.');
    expect(asked.code).toBe(1);
    expect(await exportApp()).toContain('replicas: 3');
  });

  it('an invalid document exits 2 and lists every error with its line', async () => {
    const file = shell.file(
      'bad.yaml',
      `apiVersion: v1
kind: Infrastructure
metadata:
  name: shop
  team: acme
spec:
  application:
    name: shop
    type: nodejs
    settings:
      replicas: 0
  domains:
    - domain: nodot
  services:
    - name: cache
      type: mongodb
  managed_databases:
    - name: main-db
      type: pg
      plan: huge
      zone: de-fra1
`,
    );
    const before = await exportApp();
    const run = await shell.run(['apply', '-f', file]);
    expect(run.code).toBe(2);
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines.slice(0, 4).map((l) => l.split(': ').slice(0, 2).join(': '))).toEqual([
      `${file}:11: spec.application.settings.replicas`,
      `${file}:13: spec.domains.0.domain`,
      `${file}:16: spec.services.cache.type`,
      `${file}:20: spec.managed_databases.main-db.plan`,
    ]);
    expect(lines[2]).toContain("got 'mongodb'");
    expect(lines[4]).toBe(`berth: YAML validation failed: 4 errors in ${file}`);
    expect(await exportApp()).toBe(before);

    // The same from stdin, as JSON for a pipeline.
    const json = await shell.run(['diff', '-f', '-', '--output', 'json'], {
      input: fs.readFileSync(file, 'utf8'),
    });
    expect(json.code).toBe(2);
    const report = JSON.parse(json.stdout) as {
      valid: boolean;
      errors: Array<{ path: string; line: number }>;
    };
    expect(report.valid).toBe(false);
    expect(report.errors.map((e) => [e.path, e.line])).toEqual([
      ['spec.application.settings.replicas', 11],
      ['spec.domains.0.domain', 13],
      ['spec.services.cache.type', 16],
      ['spec.managed_databases.main-db.plan', 20],
    ]);
  });

  it('a document that is not YAML exits 2 with the line the server names', async () => {
    const run = await shell.run(['apply', '-f', '-'], { input: 'apiVersion: v1\nkind: [\n' });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^<stdin>: The request body is not valid YAML at line \d+, column \d+/);
  });

  it('--output json prints the API answer, parseable', async () => {
    const file = shell.file('shop.yaml', DOCUMENT);
    const run = await shell.run(['diff', '-f', file, '--output', 'json']);
    expect(run.code, run.stderr).toBe(0);
    const plan = JSON.parse(run.stdout) as {
      dry_run: boolean;
      application_name: string;
      structured_changes: unknown;
      resource_changes: Array<{ resource: string; name: string }>;
    };
    expect(plan).toMatchObject({ dry_run: true, application_name: 'shop' });
    // The structured changes the diff is printed from: the application is back at 2 replicas.
    expect(plan.resource_changes.find((c) => c.resource === 'application')).toEqual({
      resource: 'application',
      name: 'shop',
      type: 'nodejs',
      action: 'updated',
      fields: ['settings.replicas'],
      pending: [],
    });
    // --team replaces metadata.team.
    const elsewhere = shell.file('elsewhere.yaml', DOCUMENT.replace('team: acme', 'team: nobody'));
    expect((await shell.run(['diff', '-f', elsewhere])).code).toBe(1);
    const team = await shell.run(['diff', '-f', elsewhere, '--team', 'acme', '--json']);
    expect(team.code, team.stderr).toBe(0);
    expect(JSON.parse(team.stdout)).toMatchObject({ team: 'acme', dry_run: true });
    const apps = JSON.parse((await shell.run(['apps', '--json'])).stdout) as Array<{ name: string }>;
    expect(apps.map((a) => a.name)).toEqual(['shop']);
  });

  it('an export applied again changes nothing (team and application)', async () => {
    for (const args of [
      ['--team', 'acme'],
      ['--app', 'shop'],
    ]) {
      const name = `export-${args[0]!.slice(2)}.yaml`;
      const exported = await shell.run(['export', ...args, '-o', name]);
      expect(exported.code, exported.stderr).toBe(0);
      const text = fs.readFileSync(`${shell.home}/${name}`, 'utf8');
      expect(text).toMatch(/^apiVersion: v1\nkind: Infrastructure/);
      const again = await shell.run(['apply', '-f', name, '--output', 'json']);
      expect(again.code, again.stderr).toBe(0);
      const response = JSON.parse(again.stdout) as { changes: string[]; deployment_id: number | null };
      expect(response.changes).toEqual([]);
      expect(response.deployment_id).toBeNull();
      const human = await shell.run(['apply', '-f', name]);
      expect(human.stdout).toMatch(/Applied: 0 created, 0 updated, \d+ unchanged\. No changes\./);
    }
  });

  it('on a terminal the plan is coloured with a spinner; in a pipe or with NO_COLOR it is plain', async () => {
    const file = shell.file('shop.yaml', DOCUMENT.replace('replicas: 2', 'replicas: 4'));
    const tty = await shell.runInPty(['diff', '-f', file]);
    expect(tty.code, tty.stdout).toBe(0);
    expect(tty.stdout).toContain(`${ESC}33m  ~ shop`);
    expect(tty.stdout).toContain(`${ESC}1mApplication`);
    expect(tty.stdout).toMatch(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏](\u001b\[39m)? Planning…/);

    const pipe = await shell.run(['diff', '-f', file]);
    expect(pipe.stdout).toContain('  ~ shop: settings.replicas');
    expect(pipe.stdout + pipe.stderr).not.toContain(ESC);
    expect(pipe.stderr).not.toContain('Planning');

    const noColor = await shell.runInPty(['diff', '-f', file], { env: { NO_COLOR: '1' } });
    expect(noColor.stdout).toContain('  ~ shop: settings.replicas');
    expect(noColor.stdout).not.toMatch(/\u001b\[\d+m/);
  });
});

describe('dispatch', { timeout: 120_000 }, () => {
  it('unknown commands and options are clear errors; server help lists the client', async () => {
    const unknown = await shell.run(['aply', '-f', 'x']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'aply'");
    const option = await shell.run(['apply', '--frobnicate']);
    expect(option.code).toBe(2);
    expect(option.stderr).toContain("Unknown option '--frobnicate'");
    expect(option.stderr).toContain('See berth apply --help');
    const sub = await shell.run(['db', 'nope']);
    expect(sub.code).toBe(2);
    expect(sub.stderr).toContain("unknown db command 'nope'");
    const help = await shell.run(['--help']);
    for (const word of ['serve', 'create-user', 'apply', 'schedule-deletion', 'completion'])
      expect(help.stdout).toContain(word);
    const applyHelp = await shell.run(['apply', '--help']);
    expect(applyHelp.code).toBe(0);
    expect(applyHelp.stdout).toContain('Examples:');
    expect(applyHelp.stdout).toContain('berth apply -f shop.yaml --wait');
  });

  it('completion scripts name the commands', async () => {
    for (const shellName of ['bash', 'zsh', 'fish']) {
      const run = await shell.run(['completion', shellName]);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toContain('apply');
      expect(run.stdout).toContain('migration-status');
    }
    const bash = await shell.run(['completion', 'bash']);
    expect(bash.stdout).toContain('complete -o default -F _berth berth');
  });

  it('apply --no-deploy of an application with a repository says to run berth deploy', async () => {
    const blog = [
      'apiVersion: v1',
      'kind: Infrastructure',
      'metadata: { name: blog, team: acme }',
      'spec:',
      '  application:',
      '    name: blog',
      '    type: nodejs',
      '    repository: { url: https://github.com/acme/blog }',
      '',
    ].join('\n');
    const applied = await shell.run(['apply', '-f', shell.file('blog.yaml', blog), '--no-deploy']);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(
      'The application needs a deployment (not started: --no-deploy); run berth deploy blog.\n',
    );
  });
});

describe('push to deploy', { timeout: 120_000 }, () => {
  it("prints the application's git webhook URL and secret, the same until rotated", async () => {
    const first = await shell.run(['git-webhook', 'shop', '--json']);
    expect(first.code, first.stderr).toBe(0);
    const hook = JSON.parse(first.stdout) as { url: string; secret: string };
    expect(hook.url).toMatch(/\/api\/v1\/applications\/\d+\/git-webhook$/);
    const human = await shell.run(['git-webhook', 'shop']);
    expect(human.stdout).toBe(`url     ${hook.url}\nsecret  ${hook.secret}\n`);
    const rotated = JSON.parse((await shell.run(['git-webhook', 'shop', '--rotate', '--json'])).stdout) as {
      secret: string;
    };
    expect(rotated.secret).not.toBe(hook.secret);
  });
});

describe('scheduled deletion and delete', { timeout: 120_000 }, () => {
  it('schedules and cancels a deletion, and deletes only with --yes off a terminal', async () => {
    const at = '2031-01-31T12:00:00Z';
    const scheduled = await shell.run(['schedule-deletion', 'shop', '--at', at]);
    expect(scheduled.code, scheduled.stderr).toBe(0);
    expect(scheduled.stdout).toBe('shop will be deleted at 2031-01-31T12:00:00.000Z.\n');
    expect((await shell.run(['apps'])).stdout).toMatch(
      /shop\s+\d+\s+nodejs\s+\S+\s+2031-01-31T12:00:00\.000Z/,
    );
    const past = await shell.run(['schedule-deletion', 'shop', '--at', '2001-01-01T00:00:00Z']);
    expect(past.code).toBe(1);
    expect(past.stderr).toMatch(/^berth: .*\(422\) — scheduled_deletion_at: /);
    const cancelled = await shell.run(['schedule-deletion', 'shop', '--cancel', '--json']);
    expect(JSON.parse(cancelled.stdout)).toMatchObject({ state: 'no_schedule', scheduled_deletion_at: null });
    expect((await shell.run(['schedule-deletion', 'shop'])).code).toBe(2);

    const refused = await shell.run(['delete', 'shop']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('deleting needs --yes when not on a terminal');
    const deleted = await shell.run(['delete', 'shop', '--yes']);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout).toBe('shop: destroying\n');
  });
});
