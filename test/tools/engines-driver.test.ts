// The tools service on a tools-engines driver other than the local one (issue 27): Berth composed
// with a stub driver answers the tools endpoints through it, keeps its credits, its bounded queue (the
// driver's capacity runs, a bounded number waits, the rest get 429), maps the driver's failures to its
// answers and refunds them, checks a URL with the driver's guard, and closes the driver with itself.
import { afterEach, describe, expect, it } from 'vitest';
import type { ToolsEngines, ToolsFailure } from '../../src/drivers/tools/types.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { waitFor } from '../helpers/processes.js';

/** An error of the stub's own, with what its failure() says of it. */
class StubFailure extends Error {
  constructor(readonly failure: ToolsFailure) {
    super(failure.message);
  }
}

function stubEngines() {
  const calls: string[] = [];
  let release: () => void = () => undefined;
  let hold: Promise<void> | undefined;
  let fail: ToolsFailure | undefined;
  let closed = false;
  const engines: ToolsEngines = {
    name: 'stub',
    capacity: { chromium: 1, office: 1, merge: 1 },
    guard: {
      resolve: (url) =>
        url.hostname === 'refused.example'
          ? Promise.reject(new Error('refused.example is not allowed: the stub says so'))
          : Promise.resolve({ address: '203.0.113.7', family: 4 }),
    },
    async renderPdf(source) {
      calls.push(source.kind === 'html' ? source.html : source.url);
      if (hold) await hold;
      if (fail) throw new StubFailure(fail);
      return { body: Buffer.from('%PDF-1.7 from the stub'), blocked: ['http://10.0.0.1/x.png'] };
    },
    screenshot: () => Promise.reject(new Error('not in this test')),
    office: () => Promise.reject(new Error('not in this test')),
    merge: () => Promise.reject(new Error('not in this test')),
    health: () => ({
      chromium: { status: 'ready', jobs: calls.length, failures: 0, restarts: 0, lastError: null },
      libreoffice: {
        status: 'idle',
        listeners: 0,
        jobs: 0,
        coldConversions: 0,
        failures: 0,
        restarts: 0,
        lastError: null,
      },
      pdf: { status: 'ready' },
    }),
    failure: (error) => (error instanceof StubFailure ? error.failure : undefined),
    close() {
      closed = true;
      return Promise.resolve();
    },
  };
  return {
    engines,
    calls,
    closed: () => closed,
    /** Jobs wait until released. */
    holdJobs() {
      hold = new Promise((resolve) => (release = resolve));
    },
    release: () => release(),
    failWith(failure: ToolsFailure | undefined) {
      fail = failure;
    },
  };
}

describe('the tools service on a tools-engines driver', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  const open = async (stub: ReturnType<typeof stubEngines>) => {
    t = await createTestApp('sqlite', {
      env: { BERTH_TOOLS_MONTHLY_CREDITS: '100' },
      services: { toolsEngines: stub.engines, tools: { chromiumMaxQueued: 1 } },
    });
    return t;
  };
  const html = (app: TestApp, body: string) =>
    app.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/convert/html',
      headers: app.auth.tools,
      payload: { html: body },
    });
  const used = async (app: TestApp) =>
    (await app.request({ method: 'GET', url: '/api/v1/tools/balance', headers: app.auth.tools })).json<{
      data: { used: number };
    }>().data.used;
  const health = async (app: TestApp) =>
    (await app.request({ method: 'GET', url: '/api/v1/tools/health', headers: app.auth.tools })).json<{
      data: { status: string; engines: { chromium: { status: string; running: number; queued: number } } };
    }>().data;

  it('renders through the driver, charges a credit, and closes the driver with Berth', async () => {
    const stub = stubEngines();
    const app = await open(stub);
    const res = await html(app, '<p>through the stub</p>');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/pdf');
    expect(res.body).toBe('%PDF-1.7 from the stub');
    expect(stub.calls).toEqual(['<p>through the stub</p>']);
    expect(await used(app)).toBe(1);
    expect(await health(app)).toMatchObject({ status: 'ok', engines: { chromium: { status: 'ready' } } });
    expect(stub.closed()).toBe(false);
    await app.close();
    t = undefined;
    expect(stub.closed()).toBe(true);
  });

  it("runs the driver's capacity, queues a bounded number, refuses the rest with 429 and refunds them", async () => {
    const stub = stubEngines();
    const app = await open(stub);
    stub.holdJobs();
    const first = html(app, '<p>1</p>');
    await waitFor(() => Promise.resolve(stub.calls.length === 1 ? true : undefined));
    const second = html(app, '<p>2</p>');
    await waitFor(async () => ((await health(app)).engines.chromium.queued === 1 ? true : undefined));
    expect((await health(app)).engines.chromium).toMatchObject({ running: 1, queued: 1 });
    const third = await html(app, '<p>3</p>');
    expect(third.statusCode).toBe(429);
    expect(Number(third.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    stub.release();
    expect([(await first).statusCode, (await second).statusCode]).toEqual([200, 200]);
    expect(stub.calls).toEqual(['<p>1</p>', '<p>2</p>']);
    expect(await used(app)).toBe(2);
  });

  it("answers the driver's failures as the tools API does, and gives the credit back", async () => {
    const stub = stubEngines();
    const app = await open(stub);
    stub.failWith({ kind: 'blocked', message: '10.0.0.1 is not allowed: private address' });
    const blocked = await html(app, '<p>redirected</p>');
    expect(blocked.statusCode).toBe(422);
    expect(blocked.json<{ errors: Record<string, string[]> }>().errors).toEqual({
      url: ['The url must lead to a public address: 10.0.0.1 is not allowed: private address.'],
    });
    stub.failWith({ kind: 'engine', message: 'the renderer crashed' });
    const failed = await html(app, '<p>crash</p>');
    expect(failed.statusCode).toBe(502);
    expect(failed.json<{ message: string }>().message).toBe(
      'The conversion engine failed: the renderer crashed. Please retry later.',
    );
    expect(await used(app)).toBe(0);
    // The URL is checked with the driver's guard before anything is charged or rendered.
    stub.failWith(undefined);
    const refused = await app.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/convert/url',
      headers: app.auth.tools,
      payload: { url: 'https://refused.example/page' },
    });
    expect(refused.statusCode).toBe(422);
    expect(refused.json<{ errors: Record<string, string[]> }>().errors.url?.[0]).toContain(
      'refused.example is not allowed: the stub says so',
    );
    expect(stub.calls).toEqual(['<p>redirected</p>', '<p>crash</p>']);
    expect(await used(app)).toBe(0);
  });
});
