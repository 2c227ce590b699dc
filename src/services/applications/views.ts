// How a deployment is answered over the API (Ploi's fields, plus the step, commit and duration).
import type { DeploymentRecord } from '../../db/repositories/deployments.js';

export function deploymentView(row: DeploymentRecord) {
  const duration =
    row.started_at && row.finished_at
      ? Math.round((new Date(row.finished_at).getTime() - new Date(row.started_at).getTime()) / 1000)
      : null;
  return {
    id: row.id,
    application_id: row.application_id,
    status: row.status,
    step: row.step,
    reason: row.reason,
    source: row.source,
    branch: row.branch,
    commit_sha: row.commit_sha,
    skip_build: row.skip_build === 1,
    rollback_of: row.rollback_of,
    release: row.release,
    error: row.error,
    started_at: row.started_at,
    finished_at: row.finished_at,
    duration_seconds: duration,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
