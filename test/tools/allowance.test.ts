// A user's own monthly allowance, set by the operator (`berth admin set-credits`), governs that user's
// balance and charges; everyone else keeps the server-wide default.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/domain/clock.js';
import { createCreditLedger } from '../../src/services/tools/credits.js';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { makePdf, multipart } from './helpers.js';

describe.each(DIALECTS)('a per-user tools allowance on %s', (dialect) => {
  let t: TestApp;
  let pdf: Buffer;
  beforeAll(async () => {
    pdf = await makePdf(1, 'A');
    t = await createTestApp(dialect, {
      clock: createManualClock('2026-11-23T10:00:00Z'),
      env: { BERTH_TOOLS_MONTHLY_CREDITS: '100' },
    });
  });
  afterAll(async () => t?.close());

  const merge = (headers: Record<string, string>) => {
    const body = multipart([
      { name: 'files[]', filename: 'a.pdf', content: pdf, type: 'application/pdf' },
      { name: 'files[]', filename: 'b.pdf', content: pdf, type: 'application/pdf' },
    ]);
    return t.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/merge',
      headers: { ...headers, ...body.headers },
      payload: body.payload,
    });
  };
  const allowanceOf = async (headers: Record<string, string>) =>
    (await t.request({ method: 'GET', url: '/api/v1/tools/balance', headers })).json<{
      data: { allowance: number; remaining: number };
    }>().data;

  it('charges against the user’s own allowance, names it when used up, and returns to the default', async () => {
    const other = authHeaders(
      await t.ctx.identity.createUser({ email: 'other@example.com', team: 'others', role: 'owner' }),
    ).tools;
    const ledger = createCreditLedger({ db: t.ctx.db, clock: t.ctx.clock, allowance: () => 100 });
    await ledger.setAllowance(t.user.user_id, 2);

    expect(await allowanceOf(t.auth.tools)).toEqual(expect.objectContaining({ allowance: 2, remaining: 2 }));
    expect((await merge(t.auth.tools)).statusCode).toBe(200);
    expect((await merge(t.auth.tools)).statusCode).toBe(200);
    const refused = await merge(t.auth.tools);
    expect(refused.statusCode).toBe(402);
    expect(refused.json<{ message: string }>().message).toContain('allowance of 2 credits');
    // Another user keeps the server-wide default.
    expect(await allowanceOf(other)).toEqual(expect.objectContaining({ allowance: 100, remaining: 100 }));
    expect((await merge(other)).statusCode).toBe(200);

    await ledger.setAllowance(t.user.user_id, null);
    expect(await allowanceOf(t.auth.tools)).toEqual(
      expect.objectContaining({ allowance: 100, remaining: 98 }),
    );
    expect((await merge(t.auth.tools)).statusCode).toBe(200);
    await expect(ledger.setAllowance(t.user.user_id, -1)).rejects.toThrow(/at least 0/);
  });
});
