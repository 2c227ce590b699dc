// Answers of the running-application routes (src/http/routes/platform/runtime.ts): deployments, status,
// instances, logs, one-off commands, source upload, and deleting an application.
import { Type } from 'typebox';
import { DEPLOYMENT_STATUSES } from '../../domain/deployments.js';
import { Data, Nullable, OneOf, Timestamp } from './common.js';

const ApplicationStatus = OneOf([
  'starting',
  'active',
  'deploying',
  'stopping',
  'stopped',
  'destroying',
  'failed',
]);

/** services/applications/views.ts, deploymentView. */
export const Deployment = Type.Object({
  id: Type.Integer(),
  application_id: Type.Integer(),
  status: OneOf(DEPLOYMENT_STATUSES),
  step: Nullable(OneOf(['fetch', 'build', 'release', 'rollout'])),
  reason: Type.String({ description: '`apply`, `deploy`, `rollback`, `source upload`' }),
  source: Nullable(Type.String({ description: '`git`, `archive` or `bundled` once fetched' })),
  branch: Nullable(Type.String()),
  commit_sha: Nullable(Type.String()),
  skip_build: Type.Boolean(),
  rollback_of: Nullable(Type.Integer()),
  release: Nullable(Type.String()),
  error: Nullable(Type.String()),
  started_at: Nullable(Timestamp),
  finished_at: Nullable(Timestamp),
  duration_seconds: Nullable(Type.Integer()),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const DeploymentResponse = Data(Deployment, 'The deployment');

export const DeploymentsResponse = Type.Object(
  {
    data: Type.Array(Deployment),
    meta: Type.Object({
      current_page: Type.Integer(),
      per_page: Type.Integer(),
      total: Type.Integer(),
      last_page: Type.Integer(),
    }),
  },
  { description: 'Deployments, newest first' },
);

export const DeletedApplicationResponse = Data(
  Type.Object({ id: Type.Integer(), name: Type.String(), status: Type.Literal('destroying') }),
  'Accepted: the deletion runs as a job',
);

export const StatusResponse = Data(
  Type.Object({
    id: Type.Integer(),
    name: Type.String(),
    status: ApplicationStatus,
    status_reason: Nullable(Type.String()),
    suspended: Type.Boolean(),
    live_deployment_id: Nullable(Type.Integer()),
    release: Nullable(Type.String({ description: 'The release the edge routes to' })),
    replicas: Type.Object({ desired: Type.Integer(), running: Type.Integer(), total: Type.Integer() }),
    health_check: Type.Object({
      enabled: Type.Boolean(),
      status: OneOf(['not monitored', 'unknown', 'healthy', 'unhealthy']),
    }),
    hostnames: Type.Array(Type.String()),
    latest_deployment: Nullable(Deployment),
    recent_events: Type.Array(
      Type.Object({
        id: Type.Integer(),
        at: Timestamp,
        kind: Type.String(),
        instance: Type.String(),
        message: Type.String(),
      }),
    ),
  }),
  'Status, replicas, health and the latest deployment',
);

export const InstancesResponse = Data(
  Type.Array(
    Type.Object({
      name: Type.String({ description: '`web-<deployment>-<n>`, or `scheduler`' }),
      release: Type.String(),
      state: OneOf(['starting', 'running', 'unhealthy', 'restarting', 'stopping', 'crashed', 'idle']),
      pid: Nullable(Type.Integer()),
      port: Nullable(Type.Integer()),
      started_at: Nullable(Timestamp),
      restarts: Type.Integer(),
      last_restart_reason: Nullable(Type.String()),
      healthy: Nullable(Type.Boolean({ description: 'null when health checks are disabled' })),
      memory_limit_bytes: Type.Integer(),
    }),
  ),
  'Running instances',
);

export const DeploymentLogResponse = Data(
  Type.Array(Type.Object({ at: Timestamp, line: Type.String() })),
  "The deployment's log, oldest first",
);

export const LogsResponse = Data(
  Type.Array(
    Type.Object({
      at: Timestamp,
      source: Type.String({ description: '`web-12-0`, `scheduler`, `exec`, …' }),
      stream: OneOf(['stdout', 'stderr', 'system']),
      line: Type.String(),
    }),
  ),
  'The newest lines of the processes, oldest first',
);

/** follow=true: `event: line` with a JSON line per event, then (deployment logs) `event: end`. */
export const EventStream = Type.String({
  description:
    'Server-sent events: `event: line` with one JSON line each; a deployment log ends with `event: end`',
});

export const ExecResponse = Data(
  Type.Object({
    id: Type.Integer(),
    command: Type.String(),
    exit_code: Nullable(Type.Integer()),
    output: Type.String(),
    truncated: Type.Boolean({ description: 'true when the output was cut at the limit' }),
  }),
  "The command's exit code and output",
);

export const CommandHistoryResponse = Data(
  Type.Array(
    Type.Object({
      id: Type.Integer(),
      command: Type.String(),
      status: OneOf(['running', 'finished', 'failed']),
      exit_code: Nullable(Type.Integer()),
      output: Type.String(),
      user_id: Nullable(Type.Integer()),
      started_at: Timestamp,
      finished_at: Nullable(Timestamp),
    }),
  ),
  'One-off commands, newest first',
);

const Upload = Type.Object({
  size: Type.Integer({ description: 'Bytes received' }),
  uploaded_at: Timestamp,
  deployment: Nullable(Deployment),
});

export const UploadStoredResponse = Data(Upload, 'Stored, not deployed (deploy=false)');
export const UploadDeployingResponse = Data(Upload, 'Stored, and its deployment requested');
