// One place where every request's names are checked for control characters before schema
// validation and before any route reads the store (issue 11, item 8): a path parameter holding one
// names nothing that exists (404); a query or JSON body field holding one is a 422 at its path.
import type { FastifyInstance } from 'fastify';
import { NAME_CONTROL, controlCharacterErrors } from '../../domain/control-characters.js';
import { AppError, validationError } from '../../domain/errors.js';

export function registerInputGuard(app: FastifyInstance): void {
  app.addHook('preValidation', (request, _reply, done) => {
    const params = (request.params ?? {}) as Record<string, unknown>;
    if (Object.values(params).some((v) => typeof v === 'string' && NAME_CONTROL.test(v))) {
      done(new AppError('not_found', 'Not found'));
      return;
    }
    const errors = {
      ...controlCharacterErrors(request.query ?? {}, 'querystring'),
      // Strings (YAML text) are read by their route, which checks what it parsed the same way.
      ...(typeof request.body === 'object' ? controlCharacterErrors(request.body, '') : {}),
    };
    done(Object.keys(errors).length > 0 ? validationError(errors, 'The given data was invalid.') : undefined);
  });
}
