// Push to deploy (issue 31, item 5): GitHub, GitLab and Gitea push events at
// POST /api/v1/applications/{id}/git-webhook, with no Berth credential: the request is authenticated by
// the application's own secret (sealed at rest, made when an owner first reads it), compared in constant
// time. A push to the application's branch deploys it the way POST …/deploy does; nothing of the request
// (its ref, its commit) reaches git or a command: the deployment fetches the application's own branch.
import { createHmac } from 'node:crypto';
import type { Kysely } from 'kysely';
import { constantTimeEqual, type SecretBox } from '../../crypto/secret-box.js';
import { createWebhookRepository } from '../../db/repositories/webhooks.js';
import { applicationState, createInfrastructureRepository } from '../../db/repositories/infrastructure.js';
import type { Database } from '../../db/schema/index.js';
import type { IdGenerator } from '../../domain/clock.js';
import { AppError } from '../../domain/errors.js';
import { auditChange } from '../audit.js';
import type { InfrastructureQueries } from '../infrastructure/queries.js';
import type { RuntimeService } from './runtime.js';

/** Largest push event read (GitHub caps its payloads at 25 MB, but lists at most 20 commits in a push). */
export const PUSH_BODY_LIMIT_BYTES = 1024 * 1024;

export interface PushToDeployDeps {
  db: Kysely<Database>;
  secretBox: SecretBox;
  ids: IdGenerator;
  publicUrl: string;
  queries: Pick<InfrastructureQueries, 'requireApplication'>;
  applications: () => Pick<RuntimeService, 'deployPushed'>;
}

/** What the headers say: which forge sent it, the event, and the signature to check. */
interface Delivery {
  forge: 'github' | 'gitlab' | 'gitea';
  event: string;
  check: (secret: string, body: Buffer) => boolean;
}

const hmacHex = (secret: string, body: Buffer) => createHmac('sha256', secret).update(body).digest('hex');

function headerOf(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The forge and its signature from the headers; undefined when none is signed. */
function deliveryOf(headers: Record<string, string | string[] | undefined>): Delivery | undefined {
  // Gitea also sends GitHub's headers; its own come first.
  const gitea = headerOf(headers, 'x-gitea-signature');
  if (gitea !== undefined)
    return {
      forge: 'gitea',
      event: headerOf(headers, 'x-gitea-event') ?? '',
      check: (secret, body) => constantTimeEqual(gitea.trim().toLowerCase(), hmacHex(secret, body)),
    };
  const github = headerOf(headers, 'x-hub-signature-256');
  if (github !== undefined)
    return {
      forge: 'github',
      event: headerOf(headers, 'x-github-event') ?? '',
      check: (secret, body) =>
        constantTimeEqual(github.trim().toLowerCase(), `sha256=${hmacHex(secret, body)}`),
    };
  const gitlab = headerOf(headers, 'x-gitlab-token');
  if (gitlab !== undefined)
    return {
      forge: 'gitlab',
      event: headerOf(headers, 'x-gitlab-event') ?? '',
      check: (secret) => constantTimeEqual(gitlab, secret),
    };
  return undefined;
}

/** The event's JSON: GitHub may also send it form-encoded (`payload=…`). */
function payloadOf(body: Buffer, contentType: string | undefined): Record<string, unknown> {
  let text = body.toString('utf8');
  if ((contentType ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded'))
    text = new URLSearchParams(text).get('payload') ?? '';
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed))
      return parsed as Record<string, unknown>;
  } catch {
    // answered below
  }
  throw new AppError('bad_request', 'The push event is not a JSON object');
}

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

export type PushAnswer =
  { status: 'pong' } | { status: 'ignored'; reason: string } | { status: 'deploying'; deployment_id: number };

export function createPushToDeploy(deps: PushToDeployDeps) {
  const repo = createWebhookRepository(deps.db);
  const urlOf = (appId: number) =>
    `${deps.publicUrl.replace(/\/+$/, '')}/api/v1/applications/${appId}/git-webhook`;

  return {
    /** The URL and secret an owner gives the forge; the secret is made on first read, or anew with `rotate`. */
    async view(userId: number, appId: number, options: { rotate?: boolean } = {}) {
      const { row } = await deps.queries.requireApplication(userId, appId);
      const stored = await repo.gitWebhookSecret(row.id);
      if (options.rotate) {
        await deps.db.transaction().execute(async (trx) => {
          await createWebhookRepository(trx).setGitWebhookSecret(
            row.id,
            deps.secretBox.encrypt(deps.ids.token(32)),
            false,
          );
          await auditChange(trx, {
            at: new Date(),
            action: 'git_webhook.rotate',
            teamId: row.team_id,
            target: { kind: 'application', id: row.id },
          });
        });
      } else if (stored === null) {
        // Two first reads at once agree: only the first write lands, both read it back.
        await repo.setGitWebhookSecret(row.id, deps.secretBox.encrypt(deps.ids.token(32)), true);
      }
      const sealed = await repo.gitWebhookSecret(row.id);
      if (!sealed) throw new AppError('not_found', `Application ${appId} not found`);
      return { url: urlOf(row.id), secret: deps.secretBox.decrypt(sealed) };
    },

    /** One request from a forge: 401 unless signed with the application's secret. */
    async receive(
      idText: string,
      headers: Record<string, string | string[] | undefined>,
      body: Buffer,
    ): Promise<PushAnswer> {
      const unsigned = new AppError(
        'unauthenticated',
        'The request is not signed with this application’s git webhook secret (X-Hub-Signature-256, X-Gitlab-Token or X-Gitea-Signature)',
      );
      const appId = /^[1-9]\d{0,15}$/.test(idText) ? Number(idText) : undefined;
      const sealed = appId === undefined ? undefined : await repo.gitWebhookSecret(appId);
      // An unknown application and one whose secret was never read look alike: nothing can sign for either.
      const delivery = deliveryOf(headers);
      if (appId === undefined || !sealed || !delivery) throw unsigned;
      if (!delivery.check(deps.secretBox.decrypt(sealed), body)) throw unsigned;

      const event = delivery.event.toLowerCase();
      if (event === 'ping') return { status: 'pong' };
      if (event !== 'push' && event !== 'push hook')
        return {
          status: 'ignored',
          reason: `the ${delivery.forge} event '${delivery.event.slice(0, 100)}' is not a push`,
        };
      const payload = payloadOf(body, headerOf(headers, 'content-type'));
      const ref = text(payload.ref) ?? '';
      if (!ref.startsWith('refs/heads/'))
        return {
          status: 'ignored',
          reason: `the push is to ${JSON.stringify(ref.slice(0, 200))}, not a branch`,
        };
      const pushed = ref.slice('refs/heads/'.length);
      const after = text(payload.after) ?? '';
      if (payload.deleted === true || /^0{40}$/.test(after))
        return {
          status: 'ignored',
          reason: `the push deletes branch ${JSON.stringify(pushed.slice(0, 200))}`,
        };

      const row = await createInfrastructureRepository(deps.db).findApplication(appId);
      if (!row) throw unsigned;
      const app = applicationState(row);
      if (!app.repository.url && !(app.repository.owner && app.repository.name))
        return {
          status: 'ignored',
          reason: 'the application names no repository (it deploys uploaded sources)',
        };
      // The application's branch; without one, the repository's default branch, as the forge names it.
      const repository = (payload.repository ?? payload.project) as Record<string, unknown> | undefined;
      const branch = app.repository.branch ?? text(repository?.default_branch);
      if (branch === undefined)
        return {
          status: 'ignored',
          reason: 'the application names no branch and the event no default branch',
        };
      if (pushed !== branch)
        return {
          status: 'ignored',
          reason: `the push is to branch ${JSON.stringify(pushed.slice(0, 200))}; the application deploys ${JSON.stringify(branch)}`,
        };
      const deployment = await deps.applications().deployPushed(row.id, `git push (${delivery.forge})`);
      return { status: 'deploying', deployment_id: deployment.id };
    },
  };
}

export type PushToDeploy = ReturnType<typeof createPushToDeploy>;
