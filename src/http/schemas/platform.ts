// Answers of the platform API's identity routes (/api/v1/ping, /user, /teams, credentials), of the
// team notifications outbox, of scheduled deletion, and of the open probes.
import { Type } from 'typebox';
import { Data, Nullable, OneOf, Timestamp } from './common.js';

const Role = OneOf(['owner', 'member']);
const CredentialKind = OneOf(['api_token', 'tools_key', 'db_api']);

export const Pong = Type.Object({ pong: Type.Literal(true) }, { description: 'The token works' });

/** A team as its member sees it, with the member's role. */
const TeamWithRole = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  created_at: Timestamp,
  role: Role,
});

export const UserResponse = Data(
  Type.Object({
    id: Type.Integer(),
    email: Type.String(),
    created_at: Timestamp,
    teams: Type.Array(TeamWithRole),
  }),
  'The caller and their teams',
);

export const TeamsResponse = Data(Type.Array(TeamWithRole), "The caller's teams");

export const TeamResponse = Data(
  Type.Object({
    id: Type.Integer(),
    name: Type.String(),
    created_at: Timestamp,
    role: Role,
    members: Type.Array(Type.Object({ id: Type.Integer(), email: Type.String(), role: Role })),
  }),
  'The team, the caller’s role in it, and its members',
);

const Credential = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  hint: Type.String({
    description: 'The first characters of the token (the username for database credentials)',
  }),
  created_at: Timestamp,
  last_used_at: Nullable(Timestamp),
  revoked_at: Nullable(Timestamp),
});

export const CredentialsResponse = Data(
  Type.Array(Credential),
  'The credentials of this kind, never their secrets',
);

export const IssuedCredentialResponse = Data(
  Type.Object({
    id: Type.Integer(),
    kind: CredentialKind,
    name: Type.String(),
    token: Type.Optional(Type.String({ description: 'API token or tools key: shown this once' })),
    username: Type.Optional(Type.String({ description: 'Database credentials: the basic-auth username' })),
    password: Type.Optional(
      Type.String({ description: 'Database credentials: the password, shown this once' }),
    ),
  }),
  'The new credential with its secret (shown this once; only a hash is stored)',
);

const NextBefore = Nullable(
  Type.Integer({ description: 'Pass as `before` for the next page; null on the last' }),
);

export const NotificationsResponse = Type.Object(
  {
    data: Type.Array(
      Type.Object({
        id: Type.Integer(),
        kind: OneOf(['deletion_warning_7d', 'deletion_warning_1d', 'application_deleted']),
        application_id: Nullable(Type.Integer()),
        recipient: Type.String(),
        subject: Type.String(),
        body: Type.String(),
        state: OneOf(['unsent', 'sent', 'failed', 'cancelled', 'not_sent']),
        attempts: Type.Integer(),
        last_error: Nullable(Type.String()),
        scheduled_for: Nullable(Timestamp),
        created_at: Timestamp,
        sent_at: Nullable(Timestamp),
      }),
    ),
    meta: Type.Object({ limit: Type.Integer(), next_before: NextBefore }),
  },
  { description: "The team's notifications, newest first" },
);

const Warning = Nullable(
  Type.Object({
    due_at: Timestamp,
    status: OneOf(['handled', 'pending'], {
      description: 'handled: sent, or superseded by the nearer warning',
    }),
  }),
);

export const ScheduleResponse = Data(
  Type.Object({
    id: Type.Integer(),
    name: Type.String(),
    team_id: Type.Integer(),
    state: OneOf(['no_schedule', 'scheduled']),
    scheduled_deletion_at: Nullable(Timestamp),
    warnings: Type.Object({ seven_days: Warning, one_day: Warning }),
  }),
  "The application's deletion schedule and its warnings",
);

export const Health = Type.Object({ status: Type.Literal('ok') }, { description: 'The process is up' });
export const Ready = Type.Object({ status: Type.Literal('ready') }, { description: 'The store answers' });
export const OpenApiDocument = Type.Object(
  { openapi: Type.String(), info: Type.Object({}), paths: Type.Object({}) },
  { description: 'This OpenAPI 3.1 document' },
);
