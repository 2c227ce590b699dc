// Answers of the tools API (/api/v1/tools) in JSON: engine health, credits and their use. Apart from
// tools.ts (which re-exports them) because it imports nothing of the server's domain: the dashboard's
// type-check reads this file (web/src/api.ts), and domain/tools.ts is Node code (Buffer).
import { Type } from 'typebox';
import { Data, Nullable, OneOf, Timestamp } from './common.js';

const EngineState = OneOf(['idle', 'starting', 'ready', 'failed']);
const Queue = { running: Type.Integer(), queued: Type.Integer() };

export const HealthResponse = Data(
  Type.Object({
    status: OneOf(['ok', 'degraded']),
    engines: Type.Object({
      chromium: Type.Object({
        status: EngineState,
        jobs: Type.Integer(),
        failures: Type.Integer(),
        restarts: Type.Integer(),
        lastError: Nullable(Type.String()),
        ...Queue,
      }),
      libreoffice: Type.Object({
        status: EngineState,
        listeners: Type.Integer(),
        jobs: Type.Integer(),
        coldConversions: Type.Integer(),
        failures: Type.Integer(),
        restarts: Type.Integer(),
        lastError: Nullable(Type.String()),
        ...Queue,
      }),
      pdf: Type.Object({ status: Type.Literal('ready'), ...Queue }),
    }),
  }),
  'The engines and their queues',
);

export const BalanceResponse = Data(
  Type.Object({
    allowance: Type.Integer(),
    used: Type.Integer(),
    remaining: Type.Integer(),
    period: Type.String({ description: 'Calendar month in UTC, YYYY-MM' }),
    period_start: Timestamp,
    resets_at: Timestamp,
  }),
  "This month's credits",
);

export const UsageResponse = Type.Object(
  {
    data: Type.Array(
      Type.Object({
        id: Type.Integer(),
        type: OneOf(['charge', 'refund']),
        operation: Type.String({ description: 'The endpoint charged, e.g. `pdf.convert.html`' }),
        amount: Type.Integer({ description: '+1 for a charge, -1 for a refund' }),
        period: Type.String(),
        refund_of: Nullable(Type.Integer()),
        reason: Nullable(Type.String()),
        request_id: Nullable(Type.String()),
        created_at: Timestamp,
      }),
    ),
    meta: Type.Object({
      limit: Type.Integer(),
      next_before: Nullable(
        Type.Integer({ description: 'Pass as `before` for the next page; null on the last' }),
      ),
    }),
  },
  { description: 'Charges and refunds, newest first' },
);
