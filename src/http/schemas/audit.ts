// The audit log as GET /api/v1/teams/{team}/audit-log answers it (issue 31, item 2).
import { Type } from 'typebox';
import { Nullable, Timestamp } from './common.js';

export const AuditEntry = Type.Object({
  id: Type.Integer(),
  at: Timestamp,
  team_id: Nullable(Type.Integer()),
  action: Type.String({
    description: '<resource>.<verb>, e.g. application.deploy',
    examples: ['secret.delete'],
  }),
  actor: Nullable(
    Type.String({
      description: "The account's e-mail, `operator` (berth admin) or `berth` (Berth's own work)",
    }),
  ),
  user_id: Nullable(Type.Integer()),
  credential: Nullable(
    Type.String({
      description: '`api_token:<id>`, `session:<id>`, `db_api:<id>` or `operator`; never a secret',
    }),
  ),
  address: Nullable(Type.String({ description: "The client's address" })),
  target: Type.Object({ kind: Nullable(Type.String()), id: Type.String() }),
  before: Type.Unknown({ description: 'The state before (JSON), secret values replaced by ***' }),
  after: Type.Unknown({ description: 'The state after (JSON), secret values replaced by ***' }),
  details: Type.Unknown(),
});

export const AuditLogResponse = Type.Object({
  data: Type.Array(AuditEntry),
  meta: Type.Object({
    limit: Type.Integer(),
    next_before: Nullable(Type.Integer({ description: 'Pass as `before` for the next (older) page' })),
  }),
});
