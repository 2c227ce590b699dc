// Application volumes hold at most their `volume_size` (issue 24 item 8): each is an ext4 image
// loop-mounted on the host and bound into every sandbox of the application. First with the sandbox
// and a small image (a write past the size fails with ENOSPC; growth while a sandbox holds it, and
// after; files of a plain directory move onto an image), then an application end to end: a 1 GiB
// volume refuses 1.1 GiB, keeps its data across a redeploy, grows, and goes with the application.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  canGrowOnline,
  ensureSharedVolume,
  GIB,
  imageSize,
  isMounted,
  mountedElsewhere,
  unmountImage,
} from '../../src/drivers/os/disk-images.js';
import { isRoot } from '../../src/drivers/os/users.js';
import {
  ensureAppAccount,
  removeAppAccount,
  spawnSandboxed,
  type SandboxSpec,
} from '../../src/drivers/runtime/local/sandbox.js';
import { DIALECTS } from '../helpers/store.js';
import {
  applyYaml,
  eventually,
  nodeDocument,
  startRuntime,
  waitForDeployment,
  type RuntimeHarness,
} from './helpers.js';
import { nodeAppFiles } from './node-app.js';

const MIB = 1024 * 1024;
const PATH = '/usr/local/bin:/usr/bin:/bin';
/** An application id no real application has, so its account is this run's own. */
const TEST_APP_ID = 910_000_000 + (process.pid % 100_000);

describe.skipIf(!isRoot())('a volume on a disk image, in the sandbox', () => {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-volume-'));
  fs.chmodSync(base, 0o711);
  const image = path.join(base, 'data.ext4');
  const dir = path.join(base, 'data');
  let account: { uid: number; gid: number };

  beforeAll(() => {
    account = ensureAppAccount(TEST_APP_ID)!;
  });
  afterAll(async () => {
    await unmountImage(dir, { detach: true });
    await unmountImage(path.join(base, 'plain'), { detach: true });
    fs.rmSync(base, { recursive: true, force: true });
    removeAppAccount(TEST_APP_ID);
  });

  const spec = (script: string): SandboxSpec => ({
    command: ['/bin/sh', '-c', script],
    cwd: '/data',
    env: { PATH },
    binds: [{ source: dir, target: '/data', writable: true }],
    account,
    memory: undefined,
  });
  async function run(script: string): Promise<{ code: number | null; output: string }> {
    const sandboxed = spawnSandboxed(spec(script));
    let output = '';
    sandboxed.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    sandboxed.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const closed = new Promise((resolve) => sandboxed.stdout.once('close', resolve));
    const exit = await sandboxed.exited;
    await closed;
    return { code: exit.code, output };
  }

  it('refuses a write past the size with ENOSPC inside; the image takes at most its size on the host', async () => {
    fs.mkdirSync(dir, { mode: 0o700 });
    fs.chownSync(dir, account.uid, account.gid);
    expect(await ensureSharedVolume(image, dir, 32 * MIB)).toBeUndefined();
    expect(isMounted(dir)).toBe(true);
    // The mount's root is the application's, as the directory it replaced.
    expect(fs.statSync(dir).uid).toBe(account.uid);
    const result = await run(
      'echo kept > kept.txt; dd if=/dev/zero of=big bs=1M count=64 2>&1; echo "dd=$?"; df -B1 --output=size /data | tail -1',
    );
    expect(result.output).toContain('No space left on device');
    expect(result.output).toMatch(/^dd=1$/m);
    const size = Number(result.output.trim().split('\n').at(-1));
    expect(size).toBeLessThanOrEqual(32 * MIB);
    // The sparse image holds what was written, never more than its size.
    expect(fs.statSync(image).blocks * 512).toBeLessThanOrEqual(32 * MIB);
    expect(fs.statSync(image).blocks * 512).toBeGreaterThan(16 * MIB);
    fs.rmSync(path.join(dir, 'big'));
  });

  it('grows online where the kernel allows it, else once no sandbox holds it; the data stays', async () => {
    const holder = spawnSandboxed(spec('echo ready; exec sleep 1000'));
    await new Promise<void>((resolve) => holder.stdout.once('data', () => resolve()));
    expect(mountedElsewhere(dir)).toBe(true);
    const note = await ensureSharedVolume(image, dir, 48 * MIB);
    if (canGrowOnline()) {
      expect(note).toBeUndefined();
      expect(imageSize(image)).toBe(48 * MIB);
    } else {
      // This machine kind: no CAP_SYS_RESOURCE, so growing a file system in use waits.
      expect(note).toMatch(
        /^volume stays at 32Mi until no process uses it .* it grows to 48Mi when the application next starts from stopped$/,
      );
      expect(imageSize(image)).toBe(32 * MIB);
    }
    holder.kill('SIGKILL');
    await holder.exited;
    expect(mountedElsewhere(dir)).toBe(false);
    expect(await ensureSharedVolume(image, dir, 48 * MIB)).toBeUndefined();
    expect(imageSize(image)).toBe(48 * MIB);
    const after = await run('cat kept.txt; df -B1 --output=size /data | tail -1');
    expect(after.output.split('\n')[0]).toBe('kept');
    expect(Number(after.output.trim().split('\n').at(-1))).toBeGreaterThan(36 * MIB);
  });

  it('moves the files of a volume that was a plain directory onto an image, owner and mode kept', async () => {
    const plain = path.join(base, 'plain');
    fs.mkdirSync(path.join(plain, 'sub'), { recursive: true, mode: 0o750 });
    fs.chmodSync(plain, 0o750);
    fs.writeFileSync(path.join(plain, 'sub', 'file.txt'), 'from an earlier Berth\n');
    fs.chownSync(plain, account.uid, account.gid);
    expect(await ensureSharedVolume(path.join(base, 'plain.ext4'), plain, 32 * MIB)).toBeUndefined();
    expect(isMounted(plain)).toBe(true);
    expect(fs.readFileSync(path.join(plain, 'sub', 'file.txt'), 'utf8')).toBe('from an earlier Berth\n');
    expect(fs.statSync(plain).uid).toBe(account.uid);
    expect(fs.statSync(plain).mode & 0o777).toBe(0o750);
  });
});

const data = <T>(response: { json<U>(): U }): T => response.json<{ data: T }>().data;

describe.skipIf(!isRoot()).each(DIALECTS)('an application’s volume (%s)', (dialect) => {
  let h: RuntimeHarness;
  let appId: number;
  const exec = async (command: string) => {
    const response = await h.t.request({
      method: 'POST',
      url: `/api/v1/applications/${appId}/exec`,
      headers: h.t.auth.platform,
      payload: { command },
    });
    expect(response.statusCode, response.body).toBe(200);
    return data<{ output: string; exit_code: number }>(response);
  };
  const document = (size: number, extra = false) =>
    nodeDocument('acme', 'vol', h.git.url('vol'), {
      spec: {
        volumes: [
          { name: 'data', mount_path: '/data', volume_size: size },
          ...(extra ? [{ name: 'extra', mount_path: '/extra', volume_size: 1 }] : []),
        ],
      },
    });

  beforeAll(async () => {
    h = await startRuntime(dialect);
    h.repository('vol').commit(nodeAppFiles('v1'));
  }, 180_000);
  afterAll(() => h.close());

  it('holds at most volume_size GiB, keeps its data across a redeploy, grows, and goes with the application', async () => {
    const applied = await applyYaml(h.t, document(1, true));
    appId = applied.application_id;
    expect((await waitForDeployment(h.t, appId, applied.deployment_id!)).status).toBe('success');
    const root = `${h.t.ctx.config.dataDir}/apps/${appId}`;
    const volume = `${root}/volumes/data`;
    const image = `${root}/volume-images/data.ext4`;
    expect(isMounted(volume)).toBe(true);
    expect(imageSize(image)).toBe(GIB);
    expect(isMounted(`${root}/volumes/extra`)).toBe(true);

    const full = await exec(
      'echo kept > /data/kept.txt; fallocate -l 1100M /data/big; echo "fallocate=$?"; rm -f /data/big; df -B1 --output=size /data | tail -1',
    );
    expect(full.output).toContain('No space left on device');
    expect(full.output).toMatch(/^fallocate=1$/m);
    expect(Number(full.output.trim().split('\n').at(-1))).toBeLessThanOrEqual(GIB);
    expect(fs.statSync(image).blocks * 512).toBeLessThanOrEqual(GIB);

    // A redeploy: new replicas bind the same mount.
    const again = await h.t.request({
      method: 'POST',
      url: `/api/v1/applications/${appId}/deploy`,
      headers: h.t.auth.platform,
      payload: {},
    });
    expect((await waitForDeployment(h.t, appId, data<{ id: number }>(again).id)).status).toBe('success');
    expect((await exec('cat /data/kept.txt')).output).toBe('kept\n');

    // A volume removed from the application goes at the next deployment, mount, image and files.
    const removed = await h.t.request({
      method: 'DELETE',
      url: `/api/v1/applications/${appId}/volumes/extra`,
      headers: h.t.auth.platform,
    });
    expect(removed.statusCode, removed.body).toBe(200);
    // Growth: online where the kernel allows it; here at the next start from stopped.
    const grown = await applyYaml(h.t, document(2));
    expect((await waitForDeployment(h.t, appId, grown.deployment_id!)).status).toBe('success');
    const logs = data<Array<{ line: string }>>(
      await h.t.request({
        url: `/api/v1/applications/${appId}/deployments/${grown.deployment_id}/logs`,
        headers: h.t.auth.platform,
      }),
    );
    const logText = logs.map((l) => l.line).join('\n');
    expect(logText).toContain("Volume 'extra' was removed from the application: its files are deleted");
    expect(isMounted(`${root}/volumes/extra`)).toBe(false);
    expect(fs.existsSync(`${root}/volumes/extra`)).toBe(false);
    expect(fs.existsSync(`${root}/volume-images/extra.ext4`)).toBe(false);
    if (!canGrowOnline()) {
      expect(logText).toContain("Volume 'data': volume stays at 1Gi until no process uses it");
      expect(imageSize(image)).toBe(GIB);
      for (const action of ['suspend', 'resume']) {
        const answer = await h.t.request({
          method: 'POST',
          url: `/api/v1/applications/${appId}/${action}`,
          headers: h.t.auth.platform,
        });
        expect(answer.statusCode, answer.body).toBe(200);
      }
    }
    expect(imageSize(image)).toBe(2 * GIB);
    const after = await exec('cat /data/kept.txt; df -B1 --output=size /data | tail -1');
    expect(after.output.split('\n')[0]).toBe('kept');
    expect(Number(after.output.trim().split('\n').at(-1))).toBeGreaterThan(1.5 * GIB);

    const deleted = await h.t.request({
      method: 'DELETE',
      url: `/api/v1/applications/${appId}`,
      headers: h.t.auth.platform,
    });
    expect(deleted.statusCode).toBe(202);
    await eventually(() => Promise.resolve(!fs.existsSync(root)), 30_000, 'the application’s files to go');
    expect(isMounted(volume)).toBe(false);
    expect(fs.readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(root);
    // Three deployments, a suspend and a resume, each with its drain: the runtime tests' budget, not
    // the 30 s default a unit test gets.
  }, 120_000);
});
