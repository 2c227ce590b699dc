// The one way the panel talks to Berth: the public /api/v1 with the session cookie (sent by the
// browser, never seen here), the CSRF token on every change, and one error shape for every failure.
import { signal } from '@preact/signals';

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

// ---- The shapes the panel reads (the API's schemas, src/http/schemas/) ----

export type Role = 'owner' | 'member';
export interface Team {
  id: number;
  name: string;
  created_at: string;
  role: Role;
}
export interface User {
  id: number;
  email: string;
  created_at: string;
  teams: Team[];
}
export interface TeamDetail extends Team {
  members: Array<{ id: number; email: string; role: Role }>;
}
export interface SignedIn {
  user: { id: number; email: string };
  session: { id: number };
  csrf_token: string;
}
export interface Session {
  id: number;
  created_at: string;
  last_seen_at: string;
  expires_at: string;
  user_agent: string | null;
  address: string | null;
  current: boolean;
}
export interface Credential {
  id: number;
  name: string;
  hint: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}
export interface IssuedCredential {
  id: number;
  kind: string;
  name: string;
  token?: string;
  username?: string;
  password?: string;
}
export interface Deployment {
  id: number;
  status: 'pending' | 'running' | 'success' | 'failed' | 'cancelled';
  step: string | null;
  reason: string;
  branch: string | null;
  commit_sha: string | null;
  release: string | null;
  error: string | null;
  started_at: string | null;
  finished_at: string | null;
  duration_seconds: number | null;
  created_at: string;
}
export interface HealthCheck {
  enabled: boolean;
  path: string;
  status: string;
}
export interface AppSummary {
  id: number;
  team_id: number;
  name: string;
  type: string;
  version: string | null;
  label: string | null;
  health_check: HealthCheck;
  scheduled_deletion_at: string | null;
  created_at: string;
}
export interface AppDetail extends AppSummary {
  repository: { url?: string; owner?: string; name?: string; branch?: string };
  settings: {
    health_check_path: string;
    health_check_enabled: boolean;
    replicas: number | null;
    memory: string | null;
  };
  domains: Array<{ domain: string }>;
  secrets: Array<{ key: string }>;
  volumes: Array<{ name: string; mount_path: string; volume_size: number }>;
  services: Array<{ name: string; type: string; version: string | null; settings: Record<string, unknown> }>;
  latest_deployment: Deployment | null;
}
export interface AppStatus {
  status: string;
  status_reason: string | null;
  suspended: boolean;
  live_deployment_id: number | null;
  replicas: { desired: number; running: number; total: number };
  health_check: { enabled: boolean; status: string };
  hostnames: string[];
  latest_deployment: Deployment | null;
}
export interface Instance {
  name: string;
  release: string;
  state: string;
  pid: number | null;
  restarts: number;
  healthy: boolean | null;
  started_at: string | null;
}
export interface Schedule {
  state: 'no_schedule' | 'scheduled';
  scheduled_deletion_at: string | null;
  warnings: {
    seven_days: { due_at: string; status: string } | null;
    one_day: { due_at: string; status: string } | null;
  };
}
export interface ApplyResult {
  success: boolean;
  application_id: number | null;
  application_name: string;
  dry_run: boolean;
  changes: string[];
  errors: string[];
  deployment_id: number | null;
}
export interface DatabaseSummary {
  uuid: string;
  name: string;
  type: string;
  plan: string;
  zone: string;
  state: string;
  state_reason: string | null;
  pending_changes: { plan: string | null; zone: string | null } | null;
}
export interface DatabaseDetail {
  uuid: string;
  name: string;
  type: string;
  plan: string;
  zone: string;
  state: string;
  version: string | null;
  connection: {
    uri: string;
    params: Record<string, string>;
    users: Array<{ username: string; type: string; password?: string }>;
    databases: Array<{ name: string }>;
  };
  pending_changes: { plan: string | null; zone: string | null } | null;
}
export interface StorageSummary {
  uuid: string;
  name: string;
  zone: string;
  state: string;
  buckets: string[];
  users: Array<{ username: string }>;
  pending_changes: { zone: string } | null;
}
export interface StorageDetail extends StorageSummary {
  /** Shared: the access key picks the storage. */
  endpoint: string;
  /** The storage's own endpoint, which names it (docs/decisions/0008-bucket-namespaces.md). */
  endpoints: { path: string; virtual_host: string | null };
  region: string;
  users: Array<{ username: string; access_key_id: string; secret_key: string | null }>;
}
export interface Notification {
  id: number;
  kind: string;
  recipient: string;
  subject: string;
  body: string;
  state: string;
  created_at: string;
  sent_at: string | null;
}
export interface Task {
  id: string;
  operation: string;
  result: string;
  success: boolean | null;
}
export interface MigrationStatus {
  status: string;
  method: string;
  error?: string;
  databases: Array<{ dbname: string; status: string; error?: string }>;
}
export interface Balance {
  allowance: number;
  used: number;
  remaining: number;
  period: string;
  resets_at: string;
}
export interface UsageEntry {
  id: number;
  type: 'charge' | 'refund';
  operation: string;
  amount: number;
  created_at: string;
}
