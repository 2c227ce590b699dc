// The `rabbitmq` service runner: one RabbitMQ node (Debian's rabbitmq-server) per service instance,
// never the system service. Each node has its own directory (<dataDir>/services/<id>/: mnesia, logs,
// configuration, an empty enabled_plugins, its Erlang cookie), its own OS account when Berth is root
// (`berth-mq-<20 hex>`), its own loopback ports (AMQP, Erlang distribution) and its own epmd on a
// loopback port of its own (ERL_EPMD_PORT), which Berth starts before the node and stops after it: a
// node never shares the system's epmd (4369) or another instance's.
//
// This file runs nodes (prepare, start, stop, converge, delete); broker.ts holds what an instance is
// on disk and which processes are its, protocol.ts what Berth says to a node (definitions, rabbitmqctl,
// readiness).
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { createKeyedLock } from '../../../domain/keyed-lock.js';
import {
  canConnect,
  ensureTraversable,
  freePort,
  portIsFree,
  tailLines,
  waitUntil,
} from '../../databases/local/process.js';
import { GIB, placeOnVolume, shrinkRefusal, unmountImage } from '../../os/disk-images.js';
import { processesOfUser } from '../../os/processes.js';
import { establishedConnections } from '../../os/sockets.js';
import { ensureSystemAccount, findAccount, isRoot, removeSystemAccount } from '../../os/users.js';
import type { ServiceRef, ServiceRunner, ServiceRuntime, ServiceSpec } from '../types.js';
import {
  accountName,
  beamPids,
  checkId,
  definitionsFile,
  envOf,
  epmdBinary,
  epmdPids,
  ids,
  isPort,
  logFile,
  nodeName,
  pidFile,
  rabbitmqVersion,
  readState,
  SERVER,
  terminateAll,
  USERNAME,
  vhostOf,
  wrapperPids,
  writeConfiguration,
  type Account,
  type InstanceState,
} from './broker.js';
import { ctl, ctlOk, redact, waitForAmqp, writeDefinitions, type AccessChange } from './protocol.js';

export { rabbitmqVersion, VHOST, vhostOf } from './broker.js';
export { rabbitPasswordHash } from './protocol.js';

const STOP_GRACE_MS = 30_000;

const execFileAsync = promisify(execFile);

export interface RabbitmqRunnerDeps {
  dataDir: string;
  logger: Logger;
}

export function createRabbitmqRunner(deps: RabbitmqRunnerDeps): ServiceRunner {
  const logger = deps.logger.child({ runner: 'rabbitmq' });
  const servicesDir = path.join(deps.dataDir, 'services');
  const version = rabbitmqVersion();
  // One operation at a time per instance in this process: Berth's calls converge, they must not race.
  const locks = createKeyedLock();

  function serialized<T>(id: string, work: () => Promise<T>): Promise<T> {
    return locks.run(id, work);
  }

  const rootOf = (id: string): string => path.join(servicesDir, checkId(id));
  const imageOf = (id: string): string => path.join(servicesDir, '.volumes', `${checkId(id)}.ext4`);
  /** The instance's OS account when Berth is root (created when missing), else undefined. */
  function accountFor(id: string): Account | undefined {
    if (!isRoot()) return undefined;
    return ensureSystemAccount(accountName(id));
  }

  async function pickPort(preferred: number | undefined, taken: number[]): Promise<number> {
    if (isPort(preferred) && !taken.includes(preferred) && (await portIsFree(preferred))) return preferred;
    for (;;) {
      const port = await freePort();
      if (!taken.includes(port)) return port;
    }
  }

  /** The instance's state, and what changed in its access (protocol.ts). */
  interface Prepared extends AccessChange {
    state: InstanceState;
  }

  /** Directories, cookie, configuration, definitions and ports of the instance. */
  async function prepare(spec: ServiceSpec, account: Account | undefined): Promise<Prepared> {
    const id = checkId(spec.id);
    if (!USERNAME.test(spec.username) || spec.username === 'guest') {
      throw new Error('invalid rabbitmq username: letters, digits, _ . @ - and not guest');
    }
    if (!spec.password || /[\u0000-\u001f\u007f]/.test(spec.password)) {
      throw new Error('invalid rabbitmq password: empty or with control characters');
    }
    const root = rootOf(id);
    fs.mkdirSync(servicesDir, { recursive: true, mode: 0o711 });
    if (isRoot()) {
      fs.chmodSync(servicesDir, 0o711);
      ensureTraversable(root, deps.dataDir);
    }
    fs.mkdirSync(root, { recursive: true, mode: 0o700 });
    for (const dir of ['mnesia', 'log']) fs.mkdirSync(path.join(root, dir), { recursive: true, mode: 0o700 });

    const previous = readState(root);
    const running = beamPids(root).length > 0;
    // Messages and queues on a volume of volume_size (docs/services.md): RabbitMQ's free-disk alarm
    // then blocks publishers as it fills, instead of the host's disk running out.
    if (!running && spec.volumeGiB && isRoot()) {
      await placeOnVolume(imageOf(id), path.join(root, 'mnesia'), spec.volumeGiB * GIB);
    }
    const vhost = vhostOf(spec);
    let state: InstanceState;
    if (previous && running) {
      state = { ...previous, vhost };
    } else {
      const amqpPort = await pickPort(spec.port ?? previous?.amqpPort, []);
      const distPort = await pickPort(previous?.distPort, [amqpPort]);
      // An epmd of ours still up on the old port (a crashed node) is reused, not replaced.
      const epmdPort =
        previous && epmdPids(previous.epmdPort).length > 0
          ? previous.epmdPort
          : await pickPort(previous?.epmdPort, [amqpPort, distPort]);
      state = { node: nodeName(id), amqpPort, distPort, epmdPort, vhost };
    }

    const cookie = path.join(root, '.erlang.cookie');
    if (!fs.existsSync(cookie)) {
      fs.writeFileSync(cookie, randomBytes(24).toString('hex').toUpperCase(), { mode: 0o600 });
    }
    fs.chmodSync(cookie, 0o600);

    const definitions = definitionsFile(root);
    const access = writeDefinitions(definitions, spec.username, spec.password, vhost);
    writeConfiguration(root, state, definitions, spec.memoryMiB);
    if (account) {
      await execFileAsync('chown', ['-R', `${account.uid}:${account.gid}`, '--', root]);
    }
    fs.chmodSync(root, 0o700);
    return { state, ...access };
  }

  async function ensureEpmd(root: string, state: InstanceState, account: Account | undefined): Promise<void> {
    if (epmdPids(state.epmdPort).length > 0 && (await canConnect(state.epmdPort))) return;
    const child = spawn(epmdBinary(), ['-port', String(state.epmdPort), '-address', '127.0.0.1'], {
      detached: true,
      stdio: 'ignore',
      cwd: root,
      env: envOf(root, state),
      ...ids(account),
    });
    child.on('error', () => undefined);
    child.unref();
    await waitUntil(() => canConnect(state.epmdPort), 10_000, `epmd on port ${state.epmdPort}`, 20);
  }

  /**
   * Starts the node (and its epmd) unless it runs; resolves once it has booted (definitions imported)
   * and accepts AMQP connections. `wasRunning`: it ran before, so it did not import new definitions.
   */
  async function startNode(spec: ServiceSpec): Promise<Prepared & { wasRunning: boolean }> {
    const root = rootOf(spec.id);
    const account = accountFor(spec.id);
    const prepared = await prepare(spec, account);
    const { state } = prepared;
    if (beamPids(root).length > 0) {
      // A node that runs without listening yet is still booting: wait for it rather than start another.
      if (!(await canConnect(state.amqpPort))) await waitForAmqp(root, state, 0);
      return { ...prepared, wasRunning: true };
    }
    const started = Date.now();
    await ensureEpmd(root, state, account);
    fs.rmSync(pidFile(root), { force: true });
    let logOffset = 0;
    try {
      logOffset = fs.statSync(logFile(root)).size;
    } catch {
      // first start
    }
    const child = spawn(SERVER, [], {
      detached: true,
      stdio: 'ignore',
      cwd: root,
      env: envOf(root, state),
      ...ids(account),
    });
    let exited = false;
    child.on('exit', () => {
      exited = true;
    });
    child.on('error', () => {
      exited = true;
    });
    child.unref();
    await waitForAmqp(root, state, logOffset, () => exited);
    logger.info(
      { serviceId: spec.id, port: state.amqpPort, ms: Date.now() - started },
      'rabbitmq node started',
    );
    return { ...prepared, wasRunning: false };
  }

  async function stopNode(id: string): Promise<void> {
    const root = rootOf(id);
    const state = readState(root);
    const beams = beamPids(root);
    // SIGTERM is RabbitMQ's orderly shutdown: queues and messages are flushed to disk.
    if (beams.length > 0) await terminateAll(beams, 'SIGTERM', STOP_GRACE_MS);
    const wrappers = wrapperPids(root);
    if (wrappers.length > 0) await terminateAll(wrappers, 'SIGTERM', 5000);
    if (state) {
      const epmds = epmdPids(state.epmdPort);
      if (epmds.length > 0) await terminateAll(epmds, 'SIGTERM', 5000);
    }
    fs.rmSync(pidFile(root), { force: true });
    // Its volume is mounted again before the next start.
    await unmountImage(path.join(root, 'mnesia'));
    if (beams.length > 0) logger.info({ serviceId: id }, 'rabbitmq node stopped');
  }

  function runtimeOf(spec: ServiceSpec, state: InstanceState): ServiceRuntime {
    const root = rootOf(spec.id);
    return {
      host: '127.0.0.1',
      port: state.amqpPort,
      pid: beamPids(root)[0] ?? null,
      version,
      location: root,
      extra: { vhost: state.vhost },
    };
  }

  /**
   * A node that ran before the definitions changed imports them now; a former user and the rights on
   * a former vhost go (the vhost and its messages stay). `rabbitmqctl` gets the definitions file, whose
   * password is a salted hash, and request values only after `--`.
   */
  async function converge(spec: ServiceSpec, prepared: Prepared & { wasRunning: boolean }): Promise<void> {
    const root = rootOf(spec.id);
    const account = accountFor(spec.id);
    const { state } = prepared;
    if (prepared.changed && prepared.wasRunning) {
      await ctlOk(root, state, account, ['import_definitions', '--', definitionsFile(root)]);
    }
    const steps: Array<Promise<unknown>> = [];
    if (prepared.formerUser) {
      steps.push(
        ctl(root, state, account, ['delete_user', '--', prepared.formerUser]).then(({ code, out }) => {
          if (code !== 0 && !/does not exist/i.test(out))
            throw new Error(`rabbitmqctl delete_user failed (exit ${code})`);
        }),
      );
    }
    if (prepared.formerVhost) {
      steps.push(
        ctl(root, state, account, [
          'clear_permissions',
          '-p',
          prepared.formerVhost,
          '--',
          spec.username,
        ]).then(({ code, out }) => {
          if (code !== 0 && !/does not exist|no_such/i.test(out)) {
            throw new Error(`rabbitmqctl clear_permissions failed (exit ${code})`);
          }
        }),
      );
    }
    await Promise.all(steps);
  }

  const runner: ServiceRunner = {
    types: ['rabbitmq'],

    provision(spec) {
      return serialized(spec.id, async () => {
        const started = Date.now();
        const prepared = await startNode(spec);
        await converge(spec, prepared);
        const { state } = prepared;
        logger.info(
          { serviceId: spec.id, port: state.amqpPort, vhost: state.vhost, ms: Date.now() - started },
          'rabbitmq service provisioned',
        );
        return runtimeOf(spec, state);
      });
    },

    start(spec) {
      return serialized(spec.id, async () => {
        const prepared = await startNode(spec);
        await converge(spec, prepared);
        return runtimeOf(spec, prepared.state);
      });
    },

    restart(spec) {
      return serialized(spec.id, async () => {
        // Refused while the node still runs on the volume it has.
        const refusal = spec.volumeGiB ? shrinkRefusal(imageOf(spec.id), spec.volumeGiB * GIB) : undefined;
        if (refusal) throw new Error(refusal);
        await stopNode(checkId(spec.id));
        const prepared = await startNode(spec);
        await converge(spec, prepared);
        return runtimeOf(spec, prepared.state);
      });
    },

    stop(ref: ServiceRef) {
      return serialized(ref.id, () => stopNode(checkId(ref.id)));
    },

    delete(ref: ServiceRef) {
      return serialized(ref.id, async () => {
        const id = checkId(ref.id);
        await stopNode(id);
        const name = accountName(id);
        const account = isRoot() ? findAccount(name) : undefined;
        if (account) {
          // Anything still running as the account (a CLI, a stray epmd) goes before the account does.
          const left = processesOfUser(account.uid);
          if (left.length > 0) await terminateAll(left, 'SIGKILL', 5000);
        }
        await unmountImage(path.join(rootOf(id), 'mnesia'), { detach: true });
        fs.rmSync(imageOf(id), { force: true });
        fs.rmSync(rootOf(id), { recursive: true, force: true });
        if (account) removeSystemAccount(name);
        logger.info({ serviceId: id }, 'rabbitmq service deleted');
      });
    },

    async status(ref: ServiceRef) {
      const root = rootOf(ref.id);
      const pid = beamPids(root)[0] ?? null;
      const state = readState(root);
      const running = pid !== null && state !== undefined && (await canConnect(state.amqpPort));
      return { running, pid };
    },

    logs(ref: ServiceRef, tail: number) {
      const count = Math.max(0, Math.min(Math.floor(tail), 10_000));
      if (count === 0) return Promise.resolve([]);
      return Promise.resolve(tailLines(logFile(rootOf(ref.id)), count).map(redact));
    },
    // It serves on a loopback port of its own: the kernel's socket table counts its clients.
    connections: (ports) => establishedConnections(ports),
  };
  return runner;
}
