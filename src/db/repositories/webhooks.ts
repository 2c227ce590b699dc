// The SQL of team webhooks (src/services/webhooks/): endpoints, their deliveries and each attempt, and
// applications' push-to-deploy secrets.
import type { Insertable, Kysely, Selectable, Transaction } from 'kysely';
import type { Database } from '../schema/index.js';
import type {
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
  WebhookDeliveryState,
  WebhooksTable,
} from '../schema/webhooks.js';

type Db = Kysely<Database> | Transaction<Database>;

export type WebhookRow = Selectable<WebhooksTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;

export function createWebhookRepository(db: Db) {
  return {
    async insert(values: Insertable<WebhooksTable>): Promise<number> {
      const row = await db.insertInto('webhooks').values(values).returning('id').executeTakeFirstOrThrow();
      return row.id;
    },

    find: (teamId: number, id: number): Promise<WebhookRow | undefined> =>
      db
        .selectFrom('webhooks')
        .selectAll()
        .where('team_id', '=', teamId)
        .where('id', '=', id)
        .executeTakeFirst(),

    findById: (id: number): Promise<WebhookRow | undefined> =>
      db.selectFrom('webhooks').selectAll().where('id', '=', id).executeTakeFirst(),

    listForTeam: (teamId: number): Promise<WebhookRow[]> =>
      db.selectFrom('webhooks').selectAll().where('team_id', '=', teamId).orderBy('id').execute(),

    async count(teamId: number): Promise<number> {
      const row = await db
        .selectFrom('webhooks')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('team_id', '=', teamId)
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },

    async remove(teamId: number, id: number): Promise<boolean> {
      const result = await db
        .deleteFrom('webhooks')
        .where('team_id', '=', teamId)
        .where('id', '=', id)
        .executeTakeFirst();
      return Number(result.numDeletedRows) > 0;
    },

    async insertDelivery(values: Insertable<WebhookDeliveriesTable>): Promise<number> {
      const row = await db
        .insertInto('webhook_deliveries')
        .values(values)
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    },

    findDelivery: (id: number): Promise<WebhookDeliveryRow | undefined> =>
      db.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).executeTakeFirst(),

    /** A webhook's deliveries, newest first. */
    deliveries: (webhookId: number, limit: number): Promise<WebhookDeliveryRow[]> =>
      db
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('webhook_id', '=', webhookId)
        .orderBy('id', 'desc')
        .limit(limit)
        .execute(),

    attemptsOf: (deliveryIds: number[]): Promise<WebhookAttemptRow[]> =>
      deliveryIds.length === 0
        ? Promise.resolve([])
        : db
            .selectFrom('webhook_attempts')
            .selectAll()
            .where('delivery_id', 'in', deliveryIds)
            .orderBy('id')
            .execute(),

    /** Records one attempt and the delivery's state after it, together. */
    async recordAttempt(
      deliveryId: number,
      attempt: Omit<Insertable<WebhookAttemptsTable>, 'delivery_id'>,
      state: WebhookDeliveryState,
    ): Promise<void> {
      await db
        .insertInto('webhook_attempts')
        .values({ ...attempt, delivery_id: deliveryId })
        .execute();
      await db
        .updateTable('webhook_deliveries')
        .set({ state, attempts: attempt.attempt, updated_at: attempt.at })
        .where('id', '=', deliveryId)
        .execute();
    },

    /** Drops deliveries (and their attempts) older than `before`, of one team's webhooks. */
    async pruneDeliveries(webhookIds: number[], before: string): Promise<void> {
      if (webhookIds.length === 0) return;
      await db
        .deleteFrom('webhook_deliveries')
        .where('webhook_id', 'in', webhookIds)
        .where('created_at', '<', before)
        .execute();
    },

    async gitWebhookSecret(appId: number): Promise<string | null | undefined> {
      const row = await db
        .selectFrom('applications')
        .select('git_webhook_secret')
        .where('id', '=', appId)
        .executeTakeFirst();
      return row === undefined ? undefined : row.git_webhook_secret;
    },

    /** Sets the secret; with `onlyIfUnset`, only when none is stored yet (two first reads agree). */
    async setGitWebhookSecret(appId: number, sealed: string, onlyIfUnset: boolean): Promise<void> {
      let query = db.updateTable('applications').set({ git_webhook_secret: sealed }).where('id', '=', appId);
      if (onlyIfUnset) query = query.where('git_webhook_secret', 'is', null);
      await query.execute();
    },
  };
}
