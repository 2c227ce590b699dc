// Established TCP connections to this host's listeners, from the kernel's socket tables
// (/proc/net/tcp and tcp6 of Berth's network namespace, the host's): a cheap count, no engine asked.
import fs from 'node:fs/promises';

/** TCP_ESTABLISHED in the `st` column of /proc/net/tcp. */
const ESTABLISHED = '01';

/** Per port of `ports`, the established connections whose local end is that port (0 when none). */
export async function establishedConnections(ports: readonly number[]): Promise<Map<number, number>> {
  const counts = new Map(ports.map((port) => [port, 0]));
  if (counts.size === 0) return counts;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await fs.readFile(table, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st …; local_address is <hex address>:<hex port>.
      const [, local, , state] = line.trim().split(/\s+/);
      if (state !== ESTABLISHED || local === undefined) continue;
      const port = parseInt(local.slice(local.lastIndexOf(':') + 1), 16);
      const count = counts.get(port);
      if (count !== undefined) counts.set(port, count + 1);
    }
  }
  return counts;
}
