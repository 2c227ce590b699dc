// An application of the local runtime paused while a backup reads its volumes (src/backup.ts): every
// process of its group subtree (`berth/<tag>/app-<id>`) frozen at once (../../os/freezer.ts), then let
// go. The backup runs in a process of its own, beside the serving Berth: it writes its pid and start
// time to the application's `paused-by` file before it freezes, so that the serving Berth
// - does not count the health checks a frozen replica cannot answer (replicas.ts), and
// - lets an application go on when the backup that froze it has died (killed mid-copy), at the next
//   health check or at its start (index.ts).
import fs from 'node:fs/promises';
import { detectCgroups, type CgroupSupport } from '../../os/cgroups.js';
import { freezeSubtree, subtreeFrozen, thawSubtree } from '../../os/freezer.js';
import { isRunning, ownIdentity } from '../../os/processes.js';
import { appLayout, runtimeTag } from './layout.js';

export interface Paused {
  resume(): Promise<void>;
  /** The same, synchronously: for a backup that is about to exit on a signal. */
  resumeSync(): void;
}

const segmentsOf = (tag: string, appId: number) => [tag, `app-${appId}`];

/**
 * Pauses every process of application `appId` of the Berth of `dataDir`, on behalf of this process; a
 * reason instead when it cannot be (no cgroups, no freezer, processes outside it, nothing running).
 */
export async function pauseApplication(
  dataDir: string,
  appId: number,
  support: CgroupSupport | undefined = detectCgroups(),
): Promise<Paused | { reason: string }> {
  if (!support) return { reason: 'this host has no usable memory cgroups' };
  const segments = segmentsOf(runtimeTag(dataDir), appId);
  const holder = appLayout(dataDir, appId).pausedBy;
  // Written first: a serving Berth that sees the freeze must find who holds it.
  await fs.writeFile(holder, `${ownIdentity()}\n`, { mode: 0o600 });
  const release = () => fs.rm(holder, { force: true });
  let frozen;
  try {
    frozen = await freezeSubtree(support, segments);
  } catch (error) {
    await release();
    throw error;
  }
  if ('reason' in frozen) {
    await release();
    return frozen;
  }
  return {
    async resume() {
      await frozen.thaw();
      await release();
    },
    resumeSync() {
      frozen.thawSync();
      // The file may stay: a holder that is gone lets the next check thaw (nothing is frozen now).
    },
  };
}

/**
 * What the serving Berth finds of application `appId`: `paused` (frozen by a live backup), `released`
 * (it was frozen by a backup that is gone: it is let go now) or `running`.
 */
export async function checkPause(
  context: { support: CgroupSupport | undefined; cgroupTag: string; layout: { pausedBy: string } },
  appId: number,
): Promise<'paused' | 'released' | 'running'> {
  const { support, cgroupTag, layout } = context;
  if (!support) return 'running';
  const segments = segmentsOf(cgroupTag, appId);
  if (!(await subtreeFrozen(support, segments))) return 'running';
  const holder = layout.pausedBy;
  if (isRunning(await fs.readFile(holder, 'utf8').catch(() => ''))) return 'paused';
  await thawSubtree(support, segments);
  await fs.rm(holder, { force: true });
  return 'released';
}
