// The chrome-headless service runner with the real Chromium: an application's client renders a page of
// its own over the token-guarded DevTools proxy (Playwright with CHROME_URL, raw CDP with
// BROWSER_WS_ENDPOINT as puppeteer uses it), nothing else gets in, the memory cgroup holds the whole
// browser, a crash is recovered by start(), and stop/delete leave nothing behind.
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { isAlive } from '../../../src/drivers/databases/local/process.js';
import { accountName, CHROME_POLICY, createChromeRunner } from '../../../src/drivers/services/chrome.js';
import { LOCAL_URL_REFUSED } from '../../../src/drivers/services/devtools-proxy.js';
import type { ServiceSpec } from '../../../src/drivers/services/types.js';
import { detectCgroups, groupDir } from '../../../src/drivers/os/cgroups.js';
import { findAccount } from '../../../src/drivers/os/users.js';
import { freePort, isRoot, waitFor } from '../../helpers/processes.js';

const TITLE = 'Rendered by the chrome-headless service';
const logger = pino({ level: 'silent' });

function specFor(dataDirPort: number | undefined, memoryMiB = 384): ServiceSpec {
  return {
    id: randomUUID(),
    type: 'chrome-headless',
    applicationId: 1,
    teamId: 1,
    version: null,
    name: 'browser',
    memoryMiB,
    port: dataDirPort,
    username: 'app',
    password: randomBytes(24).toString('base64url'),
    settings: {},
    secrets: {},
    volumes: [],
  };
}

/**
 * Processes on this host that belong to instance `id`: those of its OS account when it has one (the
 * sandboxed renderers' environment cannot be read), else those with its marker in their environment.
 */
const uids = new Map<string, number | undefined>();
function instanceProcesses(id: string): number[] {
  // Remembered: the account is gone after a delete, and its processes must be too.
  if (!uids.has(id) && isRoot()) uids.set(id, findAccount(accountName(id))?.uid);
  const uid = uids.get(id);
  const marker = `BERTH_SERVICE_ID=${id}\0`;
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = fs.readFileSync(`/proc/${entry}/status`, 'utf8');
      if (/^State:\s+Z/m.test(status)) continue;
      const mine =
        uid !== undefined
          ? Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) === uid
          : fs.readFileSync(`/proc/${entry}/environ`, 'latin1').includes(marker);
      if (mine) found.push(Number(entry));
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

/** TCP sockets in LISTEN state held by any of `pids`. */
function listeningSockets(pids: number[]): string[] {
  const inodes = new Set<string>();
  for (const pid of pids) {
    try {
      for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
        const link = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
        const match = /^socket:\[(\d+)\]$/.exec(link);
        if (match) inodes.add(match[1]!);
      }
    } catch {
      // Exited meanwhile.
    }
  }
  const listening: string[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const row of fs.readFileSync(table, 'utf8').split('\n').slice(1)) {
      const cols = row.trim().split(/\s+/);
      if (cols[3] === '0A' && inodes.has(cols[9]!)) listening.push(cols[1]!);
    }
  }
  return listening;
}

/** A raw CDP client, as puppeteer.connect({ browserWSEndpoint }) is. */
class RawClient {
  private nextId = 1;
  private readonly waiting = new Map<number, (message: Record<string, unknown>) => void>();
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      const message = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
      if (typeof message.id === 'number' && message.sessionId === undefined) {
        this.waiting.get(message.id)?.(message);
        this.waiting.delete(message.id);
      }
    });
    this.closed = new Promise((resolve) =>
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
  }

  static open(url: string, options: WebSocket.ClientOptions = {}): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, options);
      ws.once('open', () => resolve(new RawClient(ws)));
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`status ${res.statusCode}`)));
    });
  }

  send(method: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  close(): void {
    this.ws.close();
  }
}

async function render(chromeUrl: string, pageUrl: string): Promise<{ title: string; png: Buffer }> {
  const browser = await chromium.connectOverCDP(chromeUrl, { timeout: 30_000 });
  try {
    const context = await browser.newContext({ viewport: { width: 400, height: 300 } });
    const page = await context.newPage();
    await page.goto(pageUrl, { waitUntil: 'load' });
    const title = await page.title();
    const png = await page.screenshot({ type: 'png' });
    await context.close();
    return { title, png };
  } finally {
    await browser.close();
  }
}

/** A PNG's width and height, from its IHDR chunk. */
const pngSize = (png: Buffer) => ({ width: png.readUInt32BE(16), height: png.readUInt32BE(20) });

describe('chrome-headless service runner', () => {
  let dataDir: string;
  let site: http.Server;
  let siteUrl: string;
  let hits = 0;
  const runner = () => createChromeRunner({ dataDir, logger });
  let chrome: ReturnType<typeof createChromeRunner>;
  const cleanups: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-chrome-'));
    fs.chmodSync(dataDir, 0o711);
    site = http.createServer((_req, res) => {
      hits += 1;
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(`<!doctype html><title>${TITLE}</title><body style="background:#0a0">hello</body>`);
    });
    const port = await freePort();
    await new Promise<void>((resolve) => site.listen(port, '127.0.0.1', resolve));
    siteUrl = `http://127.0.0.1:${port}/`;
    chrome = runner();
  });

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    await new Promise((resolve) => site.close(resolve));
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** Provisions an instance that the suite deletes at the end. */
  async function provision(spec: ServiceSpec, on = chrome) {
    cleanups.push(() => on.delete({ id: spec.id, type: spec.type }));
    return on.provision(spec);
  }

  it('renders a page of the application over CHROME_URL, on a proxy: Chromium itself listens on no port', async () => {
    const port = await freePort();
    const spec = specFor(port);
    const runtime = await provision(spec);
    expect(runtime).toMatchObject({
      host: '127.0.0.1',
      port,
      location: path.join(dataDir, 'services', spec.id),
    });
    expect(runtime.version).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(runtime.extra).toEqual({
      path: `/${spec.password}`,
      websocketPath: `/devtools/browser/${spec.id}`,
    });

    const chromeUrl = `http://127.0.0.1:${runtime.port}${runtime.extra!.path}`;
    const before = hits;
    const { title, png } = await render(chromeUrl, siteUrl);
    expect(title).toBe(TITLE);
    expect(pngSize(png)).toEqual({ width: 400, height: 300 });
    expect(hits).toBeGreaterThan(before);

    // The pid is Chromium's browser process, on the pipe, as the instance's own account.
    const pid = runtime.pid!;
    expect(fs.readlinkSync(`/proc/${pid}/exe`)).toMatch(/chromium/);
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    expect(cmdline).toContain('--remote-debugging-pipe');
    expect(cmdline.some((arg) => arg.startsWith('--remote-debugging-port'))).toBe(false);
    expect(cmdline).toContain(
      `--user-data-dir=${path.join(dataDir, 'services', spec.id, 'browser', 'profile')}`,
    );
    if (isRoot()) {
      const account = findAccount(accountName(spec.id));
      expect(account).toBeDefined();
      const uid = /^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1];
      expect(Number(uid)).toBe(account!.uid);
      expect(fs.statSync(path.join(dataDir, 'services', spec.id, 'browser')).uid).toBe(account!.uid);
    }
    const processes = instanceProcesses(spec.id);
    expect(processes).toContain(pid);
    expect(processes.length).toBeGreaterThan(1);
    expect(listeningSockets(processes)).toEqual([]);
  }, 90_000);

  it('serves BROWSER_WS_ENDPOINT to several raw CDP clients at once, each in a session of its own', async () => {
    const spec = specFor(undefined);
    const runtime = await provision(spec);
    const base = `http://127.0.0.1:${runtime.port}${runtime.extra!.path}`;
    const version = (await (await fetch(`${base}/json/version`)).json()) as Record<string, string>;
    const endpoint = `ws://127.0.0.1:${runtime.port}/${spec.password}/devtools/browser/${spec.id}`;
    expect(version.webSocketDebuggerUrl).toBe(endpoint);
    expect(version.Browser).toMatch(/^(Headless)?Chrome\//);
    // Playwright asks with a trailing slash.
    expect((await fetch(`${base}/json/version/`)).status).toBe(200);

    const a = await RawClient.open(endpoint);
    const b = await RawClient.open(endpoint);
    // Both use id 1: each answer reaches its own client.
    const [va, vb] = await Promise.all([a.send('Browser.getVersion'), b.send('Browser.getVersion')]);
    expect(va).toMatchObject({ id: 1, result: { product: version.Browser } });
    expect(vb).toMatchObject({ id: 1, result: { product: version.Browser } });

    const created = await a.send('Target.createTarget', { url: siteUrl });
    const targetId = (created.result as { targetId: string }).targetId;
    const pageTargets = async (client: RawClient) =>
      (
        (await client.send('Target.getTargets')).result as { targetInfos: Array<{ targetId: string }> }
      ).targetInfos.map((info) => info.targetId);
    expect(await pageTargets(b)).toContain(targetId);

    // /json/list names the page; its own endpoint drives it.
    const list = (await (await fetch(`${base}/json/list`)).json()) as Array<Record<string, string>>;
    const entry = list.find((item) => item.id === targetId);
    expect(entry?.webSocketDebuggerUrl).toBe(
      `ws://127.0.0.1:${runtime.port}/${spec.password}/devtools/page/${targetId}`,
    );
    const pageClient = await RawClient.open(entry!.webSocketDebuggerUrl!);
    const evaluated = await waitFor(async () => {
      const answer = await pageClient.send('Runtime.evaluate', { expression: 'document.title' });
      const value = (answer.result as { result?: { value?: string } } | undefined)?.result?.value;
      return value === TITLE ? value : undefined;
    });
    expect(evaluated).toBe(TITLE);
    pageClient.close();

    // A client's pages go when it leaves.
    a.close();
    await a.closed;
    await waitFor(async () => ((await pageTargets(b)).includes(targetId) ? undefined : true));

    // Browser.close ends the caller's connection, not the browser of the others.
    const c = await RawClient.open(endpoint);
    expect(await c.send('Browser.close')).toEqual({ id: 1, result: {} });
    expect((await c.closed).code).toBe(1000);
    expect(await b.send('Browser.getVersion')).toMatchObject({ result: { product: version.Browser } });
    expect(await chrome.status({ id: spec.id, type: spec.type })).toMatchObject({
      running: true,
      pid: runtime.pid,
    });
    b.close();
  }, 90_000);

  it('answers 404 to every path without the token, and no DevTools access', async () => {
    const spec = specFor(undefined);
    const runtime = await provision(spec);
    const origin = `http://127.0.0.1:${runtime.port}`;
    const wrong = randomBytes(24).toString('base64url');
    for (const pathname of [
      '/json/version',
      '/json/list',
      `/${wrong}/json/version`,
      `/${spec.password.slice(0, -1)}/json/version`,
      `/${spec.password}x/json/version`,
      `/${spec.password}/json/protocol`,
      `/${spec.password}`,
      '/',
    ]) {
      const response = await fetch(`${origin}${pathname}`);
      expect(response.status, pathname).toBe(404);
      expect(await response.text()).not.toContain('webSocketDebuggerUrl');
    }
    for (const pathname of [
      `/devtools/browser/${spec.id}`,
      `/${wrong}/devtools/browser/${spec.id}`,
      `/${spec.password}/devtools/browser/${randomUUID()}`,
    ]) {
      await expect(RawClient.open(`ws://127.0.0.1:${runtime.port}${pathname}`)).rejects.toThrow('status 404');
    }
    // A web page (which sends an Origin) may not drive it, token or not.
    await expect(
      RawClient.open(`ws://127.0.0.1:${runtime.port}/${spec.password}/devtools/browser/${spec.id}`, {
        origin: 'http://127.0.0.1:1234',
      }),
    ).rejects.toThrow('status 403');
    // And the logs never show the token.
    const logs = await chrome.logs({ id: spec.id, type: spec.type }, 1000);
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.join('\n')).not.toContain(spec.password);
  }, 90_000);

  it("reads nothing of the host's files or another application's release, and refuses file: URLs", async () => {
    // Another team's release and a host file, both world-readable: only the jail keeps them out.
    const release = path.join(dataDir, 'apps', '2', 'releases', 'd1');
    fs.mkdirSync(release, { recursive: true, mode: 0o755 });
    const secret = `another team's code ${randomBytes(8).toString('hex')}`;
    fs.writeFileSync(path.join(release, 'server.js'), `// ${secret}\n`, { mode: 0o644 });
    const spec = specFor(undefined);
    const runtime = await provision(spec);
    const endpoint = `ws://127.0.0.1:${runtime.port}/${spec.password}/devtools/browser/${spec.id}`;

    // What Chromium's processes see of the file system: /usr, its own browser/ directory, no more.
    const pid = runtime.pid!;
    const seen = (file: string) => fs.existsSync(`/proc/${pid}/root${file}`);
    expect(seen('/usr/lib/chromium/chromium')).toBe(true);
    expect(seen(path.join(dataDir, 'services', spec.id, 'browser', 'profile'))).toBe(true);
    for (const hidden of [
      path.join(release, 'server.js'),
      path.join(dataDir, 'apps'),
      path.join(dataDir, 'services', spec.id, 'chromium.log'),
      '/etc/passwd',
      '/etc/shadow',
      '/root',
      '/home',
    ])
      expect(seen(hidden), hidden).toBe(false);
    // Its /proc shows the jail's processes only.
    const jailed = fs.readdirSync(`/proc/${pid}/root/proc`).filter((entry) => /^\d+$/.test(entry));
    expect(jailed).not.toContain(String(process.pid));

    // The proxy refuses navigations to local URLs, however they are spelled.
    const client = await RawClient.open(endpoint);
    for (const url of [
      `file://${path.join(release, 'server.js')}`,
      'file:///etc/passwd',
      ' \tFILE:///etc/passwd',
      'fi\nle:/etc/passwd',
      'view-source:file:///etc/passwd',
      'filesystem:file:///etc/passwd',
    ]) {
      const refused = await client.send('Target.createTarget', { url });
      expect(refused, url).toMatchObject({ error: { message: LOCAL_URL_REFUSED } });
    }
    // …on a page's own session too (Page.navigate), as Playwright's goto sends it.
    const browser = await chromium.connectOverCDP(`http://127.0.0.1:${runtime.port}${runtime.extra!.path}`);
    try {
      const page = await (await browser.newContext()).newPage();
      await expect(page.goto(`file://${path.join(release, 'server.js')}`)).rejects.toThrow(LOCAL_URL_REFUSED);
      // DevTools can hand a page any file the browser can open: only what is in the jail.
      await page.setContent('<input type="file" id="f">');
      const cdp = await page.context().newCDPSession(page);
      const readThroughInput = async (file: string) => {
        const { root } = await cdp.send('DOM.getDocument');
        const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector: '#f' });
        await cdp.send('DOM.setFileInputFiles', { nodeId, files: [file] });
        return page.evaluate(async () => {
          const chosen = (document.getElementById('f') as HTMLInputElement).files?.[0];
          return chosen ? chosen.text().then(String, (error: Error) => `unreadable: ${error.name}`) : 'none';
        });
      };
      expect(await readThroughInput('/etc/hosts')).toContain('localhost');
      expect(await readThroughInput('/etc/passwd')).toMatch(/^unreadable/);
      expect(await readThroughInput(path.join(release, 'server.js'))).toMatch(/^unreadable/);
      // The managed policy that blocks local schemes is the jail's own.
      const { frameTree } = await cdp.send('Page.getFrameTree');
      await expect(
        cdp.send('Network.loadNetworkResource', {
          frameId: frameTree.frame.id,
          url: 'file:///etc/hosts',
          options: { disableCache: true, includeCredentials: false },
        }),
      ).rejects.toThrow(LOCAL_URL_REFUSED);
      const policy = `/proc/${runtime.pid}/root/etc/chromium/policies/managed/berth.json`;
      expect(JSON.parse(fs.readFileSync(policy, 'utf8'))).toEqual(CHROME_POLICY);
    } finally {
      await browser.close();
    }
    client.close();
  }, 90_000);

  const cgroups = detectCgroups();
  it.skipIf(!cgroups)(
    'caps the whole browser with a memory cgroup; a restart applies a changed memory',
    async () => {
      const spec = specFor(undefined, 320);
      const runtime = await provision(spec);
      const dir = groupDir(cgroups!, ['services', spec.id]);
      const limitFile = cgroups!.version === 1 ? 'memory.limit_in_bytes' : 'memory.max';
      expect(Number(fs.readFileSync(path.join(dir, limitFile), 'utf8'))).toBe(320 * 1024 * 1024);
      // Every process of the instance (renderers, zygotes, utilities) is in the group. Chromium starts
      // and ends helpers at any time: the processes seen first must be members when the group is read
      // after them (a child is born in its parent's group), unless they ended in between.
      const seen = instanceProcesses(spec.id);
      const members = fs
        .readFileSync(path.join(dir, 'cgroup.procs'), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map(Number);
      expect(members).toContain(runtime.pid);
      expect(seen.filter((pid) => !members.includes(pid) && isAlive(pid))).toEqual([]);

      const restarted = await chrome.restart({ ...spec, memoryMiB: 448 });
      expect(restarted.port).toBe(runtime.port);
      expect(restarted.pid).not.toBe(runtime.pid);
      expect(Number(fs.readFileSync(path.join(dir, limitFile), 'utf8'))).toBe(448 * 1024 * 1024);
    },
    90_000,
  );

  it('reads not running once Chromium is killed, closes its clients, and start() brings it back', async () => {
    const spec = specFor(undefined);
    const ref = { id: spec.id, type: spec.type };
    const runtime = await provision(spec);
    const endpoint = `ws://127.0.0.1:${runtime.port}/${spec.password}/devtools/browser/${spec.id}`;
    const client = await RawClient.open(endpoint);
    await client.send('Browser.getVersion');

    process.kill(runtime.pid!, 'SIGKILL');
    expect((await client.closed).code).toBe(1011);
    await waitFor(async () => ((await chrome.status(ref)).running ? undefined : true));
    expect(await chrome.status(ref)).toMatchObject({
      running: false,
      pid: null,
      reason: 'Chromium killed by SIGKILL',
    });
    // What it forked is gone too, and the endpoint says it is down (same port, same token).
    await waitFor(() => Promise.resolve(instanceProcesses(spec.id).length === 0 ? true : undefined));
    expect((await fetch(`http://127.0.0.1:${runtime.port}/${spec.password}/json/version`)).status).toBe(503);

    const again = await chrome.start(spec);
    expect(again.port).toBe(runtime.port);
    expect(again.pid).not.toBe(runtime.pid);
    expect(await chrome.status(ref)).toMatchObject({ running: true, pid: again.pid });
    // start() of a running instance changes nothing.
    expect((await chrome.start(spec)).pid).toBe(again.pid);
    const { title } = await render(`http://127.0.0.1:${again.port}${again.extra!.path}`, siteUrl);
    expect(title).toBe(TITLE);
    const logs = (await chrome.logs(ref, 50)).join('\n');
    expect(logs).toContain('Chromium killed by SIGKILL');
    expect(logs).not.toContain(spec.password);
  }, 120_000);

  it('stop leaves no process of the instance; delete removes its files, group and account', async () => {
    const spec = specFor(undefined);
    const ref = { id: spec.id, type: spec.type };
    const runtime = await provision(spec);
    expect(instanceProcesses(spec.id).length).toBeGreaterThan(1);

    await chrome.stop(ref);
    expect(instanceProcesses(spec.id)).toEqual([]);
    expect(await chrome.status(ref)).toEqual({ running: false, pid: null });
    await expect(fetch(`http://127.0.0.1:${runtime.port}/${spec.password}/json/version`)).rejects.toThrow();
    await chrome.stop(ref); // a no-op now

    // The profile stays across a stop.
    const root = path.join(dataDir, 'services', spec.id);
    expect(fs.existsSync(path.join(root, 'browser', 'profile'))).toBe(true);
    await chrome.start(spec);
    expect(instanceProcesses(spec.id).length).toBeGreaterThan(0);

    await chrome.delete(ref);
    expect(instanceProcesses(spec.id)).toEqual([]);
    expect(fs.existsSync(root)).toBe(false);
    if (cgroups) expect(fs.existsSync(groupDir(cgroups, ['services', spec.id]))).toBe(false);
    if (isRoot()) expect(findAccount(accountName(spec.id))).toBeUndefined();
  }, 120_000);

  it('without cgroups says the memory is not capped, and stop still ends every process', async () => {
    const uncapped = createChromeRunner({ dataDir, logger, cgroups: null });
    const spec = specFor(undefined);
    const ref = { id: spec.id, type: spec.type };
    await provision(spec, uncapped);
    const status = await uncapped.status(ref);
    expect(status.running).toBe(true);
    expect(status.reason).toMatch(/memory not capped/);
    expect((await uncapped.logs(ref, 20)).join('\n')).toMatch(/memory not capped/);
    expect(instanceProcesses(spec.id).length).toBeGreaterThan(1);
    await uncapped.stop(ref);
    expect(instanceProcesses(spec.id)).toEqual([]);
  }, 90_000);
});
