// The events a team's webhooks can ask for (POST /api/v1/teams/{team}/webhooks): the service sends
// them (src/services/webhooks/), the answers' schema names them, and the dashboard checks its list
// against that schema's type.
export const WEBHOOK_EVENTS = [
  'deployment.started',
  'deployment.succeeded',
  'deployment.failed',
  'application.suspended',
  'application.deleted',
  'deletion.warning',
  'database.operation.finished',
] as const;

export type WebhookEventName = (typeof WEBHOOK_EVENTS)[number];
