// Following a deployment until it ends: its build output streamed (server-sent events of its log),
// its step on a spinner when on a terminal, and the managed resources an apply started provisioning.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Deployment, TeamDatabase, TeamStorage } from './answers.js';
import { ApiError, events, type Api } from './http.js';
import { clean, err, spinner } from './output.js';

const ENDED = new Set(['success', 'failed', 'cancelled']);

export async function followDeployment(
  api: Api,
  appId: number,
  deploymentId: number,
  options: { timeoutMs?: number; quiet?: boolean } = {},
): Promise<Deployment> {
  const base = `/api/v1/applications/${appId}/deployments/${deploymentId}`;
  const progress = spinner(`Deployment ${deploymentId}: pending`);
  const deadline = Date.now() + (options.timeoutMs ?? 30 * 60_000);
  const controller = new AbortController();
  let current = await api.data<Deployment>('GET', base);
  // The step, on the spinner, while the log streams.
  const poller = (async () => {
    while (!controller.signal.aborted && !ENDED.has(current.status)) {
      await sleep(1000, undefined, { signal: controller.signal }).catch(() => undefined);
      if (controller.signal.aborted) break;
      current = await api.data<Deployment>('GET', base).catch(() => current);
      progress.update(
        `Deployment ${deploymentId}: ${current.status}${current.step ? ` (${current.step})` : ''}`,
      );
      if (Date.now() > deadline) controller.abort();
    }
  })();
  try {
    const response = await api.send('GET', `${base}/logs`, {
      query: { follow: true },
      accept: 'text/event-stream',
      signal: controller.signal,
    });
    for await (const event of events(response)) {
      if (event.event === 'line' && !options.quiet) {
        const { line } = event.data as { line: string };
        progress.log(`${err('dim', '│')} ${clean(line)}`);
      } else if (event.event === 'end') break;
    }
  } catch (error) {
    // A stream cut short (a proxy's timeout, an older server): poll until the deployment ends.
    if (error instanceof ApiError && error.status !== 0 && error.status < 500 && error.status !== 406)
      throw error;
  }
  while (!ENDED.has(current.status) && Date.now() < deadline) {
    current = await api.data<Deployment>('GET', base);
    if (!ENDED.has(current.status)) await sleep(1000);
  }
  controller.abort();
  await poller;
  current = await api.data<Deployment>('GET', base);
  const took = current.duration_seconds != null ? ` in ${current.duration_seconds}s` : '';
  if (current.status === 'success')
    progress.stop(`${err('green', '✓')} Deployment ${deploymentId} succeeded${took}`);
  else if (ENDED.has(current.status))
    progress.stop(
      `${err('red', '✗')} Deployment ${deploymentId} ${current.status}${current.step ? ` at ${current.step}` : ''}${took}${current.error ? `: ${clean(current.error)}` : ''}`,
    );
  else
    progress.stop(`${err('red', '✗')} Deployment ${deploymentId} still ${current.status} after the timeout`);
  return current;
}

/** Waits until the named managed databases and object storages of a team have left `pending`. */
export async function followProvisioning(
  api: Api,
  team: string,
  databases: string[],
  storages: string[],
  timeoutMs = 30 * 60_000,
): Promise<boolean> {
  if (databases.length + storages.length === 0) return true;
  const progress = spinner(`Provisioning ${[...databases, ...storages].join(', ')}`);
  const deadline = Date.now() + timeoutMs;
  const encoded = encodeURIComponent(team);
  for (;;) {
    const [dbs, sts] = await Promise.all([
      databases.length
        ? api.data<TeamDatabase[]>('GET', `/api/v1/teams/${encoded}/managed-databases`)
        : Promise.resolve([]),
      storages.length
        ? api.data<TeamStorage[]>('GET', `/api/v1/teams/${encoded}/object-storage`)
        : Promise.resolve([]),
    ]);
    const watched = [
      ...dbs.filter((d) => databases.includes(d.name)).map((d) => ({ ...d, kind: 'managed database' })),
      ...sts.filter((s) => storages.includes(s.name)).map((s) => ({ ...s, kind: 'object storage' })),
    ];
    // pending, setup-service, rebalancing… are on their way; these states are where they settle.
    const waiting = watched.filter((r) => !['running', 'error', 'stopped'].includes(r.state));
    progress.update(`Provisioning: ${watched.map((r) => `${r.name} ${r.state}`).join(', ')}`);
    if (waiting.length === 0 || Date.now() > deadline) {
      const failed = watched.filter((r) => r.state !== 'running');
      progress.stop(
        watched
          .map((r) =>
            r.state === 'running'
              ? `${err('green', '✓')} ${r.kind} ${r.name} running`
              : `${err('red', '✗')} ${r.kind} ${r.name} ${r.state}${r.state_reason ? `: ${clean(r.state_reason)}` : ''}`,
          )
          .join('\n'),
      );
      return failed.length === 0;
    }
    await sleep(1000);
  }
}
