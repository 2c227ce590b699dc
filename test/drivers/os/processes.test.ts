// The host's process tree read from /proc (src/drivers/os/processes.ts), on real processes: what is
// below a process, its start time, and the end of a process that is not Berth's child.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import {
  descendants,
  isRunning,
  processesOfUser,
  processIdentity,
  processStartTime,
  processTree,
  watchAdoptedExit,
} from '../../../src/drivers/os/processes.js';

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) child.kill('SIGKILL');
});

/** A shell that has started a `sleep` below it: resolves with both pids once the sleep runs. */
async function shellWithChild(): Promise<{ shell: ChildProcess; sleep: number }> {
  const shell = spawn('/bin/sh', ['-c', 'sleep 300 & echo $!; wait'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  started.push(shell);
  const [line] = (await once(shell.stdout, 'data')) as [Buffer];
  return { shell, sleep: Number(line.toString().trim()) };
}

describe('process tree', () => {
  it('finds the children of a process and everything below it, parents first', async () => {
    const { shell, sleep } = await shellWithChild();
    const tree = processTree();
    expect(tree.get(shell.pid!)).toEqual([sleep]);
    expect(tree.get(process.pid)).toContain(shell.pid);
    const below = descendants(tree, process.pid);
    expect(below[0]).toBe(process.pid);
    expect(below.indexOf(sleep)).toBeGreaterThan(below.indexOf(shell.pid!));
    expect(descendants(tree, sleep)).toEqual([sleep]);
  });

  it('reads a start time that stays while the process runs, and none once it has ended', async () => {
    const { shell, sleep } = await shellWithChild();
    const at = processStartTime(sleep);
    expect(at).toEqual(expect.any(Number));
    expect(processStartTime(sleep)).toBe(at);
    // The shell has not reaped its child yet: a zombie has no start time either.
    process.kill(sleep, 'SIGSTOP');
    shell.kill('SIGSTOP');
    process.kill(sleep, 'SIGKILL');
    await until(() => processStartTime(sleep) === undefined);
    shell.kill('SIGKILL');
  });

  it('sees an adopted process end, and a reused pid is not the process watched', async () => {
    const { sleep } = await shellWithChild();
    const at = processStartTime(sleep)!;
    const watched = watchAdoptedExit(sleep, at);
    // Another start time under the same pid (a reused pid) has ended at once.
    const reused = watchAdoptedExit(sleep, at - 1);
    await expect(reused.exited).resolves.toEqual({ code: null, signal: null });
    expect(watched.hasExited()).toBe(false);
    process.kill(sleep, 'SIGKILL');
    await expect(watched.exited).resolves.toEqual({ code: null, signal: null });
    expect(watched.hasExited()).toBe(true);
  });

  it("lists a user's processes, not its zombies", async () => {
    const { shell, sleep } = await shellWithChild();
    const uid = process.getuid!();
    expect(processesOfUser(uid)).toEqual(expect.arrayContaining([shell.pid, sleep]));
    expect(processesOfUser(uid + 1)).not.toContain(sleep);
    shell.kill('SIGSTOP'); // it does not reap the sleep: a zombie, which is not listed
    process.kill(sleep, 'SIGKILL');
    await until(() => !processesOfUser(uid).includes(sleep));
    expect(processesOfUser(uid)).toContain(shell.pid);
    shell.kill('SIGKILL');
  });
});

describe("process identities (files naming a process for another: a backup's pause and hold)", () => {
  it('names a process by pid and start time, so that a reused pid is not taken for it', async () => {
    const { sleep } = await shellWithChild();
    const identity = processIdentity(sleep)!;
    expect(identity).toBe(`${sleep} ${processStartTime(sleep)}`);
    expect(isRunning(identity)).toBe(true);
    // The same pid with another start time: a process that is gone, its pid reused.
    expect(isRunning(`${sleep} ${processStartTime(sleep)! - 1}`)).toBe(false);
    // A bare pid, as older files wrote it, counts while a process has that pid.
    expect(isRunning(String(sleep))).toBe(true);
    process.kill(sleep, 'SIGKILL');
    await until(() => processIdentity(sleep) === undefined);
    expect(isRunning(identity)).toBe(false);
    expect(isRunning('')).toBe(false);
    expect(isRunning('nonsense')).toBe(false);
  });
});

/** Waits for `condition`, looking every 20 ms (a /proc state, no event announces it). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}
