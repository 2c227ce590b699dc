// One place where every request's names are checked for control characters before schema
// validation and before any route reads the store (issue 11, item 8): a path parameter holding one
// names nothing that exists (404); a query or JSON body field holding one is a 422 at its path.
//
// Only plain JSON values are walked (issue 24): a streamed route's body is the request stream, whose
// object graph (socket, server, every connection) a walk never finished, until the heap ran out.
import type { FastifyInstance } from 'fastify';
import {
  NAME_CONTROL,
  TooManyValuesError,
  controlCharacterErrors,
  isPlainJsonContainer,
} from '../../domain/control-characters.js';
import { AppError, validationError } from '../../domain/errors.js';

export function registerInputGuard(app: FastifyInstance): void {
  app.addHook('preValidation', (request, _reply, done) => {
    const params = (request.params ?? {}) as Record<string, unknown>;
    if (Object.values(params).some((v) => typeof v === 'string' && NAME_CONTROL.test(v))) {
      done(new AppError('not_found', 'Not found'));
      return;
    }
    try {
      const errors = {
        // Copied: Fastify's parsed query has a prototype of its own, and only plain objects are walked.
        ...controlCharacterErrors({ ...(request.query ?? {}) }, 'querystring'),
        // Strings (YAML text) are read by their route, which checks what it parsed the same way;
        // streams and buffers (uploads) are the route's to read.
        ...(isPlainJsonContainer(request.body) ? controlCharacterErrors(request.body, '') : {}),
      };
      done(
        Object.keys(errors).length > 0 ? validationError(errors, 'The given data was invalid.') : undefined,
      );
    } catch (error) {
      if (!(error instanceof TooManyValuesError)) throw error;
      done(new AppError('payload_too_large', error.message));
    }
  });
}
