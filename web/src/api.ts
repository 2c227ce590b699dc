// The one way the panel talks to Berth: the public /api/v1 with the session cookie (sent by the
// browser, never seen here), the CSRF token on every change, and one error shape for every failure.
import { signal } from '@preact/signals';
import type { Static, TSchema } from 'typebox';
import type { AppServicesResponse, ConnectionFormatsResponse } from '../../src/http/schemas/app-services.js';
import type {
  MaintenanceResponse,
  MigrationStatusResponse,
  ServiceResponse,
  TaskResponse,
} from '../../src/http/schemas/dbapi.js';
import type {
  ApplicationResponse,
  ApplicationsResponse,
  ApplyResponse,
  ManagedDatabaseResponse,
  ObjectStorageResponse,
  TeamManagedDatabasesResponse,
  TeamObjectStoragesResponse,
} from '../../src/http/schemas/infrastructure.js';
import type {
  CredentialsResponse,
  IssuedCredentialResponse,
  NotificationsResponse,
  ScheduleResponse,
  TeamResponse,
  TeamsResponse,
  UserResponse,
} from '../../src/http/schemas/platform.js';
import type {
  Deployment as DeploymentSchema,
  InstancesResponse,
  StatusResponse,
  UploadDeployingResponse,
} from '../../src/http/schemas/runtime.js';
import type { BalanceResponse, UsageResponse } from '../../src/http/schemas/tools-answers.js';
import type { AuditLogResponse } from '../../src/http/schemas/audit.js';
import type {
  CreatedWebhookResponse,
  WebhookDeliveriesResponse,
  WebhooksResponse,
} from '../../src/http/schemas/webhooks.js';
import type {
  Session as SessionSchema,
  SignedInResponse,
  TeamCreated as TeamCreatedResponse,
} from '../../src/http/schemas/accounts.js';

/** An answer that was not a success: the API's message, and its field errors (422) by field path. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly fields: Record<string, string[]> = {},
  ) {
    super(message);
  }
}

let csrfToken = '';
export function setCsrf(token: string): void {
  csrfToken = token;
}

/** Set when a call answers 401: the session ended (signed out elsewhere, expired, revoked). */
export const sessionEnded = signal(false);

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

interface CallOptions {
  /** A body sent as it is (YAML text) with this type, instead of JSON. */
  contentType?: string;
  /** 401 is an answer (sign-in), not the end of the session. */
  signingIn?: boolean;
  /** What the answer may be: JSON unless a file is asked for. */
  accept?: string;
}

async function errorOf(response: Response): Promise<ApiError> {
  let message = `${response.status} ${response.statusText}`;
  let fields: Record<string, string[]> = {};
  try {
    const body = (await response.json()) as { message?: string; errors?: Record<string, string[]> | null };
    if (typeof body.message === 'string') message = body.message;
    if (body.errors && typeof body.errors === 'object') fields = body.errors;
  } catch {
    // not JSON: the status line says what happened
  }
  return new ApiError(response.status, message, fields);
}

export async function request(
  method: Method,
  path: string,
  body?: unknown,
  options: CallOptions = {},
): Promise<Response> {
  const headers: Record<string, string> = { accept: options.accept ?? 'application/json' };
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  let payload: string | Blob | undefined;
  if (body !== undefined) {
    headers['content-type'] = options.contentType ?? 'application/json';
    // A file (a source archive) is sent as it is.
    payload = typeof body === 'string' || body instanceof Blob ? body : JSON.stringify(body);
  }
  let response: Response;
  try {
    response = await fetch(path, { method, headers, body: payload, credentials: 'same-origin' });
  } catch {
    throw new ApiError(0, 'Berth did not answer: check your connection and retry.');
  }
  if (!response.ok) {
    if (response.status === 401 && !options.signingIn) sessionEnded.value = true;
    throw await errorOf(response);
  }
  return response;
}

async function json<T>(method: Method, path: string, body?: unknown, options?: CallOptions): Promise<T> {
  const response = await request(method, path, body, options);
  if (
    response.status === 204 ||
    (response.status === 202 && response.headers.get('content-length') === '0')
  ) {
    return undefined as T;
  }
  const text = await response.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export const api = {
  get: <T>(path: string) => json<T>('GET', path),
  post: <T>(path: string, body?: unknown, options?: CallOptions) =>
    json<T>('POST', path, body ?? {}, options),
  put: <T>(path: string, body?: unknown) => json<T>('PUT', path, body ?? {}),
  patch: <T>(path: string, body?: unknown) => json<T>('PATCH', path, body ?? {}),
  del: <T>(path: string) => json<T>('DELETE', path),
  /** A file answer (YAML export, PDF, screenshot) as a Blob. */
  async blob(method: Method, path: string, body?: unknown): Promise<Blob> {
    return (await request(method, path, body, { accept: '*/*' })).blob();
  },
  async text(path: string): Promise<string> {
    return (await request('GET', path, undefined, { accept: '*/*' })).text();
  },
};

export const enc = encodeURIComponent;

// ---- The shapes the panel reads: the API's own response schemas (src/http/schemas/), as types ----
// Type-only imports: nothing of the server reaches the bundle, and a field the panel reads that the
// server does not send fails `tsc -p web/tsconfig.json` (test/architecture/response-types.test.ts keeps
// them from being written again here).

/** The `data` of an answer in the platform API's `{data: …}` envelope. */
type DataOf<S extends TSchema> = Static<S> extends { data: infer D } ? D : never;
/** One entry of a listed `data`. */
type EntryOf<S extends TSchema> = DataOf<S> extends ReadonlyArray<infer E> ? E : never;

export type User = DataOf<typeof UserResponse>;
export type Team = EntryOf<typeof TeamsResponse>;
export type Role = Team['role'];
export type TeamDetail = DataOf<typeof TeamResponse>;
export type Credential = EntryOf<typeof CredentialsResponse>;
export type IssuedCredential = DataOf<typeof IssuedCredentialResponse>;
export type Notification = EntryOf<typeof NotificationsResponse>;
export type AuditEntry = EntryOf<typeof AuditLogResponse>;
export type AuditPage = Static<typeof AuditLogResponse>;
export type Schedule = DataOf<typeof ScheduleResponse>;
export type Deployment = Static<typeof DeploymentSchema>;
export type AppStatus = DataOf<typeof StatusResponse>;
export type Instance = EntryOf<typeof InstancesResponse>;
export type SourceUpload = DataOf<typeof UploadDeployingResponse>;
export type AppSummary = EntryOf<typeof ApplicationsResponse>;
export type AppDetail = DataOf<typeof ApplicationResponse>;
export type AppService = EntryOf<typeof AppServicesResponse>;
export type ConnectionFormat = EntryOf<typeof ConnectionFormatsResponse>;
export type ApplyResult = Static<typeof ApplyResponse>;
export type DatabaseSummary = EntryOf<typeof TeamManagedDatabasesResponse>;
export type DatabaseDetail = DataOf<typeof ManagedDatabaseResponse>;
export type StorageSummary = EntryOf<typeof TeamObjectStoragesResponse>;
export type StorageDetail = DataOf<typeof ObjectStorageResponse>;
export type BucketAcl = StorageDetail['bucket_acls'][string];
/** /1.3's service object (a clone's answer). */
export type DatabaseService = Static<typeof ServiceResponse>;
export type Task = Static<typeof TaskResponse>;
export type MigrationStatus = Static<typeof MigrationStatusResponse>;
export type Maintenance = Static<typeof MaintenanceResponse>;
export type Balance = DataOf<typeof BalanceResponse>;
export type UsageEntry = EntryOf<typeof UsageResponse>;

export type SignedIn = DataOf<typeof SignedInResponse>;
export type Session = Static<typeof SessionSchema>;
export type TeamCreated = DataOf<typeof TeamCreatedResponse>;
export type Webhook = EntryOf<typeof WebhooksResponse>;
export type CreatedWebhook = DataOf<typeof CreatedWebhookResponse>;
export type WebhookDelivery = EntryOf<typeof WebhookDeliveriesResponse>;
