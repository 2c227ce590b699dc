// Tables of team webhooks and push to deploy (issue 31, items 4 and 5).
import type { Generated } from 'kysely';

export interface WebhooksTable {
  id: Generated<number>;
  team_id: number;
  url: string;
  /** JSON: string[] of event names, or ["*"]. */
  events: string;
  /** The signing secret, sealed by the secret box; shown once, at registration. */
  secret_encrypted: string;
  created_by: number | null;
  created_at: string;
}

/** `pending` until an attempt is answered 2xx (`delivered`) or the last attempt fails (`failed`). */
export type WebhookDeliveryState = 'pending' | 'delivered' | 'failed';

export interface WebhookDeliveriesTable {
  id: Generated<number>;
  webhook_id: number;
  /** X-Berth-Delivery: the same on every attempt of this delivery. */
  uuid: string;
  /** The event's id (`id` in the body): the same for every endpoint it goes to. */
  event_id: string;
  event: string;
  /** The exact JSON body sent on every attempt. */
  body: string;
  state: WebhookDeliveryState;
  attempts: number;
  created_at: string;
  updated_at: string;
}

export interface WebhookAttemptsTable {
  id: Generated<number>;
  delivery_id: number;
  attempt: number;
  /** The endpoint's answer; null when none came (refused address, timeout, connection error). */
  status_code: number | null;
  error: string | null;
  /** The first bytes of the answer's body, as text. */
  response_excerpt: string | null;
  duration_ms: number;
  at: string;
}

/** Column added to `applications`: the push-to-deploy secret, sealed; made on first read. */
export interface ApplicationGitWebhook {
  git_webhook_secret: string | null;
}

export interface WebhookTables {
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  applications: ApplicationGitWebhook;
}
