// A build: the source into a new release directory (a git clone, an uploaded archive, or WordPress from
// the host's package), a copy of that source kept for download, then the build commands in the sandbox
// as the application's user, without secrets or services, under their own memory cap. The release is
// written beside its final name and renamed at the end, so a failed or cancelled build leaves nothing
// that a rollback could pick up.
//
// Like Heroku and Render, the build installs devDependencies (compilers, bundlers: `tsc`, `vite`): its
// environment has no NODE_ENV=production, so npm, yarn and pnpm install everything, and the build
// reaches the registry with the host's registry, CA files and proxies (build-env.ts). After the
// commands, a tree npm installed is pruned of its devDependencies (`npm prune --omit=dev`) so the
// release runs (with NODE_ENV=production) on what `dependencies` names.
import fs from 'node:fs/promises';
import {
  PermanentDriverError,
  type AppSpec,
  type BuildResult,
  type SourceSpec,
  type StepContext,
} from '../driver.js';
import { extractArchive } from './archive.js';
import { withoutCredentials, type BuildNetwork } from './build-env.js';
import { baseEnv, launch, type LaunchContext } from './processes.js';
import { fetchGitSource, packDirectory, SourceError } from './source.js';
import { prepareWordPressRelease } from './wordpress.js';
import type { AddressGuard } from '../../net/guard.js';
import { AppLogs } from './logs.js';

/** Builds get at least this much memory, whatever the replicas get (npm and composer need it). */
const BUILD_MEMORY_MIN = 1024 * 1024 * 1024;
/** Largest uploaded archive once unpacked, and its most entries (checked at upload too). */
export const ARCHIVE_MAX_BYTES = 2 * 1024 * 1024 * 1024;
export const ARCHIVE_MAX_ENTRIES = 200_000;

export interface BuildDeps {
  guard: AddressGuard;
  allowFileUrls: boolean;
  timeoutMs: number;
  /** The registry, CA files and proxies of builds. */
  network: BuildNetwork;
  /** An archive source's file on this host (the artifact store's), for the unpacking. */
  archiveFile: string | undefined;
}

/** The build commands: the document's, or for a nodejs app without any, installing its dependencies. */
async function buildCommands(app: AppSpec, dir: string): Promise<string[]> {
  if (app.commands.build.length > 0) return app.commands.build;
  if (app.type !== 'nodejs') return [];
  const exists = (file: string) =>
    fs.access(`${dir}/${file}`).then(
      () => true,
      () => false,
    );
  if (!(await exists('package.json')) || (await exists('node_modules'))) return [];
  return [(await exists('package-lock.json')) ? 'npm ci' : 'npm install'];
}

export async function buildRelease(
  app: AppSpec,
  release: string,
  source: SourceSpec,
  step: StepContext,
  context: LaunchContext,
  deps: BuildDeps,
): Promise<BuildResult> {
  const { layout, account } = context;
  const final = layout.release(release);
  const work = `${final}.building`;
  await fs.rm(work, { recursive: true, force: true });
  await fs.rm(final, { recursive: true, force: true });
  // The releases dir is made (root's, the account's group, 0710) by secureAppDirs in index.ts.
  await fs.mkdir(layout.releases, { recursive: true, mode: 0o700 });
  await fs.mkdir(layout.sources, { recursive: true, mode: 0o700 });
  await fs.chmod(layout.sources, 0o700);

  let result: BuildResult = { commit: null, branch: null };
  try {
    if (source.kind === 'git') {
      step.log(`Fetching ${source.branch ? `branch ${source.branch} of ` : ''}the repository`);
      const fetched = await fetchGitSource({
        source: { url: source.url, ...(source.branch ? { branch: source.branch } : {}) },
        dest: work,
        guard: deps.guard,
        allowFileUrls: deps.allowFileUrls,
        signal: step.signal,
        log: step.log,
        timeoutMs: deps.timeoutMs,
      });
      result = { commit: fetched.commit, branch: fetched.branch };
      step.log(`Fetched commit ${fetched.commit} of ${fetched.branch}`);
      await fs.rm(`${work}/.git`, { recursive: true, force: true });
    } else if (source.kind === 'archive') {
      step.log('Unpacking the uploaded source archive');
      const unpacked = await extractArchive({
        file: requireArchive(deps.archiveFile),
        dest: work,
        maxBytes: ARCHIVE_MAX_BYTES,
        maxEntries: ARCHIVE_MAX_ENTRIES,
      });
      step.log(`Unpacked ${unpacked.files} files (${unpacked.bytes} bytes)`);
    } else {
      step.log("Preparing WordPress from the host's package");
      await prepareWordPressRelease(work);
    }
    await packDirectory(work, layout.source(release));
  } catch (error) {
    await fs.rm(work, { recursive: true, force: true });
    if (error instanceof SourceError && error.permanent) throw new PermanentDriverError(error.message);
    throw error as Error;
  }

  step.building?.();
  try {
    if (account) await chownTree(work, account.uid, account.gid);
    // The application's account's alone, whatever the source made it (issue 24).
    await fs.chmod(work, 0o700);
    // The build runs where the release will be: /app is `final` while it builds.
    await fs.rename(work, final);
    const commands = await buildCommands(app, final);
    if (commands.length === 0) step.log('No build commands');
    else if (await exists(`${final}/package.json`))
      step.log(`Packages from the npm registry ${withoutCredentials(deps.network.registry)}`);
    for (const command of commands) {
      if (step.signal.aborted) throw step.signal.reason;
      step.log(`$ ${command}`);
      await runBuildCommand(app, release, command, step, context, deps.network);
    }
    // npm's hidden lockfile: the tree is npm's (yarn and pnpm prune with their own commands).
    if (commands.length > 0 && (await exists(`${final}/node_modules/.package-lock.json`))) {
      if (step.signal.aborted) throw step.signal.reason;
      step.log(`$ ${PRUNE_COMMAND}  (devDependencies out of the release)`);
      await runBuildCommand(app, release, PRUNE_COMMAND, step, context, deps.network, {
        NODE_ENV: 'production',
      });
    }
  } catch (error) {
    await fs.rm(final, { recursive: true, force: true });
    throw error;
  }
  return result;
}

const PRUNE_COMMAND = 'npm prune --omit=dev --no-audit --no-fund';

const exists = (file: string) =>
  fs.access(file).then(
    () => true,
    () => false,
  );

async function runBuildCommand(
  app: AppSpec,
  release: string,
  command: string,
  step: StepContext,
  context: LaunchContext,
  network: BuildNetwork,
  more: Record<string, string> = {},
): Promise<void> {
  const memoryBytes = Math.max(BUILD_MEMORY_MIN, app.memoryBytes);
  const launched = await launch(app, context, {
    instance: `build-${release}`,
    release,
    command: ['/bin/sh', '-c', command],
    // No NODE_ENV: package managers install devDependencies, which builds need.
    env: { ...baseEnv(app), CI: 'true', npm_config_update_notifier: 'false', ...network.env, ...more },
    memoryBytes,
    withVolumes: false,
    readOnlyBinds: network.binds,
  });
  const { process } = launched;
  const out = AppLogs.splitter((line) => step.log(line));
  process.stdout.on('data', (chunk: Buffer) => out.write(chunk));
  process.stderr.on('data', (chunk: Buffer) => out.write(chunk));
  const onAbort = () => process.kill('SIGKILL');
  step.signal.addEventListener('abort', onAbort, { once: true });
  try {
    const exit = await process.exited;
    out.end();
    if (step.signal.aborted) throw step.signal.reason;
    if (exit.code !== 0) {
      const oom = launched.group ? (await launched.group.oomKills()) > launched.oomBefore : false;
      throw new PermanentDriverError(
        oom
          ? `'${command}' was killed: out of memory (build limit ${Math.round(memoryBytes / 1048576)} MiB)`
          : `'${command}' ${exit.signal ? `was killed by ${exit.signal}` : `exited with ${exit.code}`}`,
      );
    }
  } finally {
    step.signal.removeEventListener('abort', onAbort);
    await launched.group?.remove().catch(() => undefined);
  }
}

/** Gives a tree to the application's user; links are changed themselves, never followed. */
export async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await fs.lchown(dir, uid, gid);
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const file = `${dir}/${entry.name}`;
    if (entry.isDirectory()) await chownTree(file, uid, gid);
    else await fs.lchown(file, uid, gid);
  }
}

function requireArchive(file: string | undefined): string {
  if (file === undefined) throw new Error('an archive source needs its file');
  return file;
}
