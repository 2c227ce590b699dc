// `berth admin audit`: the operator's view of the audit log, every team's entries and the account-level
// ones (issue 31, item 2). Filters as the API's; a table for a person, JSON with --json.
import type { Services } from '../composition.js';

type OperatorAuditQuery = Parameters<Services['audit']['all']>[0];
type AuditEntryView = Awaited<ReturnType<Services['audit']['all']>>[number];

const ACTION = /^[a-z0-9_.]+\*?$/;

/** The query the flags ask for, or a message naming the flag that is wrong. */
export function auditQueryOf(values: Record<string, unknown>): OperatorAuditQuery | string {
  const text = (name: string): string | undefined =>
    typeof values[name] === 'string' ? values[name] : undefined;
  const time = (name: string): string | undefined | Error => {
    const value = text(name);
    if (value === undefined) return undefined;
    const parsed = new Date(value);
    return Number.isNaN(parsed.getTime())
      ? new Error(`--${name} must be a time (ISO 8601, e.g. 2026-01-31 or 2026-01-31T12:00:00Z)`)
      : parsed.toISOString();
  };
  const action = text('action');
  if (action !== undefined && !ACTION.test(action))
    return '--action must be an action (application.deploy) or a prefix ending in * (application.*)';
  const since = time('since');
  const until = time('until');
  if (since instanceof Error) return since.message;
  if (until instanceof Error) return until.message;
  const limitText = text('limit') ?? '100';
  if (!/^\d{1,5}$/.test(limitText) || Number(limitText) < 1)
    return '--limit must be a whole number from 1 to 99999';
  const team = text('team');
  const actor = text('actor');
  return {
    limit: Number(limitText),
    ...(team !== undefined ? { team } : {}),
    ...(action !== undefined ? { action } : {}),
    ...(actor !== undefined ? { actor } : {}),
    ...(since !== undefined ? { since } : {}),
    ...(until !== undefined ? { until } : {}),
  };
}

/** One line per entry, newest first: time, team, actor, action, target. */
export function formatAuditTable(entries: AuditEntryView[]): string {
  const rows = [
    ['AT', 'TEAM', 'ACTOR', 'CREDENTIAL', 'ACTION', 'TARGET'],
    ...entries.map((e) => [
      e.at,
      e.team_id === null ? '-' : String(e.team_id),
      e.actor ?? '-',
      e.credential ?? '-',
      e.action,
      e.target.kind === null ? e.target.id : `${e.target.kind}:${e.target.id}`,
    ]),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return (
    rows
      .map((row) =>
        row
          .map((cell, i) => cell.padEnd(widths[i]!))
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}
