// Answers of the accounts routes (src/http/routes/platform/accounts.ts): sign-in, the session, browser
// sessions, team members. Here, apart from the routes, so the dashboard and the CLI take their types
// from them (type-only imports; see "Response types" in docs/architecture.md).
import { Type } from 'typebox';
import { Data, Nullable, OneOf, Timestamp } from './common.js';

const Role = OneOf(['owner', 'member']);

export const Session = Type.Object({
  id: Type.Integer(),
  created_at: Timestamp,
  last_seen_at: Timestamp,
  expires_at: Timestamp,
  user_agent: Type.String(),
  address: Type.String(),
  current: Type.Boolean({ description: 'The session this call was made with' }),
});
export const SignedInData = Type.Object({
  user: Type.Object({ id: Type.Integer(), email: Type.String() }),
  session: Session,
  csrf_token: Type.String({ description: 'Send as X-CSRF-Token with every change made with the cookie' }),
});
export const SignedInResponse = Data(
  SignedInData,
  'Signed in: the session cookie is set (HttpOnly); keep csrf_token for writes',
);
export const SessionResponse = Data(
  Nullable(SignedInData),
  'The session and its csrf_token; null when signed out (no cookie, or its session ended: the cookie is cleared)',
);
export const Member = Type.Object({ id: Type.Integer(), email: Type.String(), role: Role });
export const TeamCreated = Data(
  Type.Object({ id: Type.Integer(), name: Type.String(), created_at: Timestamp, role: Role }),
  'The new team; the caller is its owner',
);
