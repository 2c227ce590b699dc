// The error bodies src/http/plugins/errors.ts sends (sendError), as response schemas: `{message}` for
// most statuses, `{message, errors}` for 422, `{success: false, message, errors: null}` for 400 and 5xx,
// and on /1.3 UpCloud's `{error_code, error_message, error: {…}}` for every status.
import { Type, type TSchema } from 'typebox';

const message = (description: string) => Type.Object({ message: Type.String() }, { description });

const failure = (description: string) =>
  Type.Object({ success: Type.Literal(false), message: Type.String(), errors: Type.Null() }, { description });

/** 422: every invalid, missing or unknown field with its messages. */
export const ValidationFailure = Type.Object(
  {
    message: Type.String(),
    errors: Type.Record(Type.String(), Type.Array(Type.String()), {
      description: 'Field path → messages',
    }),
  },
  { description: 'Validation failed: invalid, missing or unknown fields' },
);

const PLATFORM_ERRORS = {
  400: failure('The body could not be parsed'),
  401: message(
    'Unauthenticated: the credential is missing, malformed, unknown or revoked (WWW-Authenticate names the scheme)',
  ),
  402: message('No tools credits left this month'),
  403: message('Forbidden: the resource belongs to a team the caller is not in, or needs an owner'),
  404: message('Not found'),
  409: message('Conflict with the current state'),
  413: message('The body is larger than the limit (the message states it)'),
  422: ValidationFailure,
  502: failure('An engine failed'),
} as const;

export type PlatformErrorStatus = keyof typeof PLATFORM_ERRORS;

/** Any other answer of the status table in docs/api/platform.md: all carry a message. */
const PlatformDefault = Type.Object(
  { message: Type.String() },
  {
    description:
      'Another error of the status table (400, 405, 406, 415, 429, 500, 503): `{message}`, with `success: false` and `errors: null` for 400 and 5xx',
  },
);

/** The error answers of a platform or tools route: the statuses it names, and `default` for the rest. */
export function platformErrors(...statuses: PlatformErrorStatus[]): Record<string, TSchema> {
  const out: Record<string, TSchema> = {};
  for (const status of statuses) out[status] = PLATFORM_ERRORS[status];
  out.default = PlatformDefault;
  return out;
}

const ErrorPair = { error_code: Type.String(), error_message: Type.String() };

/** Every /1.3 error: UpCloud's code and message, and the same pair under `error`. */
const dbApiError = (description: string) =>
  Type.Object({ ...ErrorPair, error: Type.Object(ErrorPair) }, { description });

const DB_API_ERRORS = {
  400: dbApiError('Invalid request (INVALID_REQUEST, or the operation’s own code)'),
  401: dbApiError('Authentication failed (AUTHENTICATION_FAILED)'),
  403: dbApiError('The database belongs to another account, or needs an owner (ACCOUNT_FORBIDDEN)'),
  404: dbApiError('No such database or task (SERVICE_NOT_FOUND, TASK_NOT_FOUND)'),
  409: dbApiError('Conflict with the database’s state (SERVICE_NOT_RUNNING, MIGRATION_IN_PROGRESS, …)'),
} as const;

export type DbApiErrorStatus = keyof typeof DB_API_ERRORS;

/** The error answers of a /1.3 route: the statuses it names, and `default` (same shape) for the rest. */
export function dbApiErrors(...statuses: DbApiErrorStatus[]): Record<string, TSchema> {
  const out: Record<string, TSchema> = {};
  for (const status of statuses) out[status] = DB_API_ERRORS[status];
  out.default = dbApiError('Another error (405, 406, 413, 415, 429, 500, 503), in the same shape');
  return out;
}
