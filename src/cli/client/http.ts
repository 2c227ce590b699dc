// The client's calls to Berth's three APIs: the platform API (bearer token), the tools API (the raw
// key) and `/1.3` (basic auth). Every failure becomes an ApiError carrying the API's own message.
import type { ResolvedProfile } from './config.js';
import { UsageError } from './errors.js';

export type Credential = 'platform' | 'tools' | 'db' | 'none';

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    /** `{path: [message…]}` of a 422 (or a tools field error). */
    readonly errors: Record<string, string[]> = {},
    readonly code?: string,
  ) {
    super(message);
  }
}

// Where the commands have always imported it from.
export { UsageError };

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  /** A JSON body, or a raw body with `contentType`. */
  json?: unknown;
  body?: string | FormData | Blob | ReadableStream<Uint8Array>;
  contentType?: string;
  accept?: string;
  credential?: Credential;
  /** More headers (a session cookie and its CSRF token while `login` signs in). */
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

const USER_AGENT = 'berth-cli/0.1';

export class Api {
  constructor(readonly profile: ResolvedProfile) {}

  url(pathname: string, query: RequestOptions['query'] = {}): URL {
    const base = this.profile.url.endsWith('/') ? this.profile.url : this.profile.url + '/';
    const url = new URL(pathname.replace(/^\//, ''), base);
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    return url;
  }

  /**
   * The credential that reaches the tools or the managed databases: the profile's own (a tools key,
   * the `/1.3` credential), else its API token, which Berth takes for the same use cases under
   * `/api/v1/user/tools` and `/api/v1/managed-databases` (what the dashboard's session uses).
   */
  access(kind: 'tools' | 'db'): Credential {
    const p = this.profile;
    const own = kind === 'tools' ? Boolean(p.tools_key) : Boolean(p.db_user && p.db_password);
    if (own) return kind;
    if (p.token) return 'platform';
    throw new UsageError(
      kind === 'tools'
        ? `profile '${p.name}' has neither a tools key nor an API token; run berth login --token T (or --tools-key K)`
        : `profile '${p.name}' has neither a database API credential nor an API token; run berth login --token T (or --db-user U --db-password P)`,
    );
  }

  private authorization(credential: Credential): string | undefined {
    const p = this.profile;
    switch (credential) {
      case 'platform':
        if (!p.token) throw new UsageError(`profile '${p.name}' has no API token; run berth login --token T`);
        return `Bearer ${p.token}`;
      case 'tools':
        if (!p.tools_key)
          throw new UsageError(`profile '${p.name}' has no tools key; run berth login --tools-key K`);
        return p.tools_key;
      case 'db':
        if (!p.db_user || !p.db_password)
          throw new UsageError(
            `profile '${p.name}' has no database API credential; run berth login --db-user U --db-password P`,
          );
        return `Basic ${Buffer.from(`${p.db_user}:${p.db_password}`).toString('base64')}`;
      case 'none':
        return undefined;
    }
  }

  /** The raw response of a successful request; a failure throws ApiError. */
  async send(method: string, pathname: string, options: RequestOptions = {}): Promise<Response> {
    const credential = options.credential ?? 'platform';
    const headers: Record<string, string> = {
      'user-agent': USER_AGENT,
      accept: options.accept ?? 'application/json',
      ...options.headers,
    };
    const authorization = this.authorization(credential);
    if (authorization) headers.authorization = authorization;
    let body = options.body;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['content-type'] = 'application/json';
    } else if (options.contentType) headers['content-type'] = options.contentType;
    let response: Response;
    try {
      response = await fetch(this.url(pathname, options.query), {
        method,
        headers,
        ...(body !== undefined ? { body } : {}),
        // A stream is sent as it is read (an upload is never held in memory whole).
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      if ((error as Error).name === 'AbortError') throw error;
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new ApiError(
        `cannot reach ${this.profile.url}: ${cause?.code ?? cause?.message ?? (error as Error).message}`,
        0,
      );
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }

  async json<T = unknown>(method: string, pathname: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.send(method, pathname, options);
    if (response.status === 204) return undefined as T;
    const text = await response.text();
    if (!text) return undefined as T;
    return JSON.parse(text) as T;
  }

  /** `{data}` of a platform answer. */
  async data<T = unknown>(method: string, pathname: string, options: RequestOptions = {}): Promise<T> {
    return (await this.json<{ data: T }>(method, pathname, options)).data;
  }
}

async function errorOf(response: Response): Promise<ApiError> {
  const text = await response.text().catch(() => '');
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON: the status says it
  }
  const nested = body.error as { error_code?: string; error_message?: string } | undefined;
  const message =
    (typeof body.message === 'string' && body.message) ||
    (typeof body.error_message === 'string' && body.error_message) ||
    nested?.error_message ||
    `${response.status} ${response.statusText}`;
  const errors =
    body.errors && typeof body.errors === 'object' && !Array.isArray(body.errors)
      ? (body.errors as Record<string, string[]>)
      : {};
  const code = (typeof body.error_code === 'string' && body.error_code) || nested?.error_code || undefined;
  return new ApiError(message, response.status, errors, code);
}

/** Server-sent events of a response, one `{event, data}` at a time. */
export async function* events(response: Response): AsyncGenerator<{ event: string; data: unknown }> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length === 0) continue;
      let value: unknown = data.join('\n');
      try {
        value = JSON.parse(value as string);
      } catch {
        // plain text data
      }
      yield { event, data: value };
    }
  }
}
