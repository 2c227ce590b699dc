// The host's process tree, read from /proc: what is below a sandbox's outer process (bwrap, its
// namespace's init, the tenant's processes) is found by walking down from it.
import fs from 'node:fs';

/** Each process's children, from one pass over /proc. */
export function processTree(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // The command name may hold spaces and parentheses: the fields after the last ')' are fixed
    // (state, then the parent's pid).
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const siblings = children.get(parent) ?? [];
    siblings.push(Number(entry));
    children.set(parent, siblings);
  }
  return children;
}

/** `pid` and everything below it in `tree`, parents before children (breadth first). */
export function descendants(tree: Map<number, number[]>, pid: number): number[] {
  const found = [pid];
  for (let index = 0; index < found.length; index++) found.push(...(tree.get(found[index]!) ?? []));
  return found;
}

/** A process's start time in clock ticks since boot, or undefined when it is gone (or a zombie). */
export function processStartTime(pid: number): number | undefined {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // After the command name (which may hold spaces): state, ppid, … starttime is the 20th field.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (fields[0] === 'Z') return undefined;
  return Number(fields[19]);
}

/**
 * A live process as a file can name it for another process: `<pid> <start time>` (a pid alone may be
 * reused once the process is gone); undefined when it is gone.
 */
export function processIdentity(pid: number): string | undefined {
  const started = processStartTime(pid);
  return started === undefined ? undefined : `${pid} ${started}`;
}

/** This process as processIdentity names it (its bare pid where /proc cannot say its start time). */
export const ownIdentity = (): string => processIdentity(process.pid) ?? String(process.pid);

/**
 * Whether the process `identity` names (processIdentity) still runs. A bare pid, as files written
 * before identities had, counts while a process with that pid lives.
 */
export function isRunning(identity: string): boolean {
  const [pidText, started] = identity.trim().split(' ');
  const pid = Number(pidText);
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  if (started !== undefined) return processIdentity(pid) === identity.trim();
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** How often the end of an adopted process (not Berth's child: no exit event) is looked for. */
const ADOPTED_POLL_MS = 200;

/** The exit of an adopted process: its code and signal are not Berth's to know. */
export interface AdoptedExit {
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited: () => boolean;
}

/**
 * Watches a process an earlier Berth started and this one adopted: it has ended once `pid` no longer
 * runs with `startTime` (a reused pid has another start time).
 */
export function watchAdoptedExit(pid: number, startTime: number): AdoptedExit {
  let gone = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    const timer = setInterval(() => {
      if (processStartTime(pid) === startTime) return;
      clearInterval(timer);
      gone = true;
      resolve({ code: null, signal: null });
    }, ADOPTED_POLL_MS);
    timer.unref();
  });
  return { exited, hasExited: () => gone };
}

/** The processes (zombies aside) whose real user is `uid`, from one pass over /proc. */
export function processesOfUser(uid: number): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let status: string;
    try {
      status = fs.readFileSync(`/proc/${entry}/status`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    if (/^State:\s+Z/m.test(status) || Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) !== uid) continue;
    found.push(Number(entry));
  }
  return found;
}
