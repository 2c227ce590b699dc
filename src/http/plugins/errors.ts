// The one place that turns errors into HTTP bodies (DESIGN.md, convention 3).
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, isAppError, type FieldErrors } from '../../domain/errors.js';

const DB_API_PREFIX = '/1.3';

/** Body types some route reads (app.ts registers the parsers); each route's docs say which it takes. */
export const ACCEPTED_BODY_TYPES = [
  'application/json',
  'application/yaml',
  'application/x-yaml',
  'text/yaml',
  'text/x-yaml',
  'text/plain',
  'multipart/form-data',
];

function formatBytes(bytes: number): string {
  if (bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  if (bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

/** UpCloud-style codes for the /1.3 API where the thrower gave none. */
const DEFAULT_API_CODE: Record<number, string> = {
  400: 'INVALID_REQUEST',
  401: 'AUTHENTICATION_FAILED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  406: 'NOT_ACCEPTABLE',
  409: 'CONFLICT',
  413: 'REQUEST_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  422: 'INVALID_REQUEST',
  429: 'TOO_MANY_REQUESTS',
  500: 'INTERNAL_ERROR',
  502: 'BAD_GATEWAY',
  503: 'SERVICE_UNAVAILABLE',
};

export function sendError(request: FastifyRequest, reply: FastifyReply, error: AppError): FastifyReply {
  for (const [name, value] of Object.entries(error.headers)) void reply.header(name, value);
  if (error.retryAfter !== undefined) void reply.header('retry-after', String(error.retryAfter));
  void reply.code(error.status).type('application/json; charset=utf-8');

  if (request.url.startsWith(DB_API_PREFIX)) {
    const pair = {
      error_code: error.apiCode ?? DEFAULT_API_CODE[error.status] ?? 'ERROR',
      error_message: error.message,
    };
    return reply.send({ ...pair, error: pair });
  }
  if (error.status === 422) {
    return reply.send({ message: error.message, errors: error.errors ?? {} });
  }
  if (error.status === 400 || error.status >= 500) {
    return reply.send({ success: false, message: error.message, errors: null });
  }
  return reply.send({ message: error.message });
}

/** Keywords by which a value fails to be one of a fixed set (TypeBox literals, unions, enums). */
const CHOICE_KEYWORDS = new Set(['const', 'enum', 'anyOf', 'oneOf']);

const quoteChoice = (value: unknown) => (typeof value === 'string' ? `'${value}'` : JSON.stringify(value));

/**
 * Schema validation failures: field path → messages. A value outside a fixed set fails once per
 * alternative (`must be equal to constant` for each literal, then `must match a schema in anyOf`);
 * those become one message that names the accepted values.
 */
function fieldErrorsOf(error: FastifyError): FieldErrors {
  const errors: FieldErrors = {};
  const choices = new Map<string, unknown[]>();
  for (const item of error.validation ?? []) {
    const params = item.params as
      | {
          missingProperty?: string;
          additionalProperty?: string;
          allowedValue?: unknown;
          allowedValues?: unknown[];
        }
      | undefined;
    const missing = params?.missingProperty;
    const extra = params?.additionalProperty;
    const base = item.instancePath.replace(/^\//, '').replace(/\//g, '.');
    const field = [base, missing ?? extra].filter(Boolean).join('.') || (error.validationContext ?? 'body');
    if (CHOICE_KEYWORDS.has(item.keyword)) {
      const accepted = choices.get(field) ?? [];
      if (item.keyword === 'const') accepted.push(params?.allowedValue);
      if (item.keyword === 'enum') accepted.push(...(params?.allowedValues ?? []));
      choices.set(field, accepted);
      continue;
    }
    const message = missing
      ? `The ${field} field is required.`
      : extra
        ? `The ${field} field is not allowed.`
        : `The ${field} field ${item.message ?? 'is invalid'}.`;
    (errors[field] ??= []).push(message);
  }
  for (const [field, accepted] of choices) {
    const values = [...new Set(accepted.map(quoteChoice))];
    // A union of other shapes (a number or a string, say) keeps the messages of its members above.
    if (values.length === 0) {
      (errors[field] ??= []).push(`The ${field} field does not have an accepted form.`);
      continue;
    }
    errors[field] = [`The ${field} field must be one of: ${values.join(', ')}.`];
  }
  return errors;
}

export function toAppError(request: FastifyRequest, error: FastifyError | Error): AppError {
  if (isAppError(error)) return error;
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    const errors = fieldErrorsOf(fastifyError);
    if (request.url.startsWith(DB_API_PREFIX)) {
      const detail = Object.values(errors).flat().join(' ');
      return new AppError('bad_request', detail || 'Invalid request', { apiCode: 'INVALID_REQUEST' });
    }
    return new AppError('validation', 'The given data was invalid.', { errors });
  }
  const status = fastifyError.statusCode ?? 500;
  if (status === 413) {
    const limit = request.routeOptions.bodyLimit;
    return new AppError(
      'payload_too_large',
      limit
        ? `Request body is too large: the limit is ${limit} bytes (${formatBytes(limit)}).`
        : 'Request body is too large',
    );
  }
  if (status === 415) {
    const sent = request.headers['content-type']?.split(';')[0]?.trim();
    return new AppError(
      'unsupported_media_type',
      `Unsupported content type${sent ? ` '${sent}'` : ''}. Send one of: ${ACCEPTED_BODY_TYPES.join(', ')}.`,
    );
  }
  if (status === 400 || (status >= 400 && status < 500 && fastifyError.code?.startsWith('FST_ERR_CTP'))) {
    return new AppError('bad_request', `The request could not be parsed: ${fastifyError.message}`);
  }
  if (status === 404) return new AppError('not_found', 'Not found');
  if (status === 429) return new AppError('rate_limited', fastifyError.message);
  return new AppError('internal', 'Internal server error', { cause: error });
}

export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const appError = toAppError(request, error);
    if (appError.status >= 500) {
      request.log.error({ err: error }, 'request failed');
    }
    return sendError(request, reply, appError);
  });
}
