// The local artifact store's signed URLs (docs/security.md, "Signed artifact URLs"): another host, a
// second Berth or a pod GETs an uploaded source by the URL the store signed, with no other credential.
// The signature is over the key and the expiry; the route answers one artifact, never a listing.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../deps.js';
import { AppError, validationError } from '../../domain/errors.js';
import { platformErrors } from '../schemas/errors.js';
import { fileResponse } from '../schemas/common.js';

const SignedQuery = Type.Object({
  expires: Type.String({ pattern: '^[0-9]{1,12}$', description: 'Unix time (seconds) the URL ends at' }),
  signature: Type.String({
    pattern: '^[0-9a-f]{64}$',
    description: 'Hex HMAC-SHA256 of the key and expires',
  }),
});

export function registerArtifactRoutes(app: FastifyInstance, deps: Pick<RouteDeps, 'services'>): void {
  app.get<{ Params: { '*': string }; Querystring: Static<typeof SignedQuery> }>(
    '/internal/artifacts/*',
    {
      // The signature in the query is the credential: whoever holds the URL may GET it until it ends.
      config: { auth: 'none', produces: ['application/octet-stream'] },
      schema: {
        tags: ['system'],
        summary:
          'An artifact (an uploaded source) by the short-lived URL Berth signed for it; 403 when the signature is wrong or expired',
        querystring: SignedQuery,
        response: {
          200: fileResponse(['application/octet-stream'], 'The artifact'),
          ...platformErrors(403, 404, 422),
        },
      },
    },
    async (request, reply) => {
      const key = request.params['*'];
      const store = deps.services.artifacts;
      if (!store.openSigned) throw new AppError('not_found', 'This artifact store does not serve URLs here');
      const read = await store.openSigned(key, request.query);
      switch (read.status) {
        case 'invalid_key':
          throw validationError({ key: [read.problem] }, 'The artifact key is invalid.');
        case 'forbidden':
          throw new AppError(
            'forbidden',
            read.reason === 'expired'
              ? 'This artifact URL has expired; ask for a new one'
              : 'The signature does not match this artifact URL',
          );
        case 'not_found':
          throw new AppError('not_found', `Artifact ${key} not found`);
        case 'ok':
          return reply
            .type('application/octet-stream')
            .header('content-length', String(read.info.size))
            .header('cache-control', 'private, no-store')
            .send(read.body);
      }
    },
  );
}
