// The response check (buildApp's `checkResponses`, on in the test suite): every JSON answer of a route
// that documents a response schema for its status (exact, `2xx`-style group, or `default`) is
// validated against it, so the OpenAPI document cannot drift from what the routes send. A mismatch
// replaces the answer with a 500 naming the route, the status and the first problems (also written to
// stderr), so whatever test made the call fails. Files, YAML, server-sent events and hijacked replies are not JSON and are
// not checked (they are documented by their content type only).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Compile, type Validator, type XSchema } from 'typebox/schema';
import { AppError } from '../../domain/errors.js';

/** How many problems a mismatch names. */
const SHOWN = 5;

interface ContentMap {
  content: Record<string, { schema: XSchema }>;
}

const isContentMap = (schema: unknown): schema is ContentMap =>
  typeof schema === 'object' && schema !== null && 'content' in schema;

/** application/json and the `+json` types (application/schema+json, application/problem+json). */
const isJson = (mediaType: string) => mediaType === 'application/json' || mediaType.endsWith('+json');

/** The documented schema of a status: exact, then its group (`2xx`, either case), then `default`. */
export function responseSchemaFor(responses: Record<string, unknown>, status: number): unknown {
  const group = `${String(status)[0]}xx`;
  return responses[String(status)] ?? responses[group] ?? responses[group.toUpperCase()] ?? responses.default;
}

export function registerResponseCheck(app: FastifyInstance): void {
  const validators = new WeakMap<object, Validator>();
  const validatorOf = (schema: XSchema): Validator => {
    if (typeof schema !== 'object') return Compile(schema);
    let validator = validators.get(schema);
    if (!validator) {
      validator = Compile(schema);
      validators.set(schema, validator);
    }
    return validator;
  };

  app.addHook('onSend', (request: FastifyRequest, reply: FastifyReply, payload: unknown, done) => {
    try {
      check(request, reply, payload);
      done(null, payload);
    } catch (error) {
      done(error as Error);
    }
  });

  function check(request: FastifyRequest, reply: FastifyReply, payload: unknown): void {
    const responses = request.routeOptions.schema?.response as Record<string, unknown> | undefined;
    if (!responses) return;
    const status = reply.statusCode;
    const documented = responseSchemaFor(responses, status);
    if (documented === undefined) return;
    const contentType = reply.getHeader('content-type');
    const mediaType = (typeof contentType === 'string' ? contentType : '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    if (!isJson(mediaType)) return;
    const route = `${request.method} ${request.routeOptions.url ?? request.url}`;
    let schema: XSchema;
    if (isContentMap(documented)) {
      const entry = documented.content[mediaType] ?? documented.content['*/*'];
      if (!entry) {
        throw mismatch(
          `${route} answered ${status} with ${mediaType}, but its schema for ${status} lists only ${Object.keys(documented.content).join(', ')}`,
        );
      }
      schema = entry.schema;
    } else {
      schema = documented as XSchema;
    }
    if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return; // a stream: not read here
    const text = payload.toString();
    if (text === '') return;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw mismatch(`${route} answered ${status} with ${mediaType} that is not JSON`);
    }
    const validator = validatorOf(schema);
    if (validator.Check(value)) return;
    const [, errors] = validator.Errors(value);
    const problems = errors
      .slice(0, SHOWN)
      .map((e) => `${e.instancePath || '/'} ${e.message}`)
      .join('; ');
    throw mismatch(`${route} answered ${status} with a body its response schema does not allow: ${problems}`);
  }
}

/** The 500 that replaces the answer; also on stderr, where the test runner shows it next to the test. */
function mismatch(detail: string): AppError {
  const message = `Response check failed: ${detail}`;
  process.stderr.write(`${message}\n`);
  return new AppError('internal', message);
}
