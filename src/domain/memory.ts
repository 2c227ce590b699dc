// What an application asks of the host's memory, for the operator's ceilings (BERTH_MAX_APP_MEMORY per
// process, BERTH_QUOTA_TEAM_MEMORY per team; docs/api/apply.md, "Memory ceilings"). Pure.
//
// Counted is what runs steadily: every replica and every `worker` at the application's memory (a
// worker runs in a sandbox like a replica's, under the application's cap, whatever its own `memory`
// says), and each other service and container service at its `memory` (default 256Mi), except `minio`,
// which is a bucket on Berth's S3 endpoint and runs nothing. Builds, scheduler runs and one-off commands
// come and go and are not counted; managed databases are sized by their plan and have their own quota.
import { DEFAULT_SERVICE_MEMORY_MI } from './app-services.js';
import { DEFAULT_MEMORY_MI, memoryBytes } from './deployments.js';

/** `512Mi`, `2Gi` (the document's form, already checked) in MiB; `fallback` when absent. */
export function memoryMiB(value: string | null | undefined, fallback: number): number {
  return memoryBytes(value ?? null, fallback) / (1024 * 1024);
}

/** MiB as a document would write them: `4Gi` when whole GiB, else `1536Mi`. */
export function memoryText(mib: number): string {
  return mib % 1024 === 0 ? `${mib / 1024}Gi` : `${mib}Mi`;
}

export interface ApplicationMemory {
  /** `settings.memory`; null: the default. */
  memory: string | null;
  /** `settings.replicas`; null: one. */
  replicas: number | null;
  services: ReadonlyArray<{ type: string; memory: string | null }>;
  containerServices: ReadonlyArray<{ memory: string | null }>;
}

/** The MiB one application holds while it runs (see the top of the file for what counts). */
export function applicationMemoryMiB(app: ApplicationMemory): number {
  const each = memoryMiB(app.memory, DEFAULT_MEMORY_MI);
  const workers = app.services.filter((s) => s.type === 'worker').length;
  const services = app.services
    .filter((s) => s.type !== 'worker' && s.type !== 'minio')
    .reduce((sum, s) => sum + memoryMiB(s.memory, DEFAULT_SERVICE_MEMORY_MI), 0);
  const containers = app.containerServices.reduce(
    (sum, s) => sum + memoryMiB(s.memory, DEFAULT_SERVICE_MEMORY_MI),
    0,
  );
  return each * ((app.replicas ?? 1) + workers) + services + containers;
}
