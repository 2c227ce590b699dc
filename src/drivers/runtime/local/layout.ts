// Where the local runtime keeps an application's files, under <data dir>/apps/<id>/:
//   releases/<release>/   one built release each (owned by the application's OS user), bound at /app
//   sources/<release>.tar.gz  the source a release was built from (GET …/source/download)
//   volumes/<name>/       the application's volumes, bound at their mount_path (as root, each the mount
//                         point of its image volume-images/<name>.ext4, root only)
//   run/<instance>/       per-process files a replica needs (PHP-FPM and nginx configuration)
//   logs/                 the processes' output, size-capped (root only)
//   output/<instance>.stdout|.stderr  what a replica or worker writes, appended by it and followed by
//                         Berth (it outlives Berth; root only)
//   processes.json        what runs (pids, ports), for the next Berth to adopt (root only)
//   paused-by             the pid of a backup that froze the application to read its volumes (pause.ts)
// and the Node.js runtimes under <data dir>/runtimes/. Every name below comes from Berth (ids,
// `d<deployment>` releases, instance names) or was validated by the document's rules (volume names).
import { createHash } from 'node:crypto';
import path from 'node:path';

const SAFE_NAME = /^[a-z0-9][a-z0-9_.-]{0,99}$/i;

function safe(name: string, what: string): string {
  if (!SAFE_NAME.test(name) || name.includes('..')) throw new Error(`invalid ${what} name '${name}'`);
  return name;
}

/** Names this Berth's memory groups and OS accounts: several Berths may share one machine. */
export function runtimeTag(dataDir: string): string {
  return `b${createHash('sha256').update(dataDir).digest('hex').slice(0, 10)}`;
}

export function appLayout(dataDir: string, appId: number) {
  const root = path.join(dataDir, 'apps', String(appId));
  return {
    root,
    releases: path.join(root, 'releases'),
    release: (release: string) => path.join(root, 'releases', safe(release, 'release')),
    source: (release: string) => path.join(root, 'sources', `${safe(release, 'release')}.tar.gz`),
    sources: path.join(root, 'sources'),
    volumes: path.join(root, 'volumes'),
    pausedBy: path.join(root, 'paused-by'),
    volume: (name: string) => path.join(root, 'volumes', safe(name, 'volume')),
    volumeImages: path.join(root, 'volume-images'),
    volumeImage: (name: string) => path.join(root, 'volume-images', `${safe(name, 'volume')}.ext4`),
    run: (instance: string) => path.join(root, 'run', safe(instance, 'instance')),
    runs: path.join(root, 'run'),
    logs: path.join(root, 'logs'),
    outputs: path.join(root, 'output'),
    output: (instance: string) => ({
      stdout: path.join(root, 'output', `${safe(instance, 'instance')}.stdout`),
      stderr: path.join(root, 'output', `${safe(instance, 'instance')}.stderr`),
    }),
    processes: path.join(root, 'processes.json'),
  };
}

export type AppLayout = ReturnType<typeof appLayout>;
