// One object storage of a team with what its users need to connect: endpoint, buckets and each user's
// access key. Secret keys are shown to team owners only; members see null. (The team's list of object
// storages with their states, without credentials, is GET /api/v1/teams/:team/object-storage.)
// Also the panel's action for a pending zone change.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import { principalOf } from '../../types.js';
import { platformErrors } from '../../schemas/errors.js';
import { DeletedObjectStorageResponse, ObjectStorageResponse } from '../../schemas/infrastructure.js';

const StorageRef = Type.Object({
  team: Type.String({ minLength: 1, maxLength: 100 }),
  storage: Type.String({ minLength: 1, maxLength: 200 }),
});

const BucketRef = Type.Object({
  team: Type.String({ minLength: 1, maxLength: 100 }),
  storage: Type.String({ minLength: 1, maxLength: 200 }),
  bucket: Type.String({ minLength: 3, maxLength: 63, pattern: '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$' }),
});
const BucketAclBody = Type.Object(
  { acl: Type.Union([Type.Literal('private'), Type.Literal('public-read')]) },
  { additionalProperties: false },
);

const tags = ['object-storage'];
const security = [{ bearer: [] }];

export function registerObjectStorageRoutes(app: FastifyInstance, deps: RouteDeps): void {
  // Reading is any member's (secret keys for owners only); deleting and zone changes are owners'.
  const config = { auth: 'api_token' as const, role: 'member' as const };
  const owner = { auth: 'api_token' as const, role: 'owner' as const };

  app.get<{ Params: Static<typeof StorageRef> }>(
    '/api/v1/teams/:team/object-storage/:storage',
    {
      config,
      schema: {
        tags,
        security,
        summary:
          'One object storage (by uuid or name): endpoint, buckets, access keys (secret keys for owners only)',
        params: StorageRef,
        response: { 200: ObjectStorageResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const team = await deps.identity.requireTeam(principalOf(request).userId, request.params.team);
      const [storage] = await deps.services.objectStorage.view(team, request.params.storage);
      return { data: storage };
    },
  );

  app.delete<{ Params: Static<typeof StorageRef> }>(
    '/api/v1/teams/:team/object-storage/:storage',
    {
      config: { ...owner, audit: 'object_storage.delete' },
      schema: {
        tags,
        security,
        params: StorageRef,
        summary: 'Delete an object storage (owners): its buckets, objects and keys go; apply never deletes',
        response: { 200: DeletedObjectStorageResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { userId } = principalOf(request);
      const team = await deps.identity.requireTeam(userId, request.params.team);
      const removed = await deps.services.objectStorage.remove(team, request.params.storage, userId);
      return { data: { ...removed, deleted: true } };
    },
  );

  app.post<{ Params: Static<typeof StorageRef> }>(
    '/api/v1/teams/:team/object-storage/:storage/apply-pending-change',
    {
      config: { ...owner, audit: 'object_storage.apply_pending_change' },
      schema: {
        tags,
        security,
        params: StorageRef,
        summary:
          'Carry out the zone change that apply reported as needing action in the panel (409 without one)',
        response: { 200: ObjectStorageResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request) => {
      const { userId } = principalOf(request);
      const team = await deps.identity.requireTeam(userId, request.params.team);
      await deps.services.objectStorage.applyPendingChange(team, request.params.storage, userId);
      const [storage] = await deps.services.objectStorage.view(team, request.params.storage);
      return { data: storage };
    },
  );

  app.put<{ Params: Static<typeof BucketRef>; Body: Static<typeof BucketAclBody> }>(
    '/api/v1/teams/:team/object-storage/:storage/buckets/:bucket/acl',
    {
      config: { ...owner, audit: 'object_storage.bucket_acl' },
      schema: {
        tags,
        security,
        params: BucketRef,
        body: BucketAclBody,
        summary:
          "Make a bucket public-read or private (owners), as a document's {name, acl} would; export writes it so",
        response: { 200: ObjectStorageResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { userId } = principalOf(request);
      const team = await deps.identity.requireTeam(userId, request.params.team);
      const { storage, bucket } = request.params;
      await deps.services.objectStorage.setBucketAcl(team, storage, bucket, request.body.acl, userId);
      const [view] = await deps.services.objectStorage.view(team, storage);
      return { data: view };
    },
  );
}
