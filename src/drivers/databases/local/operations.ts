// The local driver's /1.3 operations (DatabaseOperationsDriver): the engine functions of ../operations
// run on this host against the local instances, reached through Berth's maintenance account, and
// against tenants' sources under the address rule the driver is built with. Scratch copies for
// point-in-time clones live in a temporary directory of their own and go when the copy is done.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressGuard } from '../../net/guard.js';
import {
  checkMigrationSource,
  cloneMysql,
  dumpMigrate,
  pendingMaintenance,
  pgBinDirFor,
  pgBinaryMajor,
  pgToolDir,
  replicationStatus,
  startReplication,
  stopCluster,
  stopReplication,
  upgradeCheck,
  validateSourceUri,
  type MigrationStatus,
} from '../operations/index.js';
import type {
  DatabaseOperationsDriver,
  MigrationRequest,
  OperationInstance,
  RestorableBackup,
} from '../types.js';
import type { LocalDatabaseDriver } from './index.js';
import { recoverCopy } from './recovery.js';

export interface LocalOperationsOptions {
  /** The local managed-database driver whose instances these operations act on. */
  databases: LocalDatabaseDriver;
  /**
   * A tenant's source server is reached under this rule (the tools' rule and BERTH_TOOLS_ALLOW_PRIVATE):
   * loopback, private and link-local addresses are refused otherwise, so that a tenant cannot map the
   * network behind Berth. Berth's own instances need no such rule.
   */
  guard: AddressGuard;
}

/** `15.18` → 15; none for an unknown version. */
function majorOf(version: string | null): number | undefined {
  const major = Number.parseInt(version ?? '', 10);
  return Number.isFinite(major) ? major : undefined;
}

export function createLocalDatabaseOperations(options: LocalOperationsOptions): DatabaseOperationsDriver {
  const { databases, guard } = options;
  /** Berth's own superuser connection to a running instance: never the admin a team receives. */
  const uriOf = (instance: OperationInstance): string => databases.maintenanceUri(instance, instance.port);
  const connection = (request: MigrationRequest) => ({
    sourceUri: request.sourceUri,
    targetUri: uriOf(request.target),
    ssl: request.ssl,
    ...(request.ignoreDbs ? { ignoreDbs: request.ignoreDbs } : {}),
    guard,
  });

  /**
   * The source's data at a point in time: its base backup restored into a scratch directory and its WAL
   * archive replayed to the time, on the source's own major; the clone is then filled from that
   * cluster by dump, so the clone keeps the driver's own layout and configuration.
   */
  async function pointInTimeCopy(
    source: OperationInstance,
    target: OperationInstance,
    backup: RestorableBackup,
    recoveryTime: string,
  ): Promise<MigrationStatus> {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-clone-'));
    fs.chmodSync(work, 0o711);
    try {
      const scratch = await recoverCopy(databases.instanceDir(source.id), {
        backup,
        recoveryTime,
        work,
        keepRunning: true,
        major: majorOf(source.version),
        port: source.port,
      });
      try {
        // The scratch cluster is a copy of the source: same maintenance account and password.
        const scratchUri = new URL(uriOf(source));
        scratchUri.port = String(scratch.port);
        return await dumpMigrate({ sourceUri: scratchUri.toString(), targetUri: uriOf(target), ssl: false });
      } finally {
        await stopCluster(
          { binDir: scratch.binDir, dataDir: scratch.dataDir, runAs: scratch.runAs },
          'fast',
        ).catch(() => undefined);
      }
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  }

  return {
    name: 'local',
    parseSource(uri, engine, ssl) {
      const spec = validateSourceUri(uri, engine, ssl);
      return { host: spec.host, port: spec.port, user: spec.user, database: spec.database };
    },
    async checkMigration(request) {
      const check = await checkMigrationSource({
        guard,
        sourceUri: request.sourceUri,
        engine: request.engine,
        ...(request.ssl !== undefined ? { ssl: request.ssl } : {}),
        ...(request.method ? { method: request.method } : {}),
        ...(request.ignoreDbs ? { ignoreDbs: request.ignoreDbs } : {}),
        ...(request.targetMajor !== undefined ? { targetMajor: request.targetMajor } : {}),
      });
      return { success: check.success, result: check.result, resultCodes: check.resultCodes };
    },
    async checkUpgrade(instance, targetVersion) {
      const check = await upgradeCheck({
        sourceUri: uriOf(instance),
        targetBinDir: pgBinDirFor(targetVersion),
        targetVersion,
      });
      return {
        success: check.success,
        result: check.result,
        resultCodes: check.resultCodes,
        sourceMajor: check.sourceMajor,
      };
    },
    dumpMigrate: (request) =>
      dumpMigrate({
        ...connection(request),
        ...(request.signal ? { signal: request.signal } : {}),
        ...(request.onProgress ? { onProgress: request.onProgress } : {}),
      }),
    startReplication: (request) =>
      startReplication({ ...connection(request), ...(request.signal ? { signal: request.signal } : {}) }),
    async replicationStatus(request) {
      const { lag_bytes: _lag, ...status } = await replicationStatus(connection(request));
      return status;
    },
    async stopReplication(request) {
      const stopped = await stopReplication(connection(request));
      return { orphanedSlots: stopped.orphanedSlots };
    },
    pendingMaintenance: (instance) =>
      pendingMaintenance({
        uri: uriOf(instance),
        // The binaries a restart starts the instance with.
        ...(instance.engine === 'pg' ? { binDir: pgBinDirFor(String(majorOf(instance.version))) } : {}),
      }),
    async needsPhysicalCopy(source) {
      // No pg_dump here reads the source's major (16 from npm ships none): clone physically.
      const major = majorOf(source.version);
      if (source.engine !== 'pg' || major === undefined) return false;
      return (await pgBinaryMajor(pgToolDir(major, 'pg_dump'), 'pg_dump')) < major;
    },
    copyData(source, target, { pointInTime, signal }) {
      if (source.engine === 'mysql')
        return cloneMysql({ sourceUri: uriOf(source), targetUri: uriOf(target) });
      if (pointInTime) return pointInTimeCopy(source, target, pointInTime.backup, pointInTime.recoveryTime);
      return dumpMigrate({
        sourceUri: uriOf(source),
        targetUri: uriOf(target),
        ssl: false,
        ...(signal ? { signal } : {}),
      });
    },
  };
}
