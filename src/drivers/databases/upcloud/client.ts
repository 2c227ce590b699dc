// A small client of UpCloud's API (/1.3): HTTP Basic with the API user, JSON both ways, and its two
// error formats (problem+json, and the older {"error":{error_code,error_message}}) read into one error.

export interface UpCloudClientOptions {
  /** Base URL without a trailing slash, e.g. https://api.upcloud.com. */
  apiUrl: string;
  username: string;
  password: string;
}

/** An answer of UpCloud's API other than 2xx: its status, code (`INVALID_REQUEST`) and message. */
export class UpCloudApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'UpCloudApiError';
  }
}

export interface UpCloudClient {
  request<T>(method: string, path: string, body?: unknown): Promise<T>;
}

export function createUpCloudClient(options: UpCloudClientOptions): UpCloudClient {
  const authorization = `Basic ${Buffer.from(`${options.username}:${options.password}`).toString('base64')}`;
  return {
    async request<T>(method: string, path: string, body?: unknown): Promise<T> {
      const response = await fetch(`${options.apiUrl}${path}`, {
        method,
        headers: {
          authorization,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      if (!response.ok) throw apiError(response.status, text);
      return (text === '' ? undefined : JSON.parse(text)) as T;
    },
  };
}

function apiError(status: number, text: string): UpCloudApiError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return new UpCloudApiError(status, '', `UpCloud answered ${status}: ${text.slice(0, 200)}`);
  }
  const body = (parsed ?? {}) as {
    type?: string;
    title?: string;
    invalid_params?: Array<{ name?: string; reason?: string }>;
    error?: { error_code?: string; error_message?: string };
  };
  if (body.error) {
    const code = body.error.error_code ?? '';
    return new UpCloudApiError(
      status,
      code,
      `UpCloud answered ${status} ${code}: ${body.error.error_message ?? ''}`,
    );
  }
  // problem+json: the code is the type's fragment without ERROR_ (UpCloud's Go SDK reads it so).
  const code = (body.type?.split('#')[1] ?? '').replace(/^ERROR_/, '');
  const params = (body.invalid_params ?? []).map((p) => `${p.name ?? ''}: ${p.reason ?? ''}`).join('; ');
  return new UpCloudApiError(
    status,
    code,
    `UpCloud answered ${status} ${code}: ${body.title ?? ''}${params ? ` (${params})` : ''}`,
  );
}
