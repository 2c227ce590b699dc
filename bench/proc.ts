// What the benches read of a process from /proc (Linux).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

/** Ticks of a second as /proc counts CPU time (USER_HZ, 100 on Linux). */
const USER_HZ = 100;

/** CPU time (user + system) a live process has used so far, in µs. */
export function processCpuMicros(pid: number | string): number {
  // The command name (field 2) may hold spaces: utime and stime are the 12th and 13th after it.
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / USER_HZ;
}

/** The parent's pid of a live process. */
export function parentPid(pid: number | string): number {
  return Number(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
}

/**
 * Pins every thread of a live process to one CPU (`taskset`); threads it starts later, and processes
 * it spawns, inherit that CPU.
 */
export function pinToCpu(pid: number, cpu: number): void {
  execFileSync('taskset', ['--all-tasks', '--cpu-list', '--pid', String(cpu), String(pid)], {
    stdio: 'ignore',
  });
}
