// What a serving Berth process starts beside the HTTP API, and stops again. Features add theirs here.
import type { AppContext } from './context.js';
import { createBackgroundWork } from './jobs/index.js';
import { startObjectStorageEndpoint } from './services/object-storage/index.js';
import { startScheduledDeletion } from './services/scheduled-deletion/index.js';
import { startManagedDatabases } from './services/managed-databases/index.js';

export interface Background {
  stop(): Promise<void>;
}

export async function startBackground(
  ctx: AppContext,
  options: { pollMs?: number } = {},
): Promise<Background> {
  const work = createBackgroundWork(ctx, options);
  const stops: Array<() => Promise<void>> = [];
  // Feature starters go here (servers, reconcilers), each pushing its stop onto `stops`.
  const s3 = await startObjectStorageEndpoint(ctx);
  stops.push(() => s3.close());
  await startScheduledDeletion(ctx);
  const databases = startManagedDatabases(ctx);
  stops.push(() => databases.stop());
  work.start();
  return {
    async stop() {
      await work.stop(); // waits for jobs in flight
      for (const stop of stops.reverse()) await stop();
    },
  };
}
