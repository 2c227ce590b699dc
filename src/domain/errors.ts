// Errors are values with a closed set of codes; one HTTP error handler maps them to status and body.

export type ErrorCode =
  | 'bad_request'
  | 'unauthenticated'
  | 'insufficient_credits'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'not_acceptable'
  | 'conflict'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'validation'
  | 'rate_limited'
  | 'internal'
  | 'engine_failed'
  | 'maintenance';

export const STATUS_OF: Record<ErrorCode, number> = {
  bad_request: 400,
  unauthenticated: 401,
  insufficient_credits: 402,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  not_acceptable: 406,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation: 422,
  rate_limited: 429,
  internal: 500,
  engine_failed: 502,
  maintenance: 503,
};

/** Field path → messages, as in the spec's 422 body. */
export type FieldErrors = Record<string, string[]>;

export interface AppErrorOptions {
  /** Field errors for `validation`. */
  errors?: FieldErrors;
  /** Machine-readable code for the /1.3 API (UpCloud style), e.g. SERVICE_NOT_FOUND. */
  apiCode?: string;
  /** Seconds, sent as Retry-After (429, 503). */
  retryAfter?: number;
  /** Extra headers, e.g. Allow for 405. */
  headers?: Record<string, string>;
  cause?: unknown;
}

export class AppError extends Error {
  readonly status: number;
  readonly errors: FieldErrors | undefined;
  readonly apiCode: string | undefined;
  readonly retryAfter: number | undefined;
  readonly headers: Record<string, string>;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: AppErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.status = STATUS_OF[code];
    this.errors = options.errors;
    this.apiCode = options.apiCode;
    this.retryAfter = options.retryAfter;
    this.headers = options.headers ?? {};
  }
}

export const isAppError = (error: unknown): error is AppError => error instanceof AppError;

export function validationError(errors: FieldErrors, message = 'The given data was invalid.'): AppError {
  return new AppError('validation', message, { errors });
}

/** The 422 for one field with one message: `{ errors: { [field]: [message] } }`. */
export const fieldError = (field: string, message: string): AppError =>
  validationError({ [field]: [message] });

/** Collects field errors; `throwIfAny` raises one 422 carrying all of them. */
export class FieldErrorCollector {
  readonly errors: FieldErrors = {};
  add(path: string, message: string): void {
    (this.errors[path] ??= []).push(message);
  }
  get size(): number {
    return Object.keys(this.errors).length;
  }
  throwIfAny(message?: string): void {
    if (this.size > 0) throw validationError(this.errors, message);
  }
}
