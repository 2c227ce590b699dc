// Answers of team webhooks (/api/v1/teams/{team}/webhooks) and push to deploy
// (/api/v1/applications/{id}/git-webhook).
import { Type } from 'typebox';
import { WEBHOOK_EVENTS } from '../../domain/webhook-events.js';
import { Data, Nullable, OneOf, Timestamp } from './common.js';

/** An event a webhook asked for, or "*" for every event. */
const EventName = Type.Enum([...WEBHOOK_EVENTS, '*'] as const);

const Webhook = Type.Object({
  id: Type.Integer(),
  url: Type.String(),
  events: Type.Array(EventName, { description: 'Event names, or ["*"] for every event' }),
  created_at: Timestamp,
});

export const WebhookResponse = Data(Webhook, 'The webhook (never its secret)');
export const WebhooksResponse = Data(Type.Array(Webhook), "The team's webhooks (never their secrets)");

export const CreatedWebhookResponse = Data(
  Type.Object({
    ...Webhook.properties,
    secret: Type.String({
      description: 'The signing secret of X-Berth-Signature: shown this once, stored sealed',
    }),
  }),
  'The new webhook with its signing secret (shown this once)',
);

const Attempt = Type.Object({
  attempt: Type.Integer({ description: '1 for the first attempt' }),
  status_code: Nullable(Type.Integer({ description: "The endpoint's answer; null when none came" })),
  error: Nullable(Type.String({ description: 'Why the attempt failed; null when it was answered 2xx' })),
  response: Nullable(Type.String({ description: "The first 1000 characters of the endpoint's answer" })),
  duration_ms: Type.Integer(),
  at: Timestamp,
});

export const WebhookDeliveriesResponse = Data(
  Type.Array(
    Type.Object({
      id: Type.String({ description: 'X-Berth-Delivery: the same on every attempt' }),
      event_id: Type.String({
        description: '`id` in the body: the same for every webhook the event went to',
      }),
      event: Type.String(),
      state: OneOf(['pending', 'delivered', 'failed'], {
        description: 'pending: to be attempted again; failed: its last attempt failed',
      }),
      created_at: Timestamp,
      attempts: Type.Array(Attempt),
    }),
  ),
  "The webhook's deliveries, newest first, with every attempt and its answer",
);

export const GitWebhookResponse = Data(
  Type.Object({
    url: Type.String({ description: "Where the forge sends push events (the repository's webhook URL)" }),
    secret: Type.String({
      description:
        "The webhook's secret: GitHub's and Gitea's signing secret, GitLab's secret token (stored sealed)",
    }),
  }),
  'Push to deploy: the URL and secret to give GitHub, GitLab or Gitea',
);

export const PushAnswerResponse = Type.Object(
  {
    status: OneOf(['pong', 'ignored', 'deploying']),
    reason: Type.Optional(Type.String({ description: 'Why nothing was deployed (status ignored)' })),
    deployment_id: Type.Optional(Type.Integer({ description: 'The deployment started (status deploying)' })),
  },
  { description: 'What the push event did' },
);
