// The sftp service runner with real processes: an ssh2 client logs in and works in the volume; a wrong
// password, exec, shell and forwarding are refused; `..`, absolute paths and the application's own
// symlinks (to /etc, to files and directories outside) stay inside the volume; the server runs jailed
// (its root holds the volume and read-only system bits only) as the application's account; a killed
// server reads not running and starts again with its host key and data.
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { Client, type SFTPWrapper } from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ensureSystemAccount,
  forgetSystemAccount,
  findAccount,
  isRoot,
} from '../../../src/drivers/os/users.js';
import { createSftpRunner } from '../../../src/drivers/services/sftp.js';
import type { ServiceRunner, ServiceRuntime, ServiceSpec } from '../../../src/drivers/services/types.js';
import { freePort } from '../../helpers/processes.js';

const ACCOUNT = `berth-sftp-t${process.pid % 100_000}`;
const USERNAME = 'alice';
const PASSWORD = 'correct horse battery staple';

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-sftp-'));
// The application's account must reach the volume inside (search only).
fs.chmodSync(base, 0o711);
const dataDir = path.join(base, 'data');
const volume = path.join(base, 'apps', '1', 'volumes', 'uploads');
const otherVolume = path.join(base, 'apps', '1', 'volumes', 'other');
const outsideFile = path.join(base, 'outside-secret.txt');
fs.mkdirSync(volume, { recursive: true });
fs.mkdirSync(otherVolume, { recursive: true });
fs.chmodSync(path.join(base, 'apps'), 0o711);
fs.writeFileSync(outsideFile, 'BERTH OUTSIDE SECRET\n', { mode: 0o644 });

let account: { uid: number; gid: number } | undefined;
let runner: ServiceRunner;

beforeAll(() => {
  if (isRoot()) {
    account = ensureSystemAccount(ACCOUNT);
    for (const dir of [volume, otherVolume]) fs.chownSync(dir, account.uid, account.gid);
  }
  runner = createSftpRunner({ dataDir, logger: pino({ level: 'silent' }) });
});

afterAll(() => {
  fs.rmSync(base, { recursive: true, force: true });
  if (isRoot()) {
    forgetSystemAccount(ACCOUNT);
    if (findAccount(ACCOUNT)) execFileSync('userdel', ['--', ACCOUNT], { stdio: 'ignore' });
  }
});

async function makeSpec(overrides: Partial<ServiceSpec> = {}): Promise<ServiceSpec> {
  return {
    id: randomUUID(),
    type: 'sftp',
    applicationId: 1,
    teamId: 1,
    version: null,
    name: 'files',
    memoryMiB: 256,
    port: await freePort(),
    username: 'generated-user',
    password: 'generated-password',
    settings: { username: USERNAME },
    secrets: { password: PASSWORD },
    volumes: [
      { name: 'other', hostPath: otherVolume, mountPath: '/app/other' },
      { name: 'uploads', hostPath: volume, mountPath: '/app/uploads' },
    ],
    appUser: account,
    ...overrides,
  };
}

interface Session {
  client: Client;
  sftp: SFTPWrapper;
  hostKey: string;
}

function connect(port: number, username: string, password: string): Promise<Session> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    let hostKey = '';
    client.on('error', reject);
    client.on('ready', () => {
      client.sftp((error, sftp) => (error ? reject(error) : resolve({ client, sftp, hostKey })));
    });
    client.connect({
      host: '127.0.0.1',
      port,
      username,
      password,
      readyTimeout: 10_000,
      hostVerifier: (key: Buffer) => {
        hostKey = createHash('sha256').update(key).digest('hex');
        return true;
      },
    });
  });
}

function call<T>(work: (done: (error: Error | null | undefined, value?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) =>
    work((error, value) => (error ? reject(error) : resolve(value as T))),
  );
}

const sftpOps = (sftp: SFTPWrapper) => ({
  write: (p: string, data: string) => call<void>((done) => sftp.writeFile(p, data, (e) => done(e))),
  read: (p: string) => call<Buffer>((done) => sftp.readFile(p, (e, d) => done(e, d))),
  list: (p: string) =>
    call<string[]>((done) =>
      sftp.readdir(p, (e, list) =>
        done(
          e,
          list?.map((entry) => entry.filename),
        ),
      ),
    ),
  rename: (a: string, b: string) => call<void>((done) => sftp.rename(a, b, (e) => done(e))),
  remove: (p: string) => call<void>((done) => sftp.unlink(p, (e) => done(e))),
  mkdir: (p: string) => call<void>((done) => sftp.mkdir(p, (e) => done(e))),
  rmdir: (p: string) => call<void>((done) => sftp.rmdir(p, (e) => done(e))),
  realpath: (p: string) => call<string>((done) => sftp.realpath(p, (e, r) => done(e, r))),
  stat: (p: string) => call<unknown>((done) => sftp.stat(p, (e, s) => done(e, s))),
});

describe('sftp runner', () => {
  let spec: ServiceSpec;
  let runtime: ServiceRuntime;

  beforeAll(async () => {
    spec = await makeSpec({ settings: { username: USERNAME, volume: 'uploads' } });
    runtime = await runner.provision(spec);
  }, 60_000);

  afterAll(async () => {
    await runner.delete(spec);
  });

  it('listens on the port it was given, as a process of its own', async () => {
    expect(runtime.host).toBe('127.0.0.1');
    expect(runtime.port).toBe(spec.port);
    expect(runtime.pid).not.toBe(process.pid);
    expect(runtime.version).toMatch(/^ssh2 \d+\.\d+/);
    expect(runtime.location).toBe(path.join(dataDir, 'services', spec.id));
    const key = path.join(runtime.location!, 'host_key');
    expect(fs.statSync(key).mode & 0o777).toBe(0o600);
    expect(await runner.status(spec)).toEqual({ running: true, pid: runtime.pid });
  });

  it('serves the volume to the right password: upload, list, read back, rename, remove', async () => {
    const { client, sftp } = await connect(runtime.port, USERNAME, PASSWORD);
    try {
      const ops = sftpOps(sftp);
      await ops.write('/hello.txt', 'hello over sftp\n');
      expect(fs.readFileSync(path.join(volume, 'hello.txt'), 'utf8')).toBe('hello over sftp\n');
      await ops.mkdir('/docs');
      await ops.write('docs/note.txt', 'a note');
      expect((await ops.list('/')).sort()).toEqual(['docs', 'hello.txt']);
      expect((await ops.read('/hello.txt')).toString()).toBe('hello over sftp\n');
      await ops.rename('/hello.txt', '/docs/renamed.txt');
      expect(fs.existsSync(path.join(volume, 'hello.txt'))).toBe(false);
      expect(fs.readFileSync(path.join(volume, 'docs', 'renamed.txt'), 'utf8')).toBe('hello over sftp\n');
      expect((await ops.list('/docs')).sort()).toEqual(['note.txt', 'renamed.txt']);
      if (account) {
        // Written by the application's account, not Berth's.
        for (const name of ['docs', 'docs/note.txt', 'docs/renamed.txt']) {
          const stats = fs.statSync(path.join(volume, name));
          expect({ name, uid: stats.uid, gid: stats.gid }).toEqual({
            name,
            uid: account.uid,
            gid: account.gid,
          });
        }
      }
      await ops.remove('/docs/renamed.txt');
      await ops.remove('/docs/note.txt');
      await ops.rmdir('/docs');
      expect(fs.readdirSync(volume)).toEqual([]);
      // The other volume was not the one chosen.
      expect(fs.readdirSync(otherVolume)).toEqual([]);
    } finally {
      client.end();
    }
  });

  it('refuses a wrong password and another username, and logs logins without passwords', async () => {
    await expect(connect(runtime.port, USERNAME, 'wrong password')).rejects.toThrow(/authentication/i);
    await expect(connect(runtime.port, 'generated-user', PASSWORD)).rejects.toThrow(/authentication/i);
    // The generated password is not the login when secrets.password is set.
    await expect(connect(runtime.port, USERNAME, 'generated-password')).rejects.toThrow(/authentication/i);
    const { client } = await connect(runtime.port, USERNAME, PASSWORD);
    client.end();
    await sleep(200);
    const lines = await runner.logs(spec, 100);
    expect(lines.some((line) => /login failed username="alice"/.test(line))).toBe(true);
    expect(lines.some((line) => /login ok username="alice"/.test(line))).toBe(true);
    const text = lines.join('\n');
    for (const secret of [PASSWORD, 'wrong password', 'generated-password'])
      expect(text).not.toContain(secret);
    expect(await runner.logs(spec, 1)).toHaveLength(1);
  });

  it('keeps `..` and absolute paths inside the volume', async () => {
    const { client, sftp } = await connect(runtime.port, USERNAME, PASSWORD);
    try {
      const ops = sftpOps(sftp);
      expect(await ops.realpath('/../../')).toBe('/');
      expect(await ops.realpath('.')).toBe('/');
      expect(await ops.realpath('../../etc/..')).toBe('/');
      await ops.write('/../../escape.txt', 'stayed');
      expect(fs.readFileSync(path.join(volume, 'escape.txt'), 'utf8')).toBe('stayed');
      expect(fs.existsSync(path.join(base, 'apps', '1', 'escape.txt'))).toBe(false);
      expect(fs.existsSync(path.join(base, 'escape.txt'))).toBe(false);
      await expect(ops.read('/etc/passwd')).rejects.toThrow(/no such file/i);
      await expect(ops.read(`/../..${outsideFile}`)).rejects.toThrow(/no such file/i);
      await expect(ops.list('/../../..')).resolves.toEqual(['escape.txt']);
      await ops.remove('escape.txt');
    } finally {
      client.end();
    }
  });

  it("does not follow the application's symlinks out of the volume", async () => {
    // Planted as the application would, from its own sandbox.
    const links: Array<[string, string]> = [
      ['etc-link', '/etc'],
      ['secret-link', outsideFile],
      ['relative-link', '../../../../outside-secret.txt'],
      ['base-link', base],
      ['proc-link', '/proc/self/environ'],
      ['dangling-link', path.join(base, 'created-through-link.txt')],
    ];
    for (const [name, target] of links) {
      fs.symlinkSync(target, path.join(volume, name));
      if (account) fs.lchownSync(path.join(volume, name), account.uid, account.gid);
    }
    fs.writeFileSync(path.join(volume, 'inside.txt'), 'inside');
    fs.symlinkSync('inside.txt', path.join(volume, 'inside-link'));
    const { client, sftp } = await connect(runtime.port, USERNAME, PASSWORD);
    try {
      const ops = sftpOps(sftp);
      for (const file of [
        '/etc-link/passwd',
        '/etc-link/hostname',
        '/secret-link',
        '/relative-link',
        '/base-link/outside-secret.txt',
        '/proc-link',
      ]) {
        const read = await ops.read(file).then(
          (data) => data.toString(),
          (error: Error) => error,
        );
        expect(read instanceof Error ? 'refused' : read, file).toBe('refused');
      }
      await expect(ops.list('/etc-link')).rejects.toThrow();
      await expect(ops.list('/base-link')).rejects.toThrow();
      await expect(ops.write('/dangling-link', 'through')).rejects.toThrow();
      await expect(ops.write('/base-link/planted.txt', 'through')).rejects.toThrow();
      expect(fs.existsSync(path.join(base, 'created-through-link.txt'))).toBe(false);
      expect(fs.existsSync(path.join(base, 'planted.txt'))).toBe(false);
      expect(fs.readFileSync(outsideFile, 'utf8')).toBe('BERTH OUTSIDE SECRET\n');
      // A link that stays inside works, and the links themselves can be listed and removed.
      expect((await ops.read('/inside-link')).toString()).toBe('inside');
      expect(await ops.list('/')).toEqual(expect.arrayContaining(['etc-link', 'secret-link', 'inside-link']));
      for (const [name] of links) await ops.remove(name);
      await ops.remove('inside-link');
      await ops.remove('inside.txt');
      expect(fs.readdirSync(volume)).toEqual([]);
    } finally {
      client.end();
    }
  });

  it("runs in a jail that holds only the volume and read-only system files, as the application's account", () => {
    const pid = runtime.pid!;
    // What the server's root is, seen from the host: no /etc, /proc, /home or Berth's data.
    expect(fs.readdirSync(`/proc/${pid}/root`).sort()).toEqual(
      ['bin', 'data', 'dev', 'lib', 'lib64', 'opt', 'sbin', 'tmp', 'usr'].sort(),
    );
    expect(fs.readlinkSync(`/proc/${pid}/exe`)).toMatch(/node$/);
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const uid = Number(/^Uid:\s+(\d+)/m.exec(status)![1]);
    expect(uid).toBe(account?.uid ?? process.getuid!());
    // No secret in its command line or its environment.
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    const environ = fs.readFileSync(`/proc/${pid}/environ`, 'utf8');
    for (const text of [cmdline, environ]) {
      expect(text).not.toContain(PASSWORD);
      expect(text).not.toContain('PRIVATE KEY');
    }
    // Nothing but the working directory bwrap sets.
    expect(environ.split('\0').filter(Boolean)).toEqual(['PWD=/']);
  });

  it('refuses exec, shell and port forwarding', async () => {
    const { client } = await connect(runtime.port, USERNAME, PASSWORD);
    try {
      await expect(call((done) => client.exec('id', (e, stream) => done(e, stream)))).rejects.toThrow();
      await expect(call((done) => client.shell(false, (e, stream) => done(e, stream)))).rejects.toThrow();
      await expect(
        call((done) => client.forwardOut('127.0.0.1', 0, '127.0.0.1', 22, (e, stream) => done(e, stream))),
      ).rejects.toThrow();
      await expect(
        call((done) => client.forwardIn('127.0.0.1', 0, (e, port) => done(e, port))),
      ).rejects.toThrow();
    } finally {
      client.end();
    }
    await sleep(200);
    const text = (await runner.logs(spec, 100)).join('\n');
    expect(text).toContain('refused exec');
    expect(text).toContain('refused shell');
  });

  it('reads not running once its process is killed, and starts again with its key and data', async () => {
    const first = await connect(runtime.port, USERNAME, PASSWORD);
    await sftpOps(first.sftp).write('/kept.txt', 'kept');
    first.client.end();
    process.kill(runtime.pid!, 'SIGKILL');
    for (let i = 0; i < 50 && (await runner.status(spec)).running; i++) await sleep(100);
    expect(await runner.status(spec)).toEqual({ running: false, pid: null });
    await expect(connect(runtime.port, USERNAME, PASSWORD)).rejects.toThrow();

    runtime = await runner.start(spec);
    expect(runtime.port).toBe(spec.port);
    expect((await runner.status(spec)).running).toBe(true);
    // start is a no-op when it runs.
    expect((await runner.start(spec)).pid).toBe(runtime.pid);
    const second = await connect(runtime.port, USERNAME, PASSWORD);
    try {
      expect(second.hostKey).toBe(first.hostKey);
      expect((await sftpOps(second.sftp).read('/kept.txt')).toString()).toBe('kept');
      await sftpOps(second.sftp).remove('/kept.txt');
    } finally {
      second.client.end();
    }

    const restarted = await runner.restart(spec);
    expect(restarted.pid).not.toBe(runtime.pid);
    runtime = restarted;
    await runner.stop(spec);
    expect(await runner.status(spec)).toEqual({ running: false, pid: null });
    await runner.stop(spec); // a no-op
    runtime = await runner.start(spec);
    expect((await runner.status(spec)).running).toBe(true);
  }, 60_000);
});

describe('sftp runner, settings', () => {
  it('needs a volume, and one the application has', async () => {
    await expect(runner.provision(await makeSpec({ volumes: [] }))).rejects.toThrow(
      "sftp service 'files' needs a volume in spec.volumes",
    );
    await expect(runner.provision(await makeSpec({ settings: { volume: 'missing' } }))).rejects.toThrow(
      /settings.volume 'missing' is not one of the application's volumes/,
    );
    await expect(runner.provision(await makeSpec({ settings: { volume: '../uploads' } }))).rejects.toThrow(
      /settings.volume must be a volume name/,
    );
    await expect(runner.provision(await makeSpec({ id: '../escape' }))).rejects.toThrow(/invalid/);
    expect(fs.existsSync(path.join(dataDir, 'escape'))).toBe(false);
  });

  it('falls back to the first volume, the spec username and password, and another port when taken', async () => {
    const spec = await makeSpec({
      settings: {},
      secrets: {},
      volumes: [{ name: 'other', hostPath: otherVolume, mountPath: '/app/other' }],
    });
    const blocker = await new Promise<import('node:net').Server>((resolve) => {
      void import('node:net').then((net) => {
        const server = net.createServer();
        server.listen(spec.port, '127.0.0.1', () => resolve(server));
      });
    });
    try {
      const runtime = await runner.provision(spec);
      expect(runtime.port).not.toBe(spec.port);
      expect(runtime.extra).toEqual({ volume: 'other' });
      const { client, sftp } = await connect(runtime.port, 'generated-user', 'generated-password');
      try {
        await sftpOps(sftp).write('/x.txt', 'x');
        expect(fs.readFileSync(path.join(otherVolume, 'x.txt'), 'utf8')).toBe('x');
      } finally {
        client.end();
      }
      await runner.delete(spec);
      expect(fs.existsSync(path.join(dataDir, 'services', spec.id))).toBe(false);
      expect(await runner.status(spec)).toEqual({ running: false, pid: null });
      // The volume is the application's: it stays.
      expect(fs.readFileSync(path.join(otherVolume, 'x.txt'), 'utf8')).toBe('x');
      fs.rmSync(path.join(otherVolume, 'x.txt'));
    } finally {
      blocker.close();
    }
  }, 60_000);

  it('serves when another process takes every port it could have probed before the server listens', async () => {
    // Issue 27: under load the server once stopped with "exit 1" because the port Berth had probed free
    // was taken before the server bound it. Here the race is made certain: while the runner provisions,
    // every loopback port a server in this process releases is bound at once by another listener (the
    // "other process"), before the release is reported. The server must still come up, on a port the
    // kernel handed it while it listened.
    const spec = await makeSpec();
    const taken: net.Server[] = [];
    const takeAfterRelease = (port: number) =>
      new Promise<void>((resolve) => {
        const other = net.createServer();
        taken.push(other);
        other.once('error', () => resolve());
        other.listen(port, '127.0.0.1', () => resolve());
      });
    taken.push(
      await new Promise<net.Server>((resolve) => {
        const blocker = net.createServer();
        blocker.listen(spec.port, '127.0.0.1', () => resolve(blocker));
      }),
    );
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with a server as `this`
    const close = net.Server.prototype.close;
    net.Server.prototype.close = function (this: net.Server, callback?: (error?: Error) => void) {
      const address = this.address();
      if (taken.includes(this) || typeof address !== 'object' || !address) return close.call(this, callback);
      return close.call(this, (error?: Error) => {
        void takeAfterRelease(address.port).then(() => callback?.(error));
      });
    };
    let runtime: ServiceRuntime;
    try {
      runtime = await runner.provision(spec);
    } finally {
      net.Server.prototype.close = close;
    }
    try {
      expect(runtime.port).not.toBe(spec.port);
      const { client, sftp } = await connect(runtime.port, USERNAME, PASSWORD);
      try {
        await sftpOps(sftp).write('/raced.txt', 'raced');
        expect(fs.readFileSync(path.join(otherVolume, 'raced.txt'), 'utf8')).toBe('raced');
      } finally {
        client.end();
      }
    } finally {
      await runner.delete(spec);
      fs.rmSync(path.join(otherVolume, 'raced.txt'), { force: true });
      for (const server of taken) server.close();
    }
  }, 60_000);
});
