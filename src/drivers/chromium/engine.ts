// One long-lived headless Chromium (Debian's binary) driven by playwright-core.
//
// Isolation model (see docs/api/tools.md):
// - HTML and Markdown jobs run on warm "slots": each slot is its own browser context with one page and its
//   own pseudo-origin (http://sN-<random>.invalid). Every job document is sandboxed (opaque origin: no
//   cookies or storage exist for it).
//   - Documents without scripts go to `static` slots, whose context has JavaScript off: the job replaces
//     the document in place; no page script can ever have touched the window.
//   - Documents with scripts go to `scripted` slots: each job navigates to a new document (a new window).
//   If a job loaded anything from outside, the slot's cookies and the storage of every origin it touched
//   are cleared before the slot is used again; slots are replaced after N jobs.
// - URL jobs get a fresh browser context each, closed afterwards.
// - Every request of every page goes through `context.route`: Berth fetches it itself, connected to an
//   address the AddressGuard approved. Requests that escape routing (WebSockets, WebRTC) meet a dead
//   proxy, so nothing reaches the network unchecked.
import type { PageLayout } from '../../domain/tools.js';
import { randomBytes } from 'node:crypto';
import type { Browser, BrowserContext, CDPSession, Page, Request, Route } from 'playwright-core';
import { BlockedAddressError, type AddressGuard } from '../net/guard.js';
import { guardedFetch } from '../net/fetch.js';
import { blankPdfTitle } from './pdf-title.js';

export const CHROMIUM_PATH = '/usr/lib/chromium/chromium';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
  '--disable-default-apps',
  '--disable-extensions',
  '--mute-audio',
  '--dns-prefetch-disable',
  '--force-webrtc-ip-handling-policy=disable_non_proxied_udp',
  // No back/forward cache and no proactive process swaps: a job's navigation on a warm page stays cheap.
  '--disable-features=BackForwardCache,RenderDocument,ProactivelySwapBrowsingInstance,IsolateSandboxedIframes,Translate,MediaRouter,OptimizationHints',
  // Anything the route handler does not serve (WebSockets, stray requests) goes to a proxy that is not
  // there; `<-loopback>` removes Chromium's implicit proxy bypass for localhost.
  '--proxy-server=http://127.0.0.1:9',
  '--proxy-bypass-list=<-loopback>',
];

/** A file an HTML document refers to by a relative name (`style.css`, `img/logo.png`), served beside it. */
export interface PageAsset {
  body: Buffer;
  type: string;
}

export type PageSource =
  { kind: 'html'; html: string; assets?: ReadonlyMap<string, PageAsset> } | { kind: 'url'; url: string };

/**
 * A PDF's page layout: the domain's PageLayout (the tools API parses it, src/domain/tools.ts), and what
 * the Gotenberg-compatible service also asks for (src/drivers/services/gotenberg.ts).
 */
export type PdfSettings = PageLayout & {
  /** Chromium's page ranges (`1-3,5`); a range it cannot read or past the last page is a PageRangesError. */
  pageRanges?: string;
  preferCSSPageSize?: boolean;
  /** Milliseconds to wait after the page loaded, within the job's timeout. */
  waitDelayMs?: number;
  /** The CSS media type to print with (Chromium prints with `print`). */
  media?: 'screen' | 'print';
};

export interface ScreenshotSettings {
  width: number;
  height: number;
  format: 'png' | 'jpeg';
  fullPage: boolean;
  quality?: number;
}

export interface RenderResult {
  body: Buffer;
  /** Sub-resources refused by the address guard (or by scheme). */
  blocked: string[];
}

/** The page itself (or a redirect of it) pointed at a refused address. */
export class PageBlockedError extends Error {
  constructor(readonly blockedBy: BlockedAddressError) {
    super(blockedBy.message);
    this.name = 'PageBlockedError';
  }
}

/** The page ranges asked for are not valid for this document (`syntax` or past the last page). */
export class PageRangesError extends Error {
  constructor(readonly reason: 'syntax' | 'exceeds') {
    super(reason === 'syntax' ? 'page range syntax error' : 'page range exceeds page count');
    this.name = 'PageRangesError';
  }
}

/** The engine failed: crash, timeout, navigation error. Mapped to 502. */
export class EngineError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EngineError';
  }
}

export interface ChromiumOptions {
  executablePath: string;
  /** Warm slots for HTML jobs (also the number of jobs run at once). */
  slots: number;
  jobTimeoutMs: number;
  maxJobsPerSlot: number;
  maxJobsPerBrowser: number;
  guard: AddressGuard;
  /** Largest sub-resource Berth fetches for a page. */
  maxResourceBytes: number;
}

export interface EngineStatus {
  status: 'idle' | 'starting' | 'ready' | 'failed';
  jobs: number;
  failures: number;
  restarts: number;
  lastError: string | null;
}

interface Job {
  documentUrl: string;
  /** A redirect of the main document, followed by navigating again. */
  redirectTo: string | undefined;
  html: string | undefined;
  /** Files served beside an HTML job's document, by path (without the leading slash). */
  assets: ReadonlyMap<string, PageAsset> | undefined;
  blocked: string[];
  mainBlocked: BlockedAddressError | undefined;
  origins: Set<string>;
  page: Page | undefined;
}

interface Slot {
  context: BrowserContext;
  page: Page;
  cdp: CDPSession;
  origin: string;
  kind: SlotKind;
  jobs: number;
  job: Job | undefined;
}

/**
 * `static` slots run with JavaScript off (Chromium enforces it for the whole context): no page script can
 * ever change their window, so a job replaces the document in place (`setContent`, ~3 ms) instead of
 * navigating (~45 ms of CPU). `scripted` slots run scripts and navigate to a new window for every job.
 */
export type SlotKind = 'static' | 'scripted';

interface Pool {
  /** Clean slots ready for a job. */
  free: Slot[];
  /** Slots that exist (free, busy or being cleaned). */
  count: number;
  /** Jobs waiting for a slot to become free. */
  waiters: Array<{ resolve: (slot: Slot) => void; reject: (error: unknown) => void }>;
}

interface Generation {
  browser: Browser;
  pools: Record<SlotKind, Pool>;
  active: number;
  jobs: number;
  retired: boolean;
}

// The job's document gets an opaque origin: scripts run, but cookies, local and session storage and
// IndexedDB do not exist for it, so there is nothing one job could leave for the next.
const SANDBOX_CSP = 'sandbox allow-scripts';

const MAX_REDIRECTS = 10;
/** How long a scripted slot may keep a finished job's document before it is sent to about:blank. */
const IDLE_BLANK_MS = 1_000;
const DEFAULT_VIEWPORT = { width: 1280, height: 800 };

function isMainFrame(request: Request): boolean {
  try {
    return request.frame().parentFrame() === null;
  } catch {
    // Requests without a frame (workers) are never the main document.
    return false;
  }
}

/** The path of a URL on a slot's origin, decoded, without query or fragment: the name of an asset. */
function assetName(url: string, origin: string): string {
  const rest = url.slice(origin.length + 1).replace(/[?#].*$/s, '');
  try {
    return decodeURIComponent(rest);
  } catch {
    return rest;
  }
}

const BLANK = '<!doctype html><html><head><meta charset="utf-8"></head><body></body></html>';

/**
 * Whether an HTML document may need JavaScript: script elements, event-handler attributes,
 * javascript: URLs, or a meta refresh (which would navigate a reused page). When in doubt, yes: a
 * document sent to a static slot by mistake renders without its scripts, it never gains any.
 */
export function needsScripts(html: string): boolean {
  return /<script|\son[a-z]+\s*=|javascript:|http-equiv\s*=\s*["']?refresh/i.test(html);
}

export class ChromiumEngine {
  private generation: Generation | undefined;
  private launching: Promise<Generation> | undefined;
  private closed = false;
  private readonly stats: EngineStatus = {
    status: 'idle',
    jobs: 0,
    failures: 0,
    restarts: 0,
    lastError: null,
  };
  private slotCounter = 0;

  constructor(private readonly options: ChromiumOptions) {}

  status(): EngineStatus {
    return { ...this.stats };
  }

  /** The document each free slot holds (diagnostics and tests): what an idle browser keeps loaded. */
  async freeSlotDocuments(): Promise<Array<{ kind: SlotKind; url: string; html: string }>> {
    const pools = this.generation?.pools;
    if (!pools) return [];
    return Promise.all(
      [...pools.static.free, ...pools.scripted.free].map(async (slot) => ({
        kind: slot.kind,
        url: slot.page.url(),
        html: await slot.page.content(),
      })),
    );
  }

  /** Starts the browser now (the first job would otherwise). */
  async warmUp(): Promise<void> {
    await this.currentGeneration();
  }

  async pdf(source: PageSource, settings: PdfSettings): Promise<RenderResult> {
    return this.render(source, undefined, async (page) => {
      if (settings.waitDelayMs) await new Promise((resolve) => setTimeout(resolve, settings.waitDelayMs));
      // A warm slot's page serves the next job too: the media type is set back afterwards.
      if (settings.media === 'screen') await page.emulateMedia({ media: 'screen' });
      try {
        const pdf = await page
          .pdf({
            landscape: settings.landscape,
            printBackground: settings.printBackground,
            scale: settings.scale,
            width: settings.width,
            height: settings.height,
            margin: settings.margin,
            ...(settings.pageRanges ? { pageRanges: settings.pageRanges } : {}),
            ...(settings.preferCSSPageSize ? { preferCSSPageSize: true } : {}),
          })
          .catch((error: unknown) => {
            const message = error instanceof Error ? error.message : '';
            if (/page range exceeds page count/i.test(message)) throw new PageRangesError('exceeds');
            if (/page range/i.test(message)) throw new PageRangesError('syntax');
            throw error;
          });
        // Without a <title>, Chromium would title the PDF with Berth's internal address.
        if ((await page.title()) === '') blankPdfTitle(pdf);
        return pdf;
      } finally {
        if (settings.media === 'screen') await page.emulateMedia({ media: null }).catch(() => undefined);
      }
    });
  }

  async screenshot(source: PageSource, settings: ScreenshotSettings): Promise<RenderResult> {
    return this.render(source, { width: settings.width, height: settings.height }, (page) =>
      page.screenshot({
        type: settings.format,
        fullPage: settings.fullPage,
        ...(settings.format === 'jpeg' ? { quality: settings.quality ?? 85 } : {}),
        animations: 'disabled',
        caret: 'hide',
      }),
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    const generation = this.generation ?? (await this.launching?.catch(() => undefined));
    this.generation = undefined;
    if (generation) await generation.browser.close().catch(() => undefined);
    this.stats.status = 'idle';
  }

  private async render(
    source: PageSource,
    viewport: { width: number; height: number } | undefined,
    capture: (page: Page) => Promise<Buffer>,
  ): Promise<RenderResult> {
    const generation = await this.currentGeneration();
    generation.active += 1;
    generation.jobs += 1;
    this.stats.jobs += 1;
    let slot: Slot | undefined;
    let context: BrowserContext | undefined;
    const job: Job = {
      documentUrl: '',
      redirectTo: undefined,
      html: undefined,
      assets: undefined,
      blocked: [],
      mainBlocked: undefined,
      origins: new Set(),
      page: undefined,
    };
    let healthy = false;
    try {
      let page: Page;
      if (source.kind === 'html') {
        slot = await this.acquireSlot(generation, needsScripts(source.html) ? 'scripted' : 'static');
        slot.jobs += 1;
        slot.job = job;
        page = slot.page;
        job.html = source.html;
        job.assets = source.assets;
        job.documentUrl = `${slot.origin}/${randomBytes(6).toString('hex')}`;
      } else {
        context = await this.newContext(generation.browser, () => job);
        page = await context.newPage();
        job.documentUrl = source.url;
      }
      job.page = page;
      const result = await this.withTimeout(async () => {
        // A slot's viewport must not carry over from the previous job: PDF jobs get the default again.
        const wanted = viewport ?? DEFAULT_VIEWPORT;
        const current = page.viewportSize();
        if (current?.width !== wanted.width || current.height !== wanted.height)
          await page.setViewportSize(wanted);
        if (slot?.kind === 'static') {
          // No script can run here: the document is replaced in place, in the same (sandboxed) window.
          await page.setContent(source.kind === 'html' ? source.html : '', {
            waitUntil: 'load',
            timeout: this.options.jobTimeoutMs,
          });
          return capture(page);
        }
        let next: string | undefined = job.documentUrl;
        for (let hop = 0; next !== undefined; hop++) {
          if (hop > MAX_REDIRECTS) throw new EngineError('the page redirected too many times');
          job.redirectTo = undefined;
          try {
            await page.goto(next, { waitUntil: 'load', timeout: this.options.jobTimeoutMs });
          } catch (error) {
            if (job.mainBlocked) throw new PageBlockedError(job.mainBlocked);
            throw error;
          }
          next = job.redirectTo;
        }
        if (job.mainBlocked) throw new PageBlockedError(job.mainBlocked);
        return capture(page);
      });
      healthy = true;
      return { body: result, blocked: job.blocked };
    } catch (thrown) {
      if (thrown instanceof PageBlockedError || thrown instanceof PageRangesError) {
        healthy = true;
        throw thrown;
      }
      this.stats.failures += 1;
      // Playwright's own navigation deadline and ours are the same length; whichever fires first, the
      // caller is told the same thing.
      const error = thrown instanceof Error && thrown.name === 'TimeoutError' ? this.timedOut() : thrown;
      this.stats.lastError =
        error instanceof Error ? error.message.split('\n')[0]!.slice(0, 300) : String(error);
      throw error instanceof EngineError ? error : new EngineError(this.stats.lastError, { cause: error });
    } finally {
      generation.active -= 1;
      if (context) void context.close().catch(() => undefined);
      if (slot) void this.releaseSlot(generation, slot, healthy);
      if (generation.retired && generation.active === 0)
        void generation.browser.close().catch(() => undefined);
    }
  }

  private timedOut(): EngineError {
    return new EngineError(`the page did not render within ${this.options.jobTimeoutMs} ms`);
  }

  private async withTimeout<T>(work: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(this.timedOut()), this.options.jobTimeoutMs);
    });
    try {
      return await Promise.race([work(), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async acquireSlot(generation: Generation, kind: SlotKind): Promise<Slot> {
    const pool = generation.pools[kind];
    const free = pool.free.pop();
    if (free) return free;
    if (pool.count < this.options.slots) {
      pool.count += 1;
      try {
        return await this.newSlot(generation, kind);
      } catch (error) {
        pool.count -= 1;
        throw error;
      }
    }
    return new Promise<Slot>((resolve, reject) => pool.waiters.push({ resolve, reject }));
  }

  /** Hands a clean slot to the next waiting job, or back to the pool. */
  private offerSlot(generation: Generation, slot: Slot): void {
    const pool = generation.pools[slot.kind];
    const waiter = pool.waiters.shift();
    if (waiter) waiter.resolve(slot);
    else pool.free.push(slot);
  }

  /** A slot was thrown away: a waiting job gets a new one. */
  private dropSlot(generation: Generation, slot: Slot): void {
    const pool = generation.pools[slot.kind];
    pool.count -= 1;
    void slot.context.close().catch(() => undefined);
    const waiter = pool.waiters.shift();
    if (!waiter) return;
    if (generation.retired || this.generation !== generation) {
      // The browser is being replaced: the waiting job retries on the new one.
      waiter.reject(new EngineError('the browser was restarted; retry'));
      return;
    }
    pool.count += 1;
    this.newSlot(generation, slot.kind).then(waiter.resolve, (error: unknown) => {
      pool.count -= 1;
      waiter.reject(error);
    });
  }

  /** Empties a slot after a job; a slot that cannot be cleaned is thrown away. */
  private async releaseSlot(generation: Generation, slot: Slot, healthy: boolean): Promise<void> {
    const job = slot.job;
    slot.job = undefined;
    const keep =
      healthy &&
      !generation.retired &&
      this.generation === generation &&
      slot.jobs < this.options.maxJobsPerSlot;
    if (!keep) {
      this.dropSlot(generation, slot);
      return;
    }
    // A job that loaded nothing from outside had only its sandboxed document: it cannot have stored
    // anything, and the next job replaces its document (and, on a scripted slot, its window).
    if (job && job.origins.size === 0) {
      try {
        // Static slots: emptying costs ~3 ms, and stops the job's CSS animations from rendering frames.
        if (slot.kind === 'static')
          await slot.page.setContent(BLANK, { waitUntil: 'commit', timeout: 5_000 });
      } catch {
        this.dropSlot(generation, slot);
        return;
      }
      this.offerSlot(generation, slot);
      // Scripted slots: leaving the document costs a navigation (~50 ms), so it is left only when the
      // slot stays idle; under load the next job replaces it anyway.
      if (slot.kind === 'scripted') this.blankWhenIdle(generation, slot);
      return;
    }
    try {
      // Leave the job's document first, so nothing it started can write after the clearing.
      if (slot.kind === 'scripted') {
        await slot.page.goto(`${slot.origin}/blank`, { waitUntil: 'commit', timeout: 5_000 });
      } else {
        await slot.page.setContent(BLANK, { waitUntil: 'commit', timeout: 5_000 });
      }
      await slot.context.clearCookies();
      const origins = new Set(job?.origins ?? []);
      for (const origin of origins) {
        await slot.cdp.send('Storage.clearDataForOrigin', { origin, storageTypes: 'all' });
      }
      if (this.generation === generation && !generation.retired) this.offerSlot(generation, slot);
      else this.dropSlot(generation, slot);
    } catch {
      this.dropSlot(generation, slot);
    }
  }

  /**
   * A job's document left in an idle slot would run its timers and animations (and render their frames)
   * until the next job. If the slot is still free after a second, it is taken out of the pool, sent to
   * about:blank and put back.
   */
  private blankWhenIdle(generation: Generation, slot: Slot): void {
    const used = slot.jobs;
    const timer = setTimeout(() => {
      const pool = generation.pools[slot.kind];
      const at = pool.free.indexOf(slot);
      if (at < 0 || slot.jobs !== used) return; // busy, or already used again
      pool.free.splice(at, 1);
      slot.page.goto('about:blank', { waitUntil: 'commit', timeout: 5_000 }).then(
        () =>
          this.generation === generation && !generation.retired
            ? this.offerSlot(generation, slot)
            : this.dropSlot(generation, slot),
        () => this.dropSlot(generation, slot),
      );
    }, IDLE_BLANK_MS);
    timer.unref();
  }

  private async newSlot(generation: Generation, kind: SlotKind): Promise<Slot> {
    this.slotCounter += 1;
    const origin = `http://s${this.slotCounter}-${randomBytes(4).toString('hex')}.invalid`;
    let current: Job | undefined;
    const slot: Partial<Slot> = {};
    const context = await this.newContext(generation.browser, () => current, origin, kind === 'scripted');
    // window.name belongs to the tab and would survive the navigation to the next job's document.
    if (kind === 'scripted') await context.addInitScript('if (window === window.top) window.name = "";');
    const page = await context.newPage();
    const cdp = await context.newCDPSession(page);
    // A static slot keeps one sandboxed document for its whole life; jobs replace its content.
    if (kind === 'static') await page.goto(`${origin}/blank`, { waitUntil: 'load', timeout: 10_000 });
    Object.assign(slot, { context, page, cdp, origin, kind, jobs: 0 });
    Object.defineProperty(slot, 'job', {
      get: () => current,
      set: (value: Job | undefined) => {
        current = value;
      },
      enumerable: true,
    });
    page.on('crash', () => void context.close().catch(() => undefined));
    return slot as Slot;
  }

  private async newContext(
    browser: Browser,
    currentJob: () => Job | undefined,
    slotOrigin?: string,
    javaScriptEnabled = true,
  ): Promise<BrowserContext> {
    const context = await browser.newContext({
      serviceWorkers: 'block',
      acceptDownloads: false,
      viewport: DEFAULT_VIEWPORT,
      javaScriptEnabled,
    });
    await context.routeWebSocket(/.*/, (ws) => ws.close({ code: 1008, reason: 'blocked' }));
    await context.route('**/*', (route) => this.handleRoute(route, currentJob(), slotOrigin));
    return context;
  }

  private async handleRoute(
    route: Route,
    job: Job | undefined,
    slotOrigin: string | undefined,
  ): Promise<void> {
    const request = route.request();
    const url = request.url();
    try {
      if (slotOrigin && url.startsWith(`${slotOrigin}/`)) {
        // The slot's own pseudo-origin: the job's document, or an empty page between jobs.
        if (job?.html !== undefined && url === job.documentUrl) {
          await route.fulfill({
            status: 200,
            headers: { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': SANDBOX_CSP },
            body: job.html,
          });
        } else if (job?.assets?.has(assetName(url, slotOrigin))) {
          // A file sent with the document: fonts are fetched with CORS from its opaque origin.
          const asset = job.assets.get(assetName(url, slotOrigin))!;
          await route.fulfill({
            status: 200,
            headers: { 'content-type': asset.type, 'access-control-allow-origin': '*' },
            body: asset.body,
          });
        } else if (request.isNavigationRequest()) {
          await route.fulfill({
            status: 200,
            headers: { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': SANDBOX_CSP },
            body: BLANK,
          });
        } else {
          await route.fulfill({ status: 404, contentType: 'text/plain', body: 'not found' });
        }
        return;
      }
      if (!job) {
        await route.abort('blockedbyclient');
        return;
      }
      const parsed = new URL(url);
      if (parsed.hostname.endsWith('.invalid')) {
        await route.abort('namenotresolved');
        return;
      }
      const mainFrame = request.isNavigationRequest() && isMainFrame(request);
      try {
        // Chromium does not intercept the request that follows a fulfilled redirect, so redirects are
        // followed here, each hop checked by the guard. The main document is re-navigated instead, so that
        // its URL (and the base of its relative links) is the final one.
        let target = url;
        let method = request.method();
        let body = request.postDataBuffer();
        const headers = await request.allHeaders();
        for (let hop = 0; ; hop++) {
          const response = await guardedFetch(
            this.options.guard,
            { url: target, method, headers, body },
            { timeoutMs: this.options.jobTimeoutMs, maxBytes: this.options.maxResourceBytes },
          );
          job.origins.add(new URL(target).origin);
          const location = response.headers.location;
          if (response.status >= 300 && response.status < 400 && location && hop < MAX_REDIRECTS) {
            const next = new URL(location, target).href;
            if (mainFrame) {
              job.redirectTo = next;
              await route.fulfill({ status: 200, contentType: 'text/html; charset=utf-8', body: BLANK });
              return;
            }
            if (new URL(next).origin !== new URL(target).origin) delete headers.cookie;
            if (
              response.status === 303 ||
              ((response.status === 301 || response.status === 302) && method === 'POST')
            ) {
              method = 'GET';
              body = null;
            }
            target = next;
            continue;
          }
          await route.fulfill({ status: response.status, headers: response.headers, body: response.body });
          return;
        }
      } catch (error) {
        if (error instanceof BlockedAddressError) {
          job.blocked.push(url.slice(0, 500));
          if (mainFrame) job.mainBlocked = error;
          await route.abort('blockedbyclient');
        } else {
          await route.abort('failed');
        }
      }
    } catch {
      // The page or context went away while the request was in flight: nothing to answer.
    }
  }

  private async currentGeneration(): Promise<Generation> {
    if (this.closed) throw new EngineError('the Chromium engine is stopped');
    const current = this.generation;
    if (current && current.browser.isConnected()) {
      if (current.jobs < this.options.maxJobsPerBrowser) return current;
      // Recycle: new jobs go to a new browser; the old one closes when its last job is done.
      current.retired = true;
      this.generation = undefined;
      for (const pool of Object.values(current.pools)) {
        for (const slot of pool.free.splice(0)) this.dropSlot(current, slot);
      }
      if (current.active === 0) void current.browser.close().catch(() => undefined);
      this.stats.restarts += 1;
    }
    this.launching ??= this.launch().finally(() => {
      this.launching = undefined;
    });
    return this.launching;
  }

  private async launch(): Promise<Generation> {
    this.stats.status = 'starting';
    try {
      // Loaded on first use: playwright-core costs every Berth process (and `berth admin …`) about half
      // a second of start-up, and most never render a page.
      const { chromium } = await import('playwright-core');
      const browser = await chromium.launch({
        executablePath: this.options.executablePath,
        headless: true,
        args: CHROMIUM_ARGS,
        timeout: 30_000,
      });
      const generation: Generation = {
        browser,
        pools: {
          static: { free: [], count: 0, waiters: [] },
          scripted: { free: [], count: 0, waiters: [] },
        },
        active: 0,
        jobs: 0,
        retired: false,
      };
      browser.on('disconnected', () => {
        for (const pool of Object.values(generation.pools)) {
          for (const waiter of pool.waiters.splice(0)) waiter.reject(new EngineError('Chromium exited'));
        }
        if (this.generation === generation) {
          this.generation = undefined;
          if (!this.closed) {
            this.stats.restarts += 1;
            this.stats.status = 'idle';
          }
        }
      });
      if (this.closed) {
        await browser.close();
        throw new EngineError('the Chromium engine is stopped');
      }
      this.generation = generation;
      this.stats.status = 'ready';
      return generation;
    } catch (error) {
      this.stats.status = 'failed';
      this.stats.lastError =
        error instanceof Error ? error.message.split('\n')[0]!.slice(0, 300) : String(error);
      throw error instanceof EngineError
        ? error
        : new EngineError('Chromium could not start', { cause: error });
    }
  }

  /** Crashes the running browser (tests check that the engine recovers). */
  async crashForTest(): Promise<void> {
    const browser = this.generation?.browser;
    if (!browser) return;
    const session = await browser.newBrowserCDPSession();
    await session.send('Browser.crash').catch(() => undefined);
  }
}
