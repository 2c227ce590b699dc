// The client's plan as a diff: from the structured resource_changes of the apply answer, and (an
// older server's answer without it) from structured_changes and the change lines, with the same text.
import { describe, expect, it } from 'vitest';
import { countPlan, renderPlan, type ApplyResponse } from '../../src/cli/client/commands/apply.js';
import type { Painter } from '../../src/cli/client/output.js';

const plain = Object.assign((_style: string, text: string) => text, { enabled: false }) as Painter;

/** A dry run's answer as a server before resource_changes gave it (the lines are the server's own). */
const older: ApplyResponse = {
  success: true,
  application_id: 1,
  application_name: 'shop',
  team: 'acme',
  dry_run: true,
  changes: [
    "[DRY RUN] Would update application 'shop' (replicas, memory)",
    "[DRY RUN] Would update secret 'APP_KEY'",
    "[DRY RUN] Would update service 'cache' (valkey) (memory)",
    "[DRY RUN] Would record the plan change from '1x1xCPU-2GB-25GB' to '1x2xCPU-4GB-50GB' of managed database 'main-db'; it needs action in the panel and would not be applied",
  ],
  structured_changes: {
    application: { action: 'updated', name: 'shop' },
    domains: [{ action: 'unchanged', domain: 'shop.example.com' }],
    secrets: [{ action: 'updated', key: 'APP_KEY' }],
    volumes: [],
    services: [{ action: 'updated', name: 'cache', type: 'valkey' }],
    container_services: [],
    managed_databases: [{ action: 'needs_action', name: 'main-db', type: 'pg' }],
    object_storage: [],
  },
  needs_deployment: true,
  auto_deploy_enabled: true,
  deployment_id: null,
};

describe('the plan as a diff', () => {
  it('reads the fields that change from resource_changes', () => {
    const current: ApplyResponse = {
      ...older,
      // Lines that say something else: the structured field is what counts.
      changes: [],
      resource_changes: [
        {
          resource: 'application',
          name: 'shop',
          type: 'nodejs',
          action: 'updated',
          fields: ['settings.replicas', 'repository.branch'],
          pending: [],
        },
        {
          resource: 'domain',
          name: 'shop.example.com',
          type: null,
          action: 'unchanged',
          fields: [],
          pending: [],
        },
        {
          resource: 'secret',
          name: 'APP_KEY',
          type: null,
          action: 'updated',
          fields: ['value'],
          pending: [],
        },
        {
          resource: 'service',
          name: 'cache',
          type: 'valkey',
          action: 'updated',
          fields: ['memory'],
          pending: [],
        },
        {
          resource: 'managed_database',
          name: 'main-db',
          type: 'pg',
          action: 'needs_action',
          fields: ['users'],
          pending: [{ field: 'plan', from: '1x1xCPU-2GB-25GB', to: '1x2xCPU-4GB-50GB' }],
        },
      ],
    };
    expect(renderPlan(current, plain)).toBe(
      [
        'Application',
        '  ~ shop: settings.replicas, repository.branch',
        'Domains',
        '  = 1 unchanged',
        'Secrets',
        '  ~ APP_KEY: value',
        'Services',
        '  ~ cache (valkey): memory',
        'Managed databases',
        '  ! main-db (pg): users, plan 1x1xCPU-2GB-25GB → 1x2xCPU-4GB-50GB — needs action in the panel',
        '',
        'Plan: 0 to create, 3 to update, 1 needs action in the panel, 1 unchanged.',
      ].join('\n'),
    );
    expect(countPlan(current)).toEqual({ created: 0, updated: 3, unchanged: 1, needs_action: 1 });
  });

  it('falls back to the change lines when the server sends no resource_changes', () => {
    expect(renderPlan(older, plain)).toBe(
      [
        'Application',
        '  ~ shop: replicas, memory',
        'Domains',
        '  = 1 unchanged',
        'Secrets',
        '  ~ APP_KEY',
        'Services',
        '  ~ cache (valkey): memory',
        'Managed databases',
        '  ! main-db (pg): plan 1x1xCPU-2GB-25GB → 1x2xCPU-4GB-50GB — needs action in the panel',
        '',
        'Plan: 0 to create, 3 to update, 1 needs action in the panel, 1 unchanged.',
      ].join('\n'),
    );
    expect(countPlan(older)).toEqual({ created: 0, updated: 3, unchanged: 1, needs_action: 1 });
  });
});
