// Credits: atomic reservation under concurrency (also across two "replicas" on one PostgreSQL),
// monthly reset, refunds, the ledger, and the free balance/usage/health endpoints.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/domain/clock.js';
import { openStore } from '../../src/db/connect.js';
import { createCreditLedger } from '../../src/services/tools/credits.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createTestPostgresDatabase, DIALECTS } from '../helpers/store.js';
import { makePdf, multipart, pdfInfo } from './helpers.js';

describe.each(DIALECTS)('tools credits on %s', (dialect) => {
  let t: TestApp;
  const clock = createManualClock('2026-11-23T10:00:00Z');
  let pdfA: Buffer;
  let pdfB: Buffer;

  beforeAll(async () => {
    pdfA = await makePdf(1, 'A');
    pdfB = await makePdf(1, 'B');
  });
  afterEach(async () => {
    await t?.close();
  });

  const mergeRequest = () => {
    const body = multipart([
      { name: 'files[]', filename: 'a.pdf', content: pdfA, type: 'application/pdf' },
      { name: 'files[]', filename: 'b.pdf', content: pdfB, type: 'application/pdf' },
    ]);
    return {
      method: 'POST' as const,
      url: '/api/v1/tools/pdf/merge',
      headers: { ...t.auth.tools, ...body.headers },
      payload: body.payload,
    };
  };

  it('starts with the monthly allowance and reports the period and the next reset', async () => {
    t = await createTestApp(dialect, { clock, env: { BERTH_TOOLS_MONTHLY_CREDITS: '1000' } });
    const res = await t.request({ method: 'GET', url: '/api/v1/tools/balance', headers: t.auth.tools });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      data: {
        allowance: 1000,
        used: 0,
        remaining: 1000,
        period: '2026-11',
        period_start: '2026-11-01T00:00:00.000Z',
        resets_at: '2026-12-01T00:00:00.000Z',
      },
    });
    // The platform token is not a tools key.
    const wrong = await t.request({
      method: 'GET',
      url: '/api/v1/tools/balance',
      headers: t.auth.platform,
    });
    expect(wrong.statusCode).toBe(401);
    const health = await t.request({ method: 'GET', url: '/api/v1/tools/health', headers: t.auth.tools });
    expect(health.statusCode).toBe(200);
    const data = health.json<{ data: { status: string; engines: Record<string, { status: string }> } }>()
      .data;
    expect(data.status).toBe('ok');
    expect(Object.keys(data.engines).sort()).toEqual(['chromium', 'libreoffice', 'pdf']);
    // Health starts nothing: engines start on first use.
    expect(data.engines.chromium?.status).toBe('idle');
    expect(data.engines.libreoffice?.status).toBe('idle');
  });

  it('lets exactly 50 of 200 concurrent requests through when 50 credits are left', async () => {
    t = await createTestApp(dialect, { clock, env: { BERTH_TOOLS_MONTHLY_CREDITS: '60' } });
    // Use 10 first, so 50 are left.
    for (let i = 0; i < 10; i++) expect((await t.request(mergeRequest())).statusCode).toBe(200);
    const responses = await Promise.all(Array.from({ length: 200 }, () => t.request(mergeRequest())));
    const codes = responses.map((r) => r.statusCode);
    expect(codes.filter((c) => c === 200)).toHaveLength(50);
    expect(codes.filter((c) => c === 402)).toHaveLength(150);
    const ok = responses.find((r) => r.statusCode === 200)!;
    expect(pdfInfo(ok.rawPayload).pages).toBe(2);
    const remainingHeaders = responses
      .filter((r) => r.statusCode === 200)
      .map((r) => Number(r.headers['x-credits-remaining']));
    // Every successful call saw a distinct remaining balance: no credit was handed out twice.
    expect(new Set(remainingHeaders).size).toBe(50);
    expect(Math.min(...remainingHeaders)).toBe(0);
    const refused = responses.find((r) => r.statusCode === 402)!;
    expect(refused.json<{ message: string }>().message).toMatch(/reset on 2026-12-01T00:00:00.000Z/);
    const balance = await t.request({
      method: 'GET',
      url: '/api/v1/tools/balance',
      headers: t.auth.tools,
    });
    expect(balance.json()).toMatchObject({ data: { allowance: 60, used: 60, remaining: 0 } });
    const charges = await t.ctx.db
      .selectFrom('tools_ledger')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('kind', '=', 'charge')
      .executeTakeFirstOrThrow();
    expect(Number(charges.n)).toBe(60);
  });

  it('resets on the 1st of the next month (UTC) without any job', async () => {
    const monthEnd = createManualClock('2026-11-30T23:59:59Z');
    t = await createTestApp(dialect, { clock: monthEnd, env: { BERTH_TOOLS_MONTHLY_CREDITS: '2' } });
    expect((await t.request(mergeRequest())).statusCode).toBe(200);
    expect((await t.request(mergeRequest())).statusCode).toBe(200);
    const empty = await t.request(mergeRequest());
    expect(empty.statusCode).toBe(402);
    expect(empty.json()).toEqual({ message: expect.stringContaining('2026-12-01T00:00:00.000Z') as unknown });
    monthEnd.set('2026-12-01T00:00:00Z');
    const next = await t.request(mergeRequest());
    expect(next.statusCode).toBe(200);
    expect(next.headers['x-credits-remaining']).toBe('1');
    const balance = await t.request({
      method: 'GET',
      url: '/api/v1/tools/balance',
      headers: t.auth.tools,
    });
    expect(balance.json()).toMatchObject({
      data: { used: 1, remaining: 1, period: '2026-12', resets_at: '2027-01-01T00:00:00.000Z' },
    });
  });

  it('refunds a failed call and keeps both entries in the ledger', async () => {
    t = await createTestApp(dialect, { clock, env: { BERTH_TOOLS_MONTHLY_CREDITS: '5' } });
    const broken = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(200, 0x41)]);
    const body = multipart([
      { name: 'files[]', filename: 'a.pdf', content: pdfA },
      { name: 'files[]', filename: 'broken.pdf', content: broken },
    ]);
    const res = await t.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/merge',
      headers: { ...t.auth.tools, ...body.headers },
      payload: body.payload,
    });
    expect(res.statusCode).toBe(422);
    expect(res.json<{ errors: Record<string, string[]> }>().errors['files.1']?.[0]).toMatch(/damaged/);
    const balance = await t.request({
      method: 'GET',
      url: '/api/v1/tools/balance',
      headers: t.auth.tools,
    });
    expect(balance.json()).toMatchObject({ data: { used: 0, remaining: 5 } });
    expect((await t.request(mergeRequest())).statusCode).toBe(200);
    const usage = await t.request({
      method: 'GET',
      url: '/api/v1/tools/usage?limit=10',
      headers: t.auth.tools,
    });
    expect(usage.statusCode).toBe(200);
    const entries = usage.json<{
      data: Array<{ id: number; type: string; operation: string; amount: number; refund_of: number | null }>;
    }>().data;
    expect(entries.map((e) => [e.type, e.operation, e.amount])).toEqual([
      ['charge', 'pdf.merge', 1],
      ['refund', 'pdf.merge', -1],
      ['charge', 'pdf.merge', 1],
    ]);
    expect(entries[1]?.refund_of).toBe(entries[2]?.id);
    const page = await t.request({
      method: 'GET',
      url: `/api/v1/tools/usage?limit=1&before=${entries[0]!.id}`,
      headers: t.auth.tools,
    });
    expect(page.json<{ data: Array<{ id: number }> }>().data.map((e) => e.id)).toEqual([entries[1]!.id]);
  });

  it('refunds a charge at most once', async () => {
    t = await createTestApp(dialect, { clock, env: { BERTH_TOOLS_MONTHLY_CREDITS: '3' } });
    const ledger = createCreditLedger({ db: t.ctx.db, clock, allowance: () => 3 });
    const a = await ledger.reserve(t.user.user_id, 'test');
    await ledger.reserve(t.user.user_id, 'test');
    await Promise.all([ledger.refund(a, 'x'), ledger.refund(a, 'y'), ledger.refund(a, 'z')]);
    expect((await ledger.balance(t.user.user_id)).used).toBe(1);
    const refunds = await t.ctx.db
      .selectFrom('tools_ledger')
      .selectAll()
      .where('kind', '=', 'refund')
      .execute();
    expect(refunds).toHaveLength(1);
  });
});

describe.runIf(DIALECTS.includes('postgres'))('tools credits across two replicas on one PostgreSQL', () => {
  let database: Awaited<ReturnType<typeof createTestPostgresDatabase>>;
  beforeAll(async () => {
    database = await createTestPostgresDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('never hands out more than the allowance', async () => {
    const clock = createManualClock('2026-11-23T10:00:00Z');
    const one = await openStore({ databaseUrl: database.url, poolSize: 8 });
    const two = await openStore({ databaseUrl: database.url, poolSize: 8, migrate: false });
    try {
      const user = await one.db
        .insertInto('users')
        .values({ email: 'r@example.com', created_at: clock.now().toISOString() })
        .returning('id')
        .executeTakeFirstOrThrow();
      const ledgers = [one, two].map((s) => createCreditLedger({ db: s.db, clock, allowance: () => 50 }));
      const results = await Promise.allSettled(
        Array.from({ length: 200 }, (_, i) => ledgers[i % 2]!.reserve(user.id, 'replica-test')),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(50);
      const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(rejected.every((r) => (r.reason as { status?: number }).status === 402)).toBe(true);
      expect((await ledgers[1]!.balance(user.id)).used).toBe(50);
    } finally {
      await one.close();
      await two.close();
    }
  });
});
