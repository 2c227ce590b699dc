// The `berth` command, run as a real process: the built one (dist/), as `npm run build` makes it and a
// production install runs it; each run through tsx would compile the sources again, seconds apiece.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ensureBuilt } from '../cli-client/helpers.js';
import { execFileAsync, freePort, waitFor } from '../helpers/processes.js';

/** `berth admin stop-all` on a data dir whose Berth has stopped (its edge runs on until then). */
function stopDataPlane(dataDir: string): void {
  const result = spawnSync(process.execPath, [BIN, 'admin', 'stop-all', '--data-dir', dataDir], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (result.status !== 0) throw new Error(`stop-all failed: ${result.stdout}${result.stderr}`);
}

const ROOT = path.resolve(import.meta.dirname, '../..');
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-cli-'));
const env = { ...process.env, BERTH_DATA_DIR: dataDir, BERTH_LOG_LEVEL: 'silent' };

/** Runs `berth` with `input` on its standard input (a password never goes on the command line). */
function berthWithInput(
  input: string,
  ...args: string[]
): Promise<{ stdout: string; stderr: string; code: number }> {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.end(input);
  return new Promise((resolve) => child.on('close', (code) => resolve({ stdout, stderr, code: code ?? 1 })));
}

async function berth(...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env,
    });
    return { stdout, stderr, code: 0 };
  } catch (error) {
    const e = error as { stdout: string; stderr: string; code: number };
    return { stdout: e.stdout, stderr: e.stderr, code: e.code };
  }
}

// Each command is a new Node.js process opening the store (~1.5 s of CPU alone): a test runs up to five,
// beside the other test files on two cores, hence the budget of the client's tests (test/cli-client).
describe('berth CLI', { timeout: 120_000 }, () => {
  beforeAll(ensureBuilt, 300_000);
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it('documents every command in --help', async () => {
    const { stdout, code } = await berth('--help');
    expect(code).toBe(0);
    for (const word of [
      'serve',
      'create-user',
      'create-credential',
      'list-credentials',
      'revoke-credential',
      'set-credits',
      'maintenance',
      'BERTH_DATABASE_URL',
    ]) {
      expect(stdout).toContain(word);
    }
  });

  it('creates a user and prints its credentials as one JSON object; credentials can be added and revoked', async () => {
    const created = await berth('admin', 'create-user', '--email', 'Ops@Example.com', '--team', 'ops');
    expect(created.code).toBe(0);
    const user = JSON.parse(created.stdout) as Record<string, unknown>;
    expect(Object.keys(user).sort()).toEqual(
      [
        'api_token',
        'db_api_password',
        'db_api_username',
        'email',
        'team',
        'team_id',
        'tools_api_key',
        'user_id',
      ].sort(),
    );
    expect(user).toMatchObject({ email: 'ops@example.com', team: 'ops' });

    const issued = await berth(
      'admin',
      'create-credential',
      '--email',
      'ops@example.com',
      '--kind',
      'tools_key',
    );
    const credential = JSON.parse(issued.stdout) as { id: number; token: string };
    expect(credential.token).toMatch(/^berth_tk_/);
    const listed = await berth('admin', 'list-credentials', '--email', 'ops@example.com');
    expect(listed.stdout).not.toContain(credential.token);
    expect((JSON.parse(listed.stdout) as unknown[]).length).toBe(4);
    const revoked = await berth('admin', 'revoke-credential', '--id', String(credential.id));
    expect(JSON.parse(revoked.stdout)).toEqual({ revoked: credential.id });
  });

  it('sets a password from standard input and prints sign-in links; account mail waits in the outbox', async () => {
    const created = await berthWithInput(
      'a long enough password\n',
      'admin',
      'create-user',
      '--email',
      'signin@example.com',
      '--team',
      'signin',
      '--password-stdin',
      '--sign-in-link',
    );
    expect(created.code).toBe(0);
    const user = JSON.parse(created.stdout) as { sign_in_link: string; user_id: number };
    expect(user.sign_in_link).toMatch(/^http:\/\/[^/]+\/sign-in\/link#token=[A-Za-z0-9_-]{43}$/);
    expect(created.stdout).not.toContain('a long enough password');

    const set = await berthWithInput(
      'another long password',
      'admin',
      'set-password',
      '--email',
      'signin@example.com',
    );
    expect(JSON.parse(set.stdout)).toEqual({ email: 'signin@example.com', password: 'set' });

    const link = await berth('admin', 'sign-in-link', '--email', 'signin@example.com');
    expect(JSON.parse(link.stdout)).toMatchObject({
      sign_in_link: expect.stringContaining('#token=') as string,
    });
    const outbox = await berth('admin', 'outbox', '--email', 'signin@example.com');
    expect(JSON.parse(outbox.stdout)).toEqual([]);
  });

  it('sets one user’s monthly tools allowance, and back to the default', async () => {
    const set = await berth('admin', 'set-credits', '--email', 'ops@example.com', '--credits', '5');
    expect(set.code).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ email: 'ops@example.com', allowance: 5, remaining: 5 });
    const reset = await berth('admin', 'set-credits', '--email', 'ops@example.com', '--credits', 'default');
    expect(JSON.parse(reset.stdout)).toMatchObject({ allowance: 1000 });
    const bad = await berth('admin', 'set-credits', '--email', 'ops@example.com', '--credits', 'lots');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--credits must be a whole number');
  });

  it('rejects bad input with exit code 2 and one message listing every bad variable', async () => {
    const bad = await berth('admin', 'create-credential', '--email', 'ops@example.com', '--kind', 'nope');
    expect(bad.code).toBe(2);
    const config = await berth('serve', '--port', 'x', '--log-level', 'loud');
    expect(config.code).toBe(2);
    expect(config.stderr).toContain('BERTH_PORT');
    expect(config.stderr).toContain('BERTH_LOG_LEVEL');
  });

  it('serves, bootstraps, honours maintenance mode set from another process, and stops on SIGTERM', async () => {
    const serveDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-serve-'));
    const port = await freePort();
    const child = spawn(
      process.execPath,
      // S3 and the edge on any free port: a Berth started by the quick start may hold the defaults.
      [BIN, 'serve', '--port', String(port), '--s3-port', '0', '--edge-port', '0'],
      {
        cwd: ROOT,
        env: { ...process.env, BERTH_LOG_LEVEL: 'info', BERTH_DATA_DIR: serveDir },
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const base = `http://127.0.0.1:${port}`;
      // The ready line names every endpoint.
      const ready = await waitFor(
        () => Promise.resolve(output.split('\n').find((line) => line.includes('Berth is ready'))),
        20_000,
      );
      expect(ready).toContain(`API ${base}`);
      expect(ready).toMatch(/S3 http:\/\/127\.0\.0\.1:\d+/);
      expect((await fetch(`${base}/readyz`)).ok).toBe(true);
      const file = path.join(serveDir, 'bootstrap.json');
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      const boot = JSON.parse(fs.readFileSync(file, 'utf8')) as { api_token: string; team: string };
      expect(boot.team).toBe('default');
      const me = await fetch(`${base}/api/v1/user`, {
        headers: { authorization: `Bearer ${boot.api_token}` },
      });
      expect(me.status).toBe(200);
      const openapi = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: object };
      expect(Object.keys(openapi.paths)).toContain('/api/v1/user');

      const on = await execFileAsync(
        process.execPath,
        [BIN, 'admin', 'maintenance', 'on', '--data-dir', serveDir],
        { cwd: ROOT },
      );
      expect(on.stdout).toContain('"on"');
      await waitFor(
        async () =>
          (await fetch(`${base}/api/v1/user`, { headers: { authorization: `Bearer ${boot.api_token}` } }))
            .status === 503
            ? true
            : undefined,
        5000,
      );
      await execFileAsync(process.execPath, [BIN, 'admin', 'maintenance', 'off', '--data-dir', serveDir], {
        cwd: ROOT,
      });

      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      await expect(fetch(`${base}/healthz`)).rejects.toThrow();
    } finally {
      child.kill('SIGKILL');
      // A stop leaves the data plane (here the edge) running for the next Berth: stop-all ends it.
      stopDataPlane(serveDir);
      fs.rmSync(serveDir, { recursive: true, force: true });
    }
  });

  /** What a first `berth serve` in a new data dir writes on stdout until it is ready, then stopped. */
  async function firstStartOutput(
    prepare: (dir: string) => void,
    extra: NodeJS.ProcessEnv,
  ): Promise<string[]> {
    const serveDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-serve-log-'));
    prepare(serveDir);
    const child = spawn(
      process.execPath,
      [BIN, 'serve', '--port', String(await freePort()), '--s3-port', '0', '--edge-port', '0'],
      {
        cwd: ROOT,
        env: { ...process.env, BERTH_LOG_LEVEL: 'info', BERTH_DATA_DIR: serveDir, ...extra },
        // A pipe, not a terminal: what a service manager or `| tee` gives.
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      await waitFor(() => Promise.resolve(output.includes('Berth is ready') || undefined), 20_000);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      return output.split('\n').filter((line) => line !== '');
    } finally {
      child.kill('SIGKILL');
      stopDataPlane(serveDir);
      fs.rmSync(serveDir, { recursive: true, force: true });
    }
  }

  it('logs readable lines with BERTH_LOG_FORMAT=pretty, one line for the data dir it repaired (issue 26, item 8)', async () => {
    const lines = await firstStartOutput(
      (dir) => {
        // Left open by someone: the directory and a file in it.
        fs.chmodSync(dir, 0o755);
        fs.writeFileSync(path.join(dir, 'notes.txt'), 'x', { mode: 0o644 });
      },
      { BERTH_LOG_FORMAT: 'pretty' },
    );
    for (const line of lines) expect(line).toMatch(/^\d\d:\d\d:\d\d (INFO |WARN |ERROR|FATAL) \S/);
    expect(lines.find((line) => line.includes('Berth is ready'))).toMatch(
      /^\d\d:\d\d:\d\d INFO  Berth is ready: API http/,
    );
    const repaired = lines.filter((line) => line.includes('data dir'));
    expect(repaired).toHaveLength(1);
    expect(repaired[0]).toMatch(
      /WARN  data dir: permissions tightened on 2 entries .* paths=\[".*","[^"]*notes\.txt"\]$/,
    );
  });

  it('logs JSON lines when stdout is not a terminal, without a line per file it restricts', async () => {
    const lines = await firstStartOutput(() => {}, {});
    const records = lines.map((line) => JSON.parse(line) as { level: number; msg: string });
    expect(records.map((r) => r.msg)).toContainEqual(expect.stringContaining('Berth is ready'));
    // The store's new files are restricted at debug: a first start says nothing of them at info.
    expect(records.filter((r) => r.msg.startsWith('data dir'))).toEqual([]);
  });

  /** A port something else holds, for as long as `use` runs. */
  async function withTakenPort(use: (port: string) => Promise<void>): Promise<void> {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      await use(String((taken.address() as net.AddressInfo).port));
    } finally {
      taken.close();
    }
  }

  it('a second serve whose port is taken says which flag moves it, for the API and for S3', () =>
    withTakenPort(async (port) => {
      const api = await berth('serve', '--port', port, '--s3-port', '0', '--edge-port', '0');
      expect(api.code).toBe(1);
      expect(api.stderr).toContain(`port ${port} for the API is already in use`);
      expect(api.stderr).toContain('--port or BERTH_PORT');
      const s3 = await berth('serve', '--port', '0', '--s3-port', port, '--edge-port', '0');
      expect(s3.code).toBe(1);
      expect(s3.stderr).toContain(`port ${port} for the S3 endpoint is already in use`);
      expect(s3.stderr).toContain('--s3-port or BERTH_S3_PORT');
    }));

  it('a second serve whose edge port is taken says which flag moves it', () =>
    withTakenPort(async (port) => {
      const edge = await berth('serve', '--port', '0', '--s3-port', '0', '--edge-port', port);
      expect(edge.code).toBe(1);
      expect(edge.stderr).toContain(`port ${port} for the edge proxy (applications) is already in use`);
      expect(edge.stderr).toContain('--edge-port or BERTH_EDGE_PORT');
    }));
});
