// `berth admin` records what it changes as the operator's, and `berth admin audit` shows every team's
// entries, filtered, as a table or JSON (issue 31, item 2). The built command, as an operator runs it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ensureBuilt } from '../cli-client/helpers.js';
import { execFileAsync } from '../helpers/processes.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-audit-cli-'));
const env = { ...process.env, BERTH_DATA_DIR: dataDir, BERTH_LOG_LEVEL: 'silent' };

async function berth(...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, [BIN, ...args], { cwd: ROOT, env });
    return { stdout, stderr, code: 0 };
  } catch (error) {
    const e = error as { stdout: string; stderr: string; code: number };
    return { stdout: e.stdout, stderr: e.stderr, code: e.code };
  }
}

interface Entry {
  action: string;
  actor: string | null;
  credential: string | null;
  team_id: number | null;
  target: { kind: string | null; id: string };
  after: unknown;
}

describe('berth admin audit', { timeout: 120_000 }, () => {
  beforeAll(ensureBuilt, 300_000);
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it("records the operator's changes and lists them, filtered, as JSON and as a table", async () => {
    const created = await berth('admin', 'create-user', '--email', 'ops@example.com', '--team', 'ops');
    expect(created.code).toBe(0);
    const user = JSON.parse(created.stdout) as { team_id: number; api_token: string };
    expect((await berth('admin', 'maintenance', 'on')).code).toBe(0);
    expect((await berth('admin', 'maintenance', 'off')).code).toBe(0);

    const listed = await berth('admin', 'audit', '--json');
    expect(listed.code, listed.stderr).toBe(0);
    const entries = JSON.parse(listed.stdout) as Entry[];
    // Newest first; every one the operator's, never a secret.
    expect(entries.map((e) => e.action)).toEqual(['maintenance.update', 'maintenance.update', 'user.create']);
    expect(entries.every((e) => e.actor === 'operator' && e.credential === 'operator')).toBe(true);
    expect(entries[0]!.after).toEqual({ maintenance: 'off' });
    expect(entries[2]).toMatchObject({ team_id: user.team_id, target: { kind: 'user' } });
    expect(listed.stdout).not.toContain(user.api_token);

    const team = JSON.parse((await berth('admin', 'audit', '--team', 'ops', '--json')).stdout) as Entry[];
    expect(team.map((e) => e.action)).toEqual(['user.create']);
    const byAction = await berth('admin', 'audit', '--action', 'maintenance.*', '--since', '2000-01-01');
    expect(byAction.code).toBe(0);
    const lines = byAction.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^AT\s+TEAM\s+ACTOR\s+CREDENTIAL\s+ACTION\s+TARGET$/);
    expect(lines.slice(1)).toHaveLength(2);
    expect(
      lines
        .slice(1)
        .every((line) => /operator\s+operator\s+maintenance\.update\s+platform:maintenance/.test(line)),
    ).toBe(true);
    expect(JSON.parse((await berth('admin', 'audit', '--since', '2999-01-01', '--json')).stdout)).toEqual([]);

    const bad = await berth('admin', 'audit', '--since', 'yesterday');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--since must be a time');
  });
});
