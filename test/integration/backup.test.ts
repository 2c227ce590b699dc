// Backup and restore of the whole platform (issue 31 item 3), as an operator runs them: the built
// `berth admin backup` against a real `berth serve` while S3 PUTs and API writes go on, then `berth
// admin restore` into a second, fresh data dir, and a `berth serve` there: the store's rows, the
// objects' bytes, a managed PostgreSQL database's row, the volume's file and the application serving
// all come back. A wrong passphrase and an altered file are refused; a second backup copies little.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PutObjectCommand, GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { removeTagNetworks } from '../../src/drivers/os/netns.js';
import { runtimeTag } from '../../src/drivers/runtime/local/index.js';
import { openStore } from '../../src/db/connect.js';
import type { Row } from '../../src/db/snapshot.js';
import { createRepository } from '../helpers/git-server.js';
import { s3Client } from '../object-storage/helpers.js';
import { BIN, ensureBuilt } from '../cli-client/helpers.js';
import {
  serveBerth,
  stopAll,
  stopBerth,
  type BerthProcess,
  useBerthProcesses,
} from '../runtime/berth-process.js';
import {
  edgeRequest,
  eventually,
  nodeDocument,
  removeRuntimeAccounts,
  RUNTIME_TEST_ENV,
} from '../runtime/helpers.js';
import { everyTable } from '../helpers/store.js';
import { nodeAppFiles } from '../runtime/node-app.js';

const PASSPHRASE = 'correct horse battery staple';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The built `berth` CLI on `dataDir`, with `input` on its stdin. */
function berthCli(
  dataDir: string,
  args: string[],
  env: Record<string, string> = {},
  input?: string,
): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [BIN, ...args],
      {
        env: {
          ...process.env,
          ...RUNTIME_TEST_ENV,
          BERTH_RUNTIMES_DIR: inject('runtimesDir'),
          BERTH_DATA_DIR: dataDir,
          BERTH_LOG_LEVEL: 'warn',
          BERTH_LOG_FORMAT: 'json',
          ...env,
        },
        timeout: 300_000,
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error.code as number | undefined) ?? 1) : 0, stdout, stderr }),
    );
    child.stdin?.end(input ?? '');
  });
}

/** The command's JSON summary on stdout (Berth's own log lines, one JSON object each, left out). */
function summaryOf(stdout: string): unknown {
  const summary = /^\{\n[\s\S]*?\n\}$/m.exec(stdout);
  if (!summary) throw new Error(`no summary in: ${stdout}`);
  return JSON.parse(summary[0]);
}

/** Every table's rows, sorted, from the store of a data dir (SQLite). */
async function storeRows(dataDir: string): Promise<Record<string, Row[]>> {
  const store = await openStore({ sqlitePath: path.join(dataDir, 'berth.sqlite'), migrate: false });
  try {
    return await everyTable(store);
  } finally {
    await store.close();
  }
}

function tempDir(name: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `berth-backup-${name}-`));
}

describe('berth admin backup and restore', () => {
  let berth: BerthProcess | undefined;
  const { dataDir, gitRoot, git } = useBerthProcesses('backup', () => berth);
  const target = tempDir('target');
  const restoredDir = tempDir('restored');
  const scratch: string[] = [];
  afterAll(async () => {
    await stopBerth(berth, 'SIGTERM');
    await stopAll(restoredDir);
    removeRuntimeAccounts(restoredDir);
    await removeTagNetworks(runtimeTag(restoredDir));
    for (const dir of [target, restoredDir, ...scratch]) fs.rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  it('restores a backup taken under load on a fresh data dir: rows, objects, database, volume, the application serving', async () => {
    const built = ensureBuilt();
    berth = await serveBerth(dataDir);
    const call = <T>(method: string, url: string, body?: string) => berth!.call<T>(method, url, body);
    createRepository(gitRoot, 'keeper').commit(nodeAppFiles('v1'));
    const document = nodeDocument('default', 'keeper', git().url('keeper'), {
      spec: {
        managed_databases: [
          {
            name: 'keeper-db',
            type: 'pg',
            plan: '1x1xCPU-2GB-25GB',
            zone: 'de-fra1',
            users: [{ username: 'app' }],
            logical_databases: [{ name: 'shop' }],
          },
        ],
        object_storage: [
          {
            name: 'files',
            zone: 'europe-1',
            buckets: ['keeper-files'],
            users: [{ username: 'rw', policies: ['admin'] }],
          },
        ],
      },
    });
    const applied = await call<{ application_id: number; managed_databases?: Array<{ uuid?: string }> }>(
      'POST',
      '/api/v1/infrastructure/apply',
      document,
    );
    const appId = applied.application_id;
    const status = async (b: BerthProcess) =>
      (await b.call<{ data: { status: string } }>('GET', `/api/v1/applications/${appId}/status`)).data.status;
    await eventually(
      async () => (await status(berth!)) === 'active' || undefined,
      120_000,
      'the application',
    );
    const written = await edgeRequest(berth.edgePort, 'keeper.test', '/write');
    expect(written.body).toBe('written');
    // A larger volume file, written beside the application's (it is root's volume on the host).
    const big = crypto.randomBytes(4 * 1024 * 1024);
    const volumeDir = path.join(dataDir, 'apps', String(appId), 'volumes', 'data');
    fs.writeFileSync(path.join(volumeDir, 'big.bin'), big);
    // The application writes a.txt and c.txt every millisecond from now on. A backup reading a.txt,
    // then big.bin, then c.txt while it runs would find c far ahead of a: the copy must be the
    // volume at one moment (read again with the application paused).
    expect((await edgeRequest(berth.edgePort, 'keeper.test', '/churn')).body).toBe('churning');

    // The database: its uuid from the team's resources, then a row written through its connection.
    const databaseOf = async (b: BerthProcess) => {
      const listing = await b.call<{ data: Array<{ uuid: string; state: string; service_uri?: string }> }>(
        'GET',
        '/api/v1/teams/default/managed-databases',
      );
      const [db] = listing.data;
      if (!db || db.state !== 'running') return undefined;
      return b.call<{ data: { uuid: string; connection: { uri: string } } }>(
        'GET',
        `/api/v1/managed-databases/${db.uuid}`,
      );
    };
    const database = await eventually(() => databaseOf(berth!), 120_000, 'the managed database');
    const query = async (uri: string, text: string) => {
      const client = new pg.Client({ connectionString: uri.replace(/\/[^/?]+(\?|$)/, '/shop$1') });
      await client.connect();
      try {
        return (await client.query<{ note: string }>(text)).rows;
      } finally {
        await client.end();
      }
    };
    await query(
      database.data.connection.uri,
      "CREATE TABLE notes (note text); INSERT INTO notes VALUES ('before the backup')",
    );

    // An empty passphrase is refused; a backup that fails midway (its target cannot take blobs)
    // exits non-zero saying what failed, and leaves no manifest to be taken for a complete backup.
    await built;
    const refusedTarget = tempDir('refused');
    scratch.push(refusedTarget);
    const empty = await berthCli(dataDir, ['admin', 'backup', '--to', refusedTarget], {}, '\n');
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('the backup passphrase is empty');
    fs.writeFileSync(path.join(refusedTarget, 'blobs'), 'not a directory');
    const failed = await berthCli(dataDir, ['admin', 'backup', '--to', refusedTarget], {
      BERTH_BACKUP_PASSPHRASE: PASSPHRASE,
    });
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/berth: .*ENOTDIR/);
    expect(fs.existsSync(path.join(refusedTarget, 'manifest.json'))).toBe(false);

    // Objects, and a load of PUTs (new keys, and one key replaced again and again) during the backup.
    const storage = await call<{
      data: { endpoint: string; users: Array<{ access_key_id: string; secret_key: string }> };
    }>('GET', '/api/v1/teams/default/object-storage/files');
    const user = storage.data.users[0]!;
    const s3 = s3Client(storage.data.endpoint, user.access_key_id, user.secret_key);
    const bodies = new Map<string, string>();
    for (let i = 0; i < 20; i++) {
      const body = `object ${i} `.repeat(1000);
      await s3.send(new PutObjectCommand({ Bucket: 'keeper-files', Key: `before/${i}`, Body: body }));
      bodies.set(`before/${i}`, body);
    }
    let loading = true;
    let puts = 0;
    let teams = 0;
    // The API load has a credential of its own: the polls above spent the bootstrap token's budget.
    await built;
    const issued = await berthCli(dataDir, [
      'admin',
      'create-credential',
      '--email',
      'admin@berth.local',
      '--kind',
      'api_token',
      '--name',
      'load',
    ]);
    expect(issued.code, issued.stderr).toBe(0);
    const { token } = summaryOf(issued.stdout) as { token: string };
    const api = berth.api;
    const load = Promise.all([
      (async () => {
        while (loading) {
          const body = `during ${puts}`;
          await s3.send(new PutObjectCommand({ Bucket: 'keeper-files', Key: `during/${puts}`, Body: body }));
          await s3.send(new PutObjectCommand({ Bucket: 'keeper-files', Key: 'replaced', Body: body }));
          bodies.set(`during/${puts}`, body);
          puts++;
        }
      })(),
      // API writes, paced under the API's rate limit (60 a minute per credential).
      (async () => {
        while (loading) {
          const created = await fetch(`${api}/api/v1/teams`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ name: `load-${teams}` }),
          });
          expect(created.status).toBe(201);
          teams++;
          await new Promise((resolve) => setTimeout(resolve, 1100));
        }
      })(),
    ]);
    await built;
    const first = await berthCli(dataDir, ['admin', 'backup', '--to', target], {}, PASSPHRASE + '\n');
    loading = false;
    await load;
    expect(first.stderr).toContain('berth: store:');
    expect(first.stderr).toContain('berth: database');
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toMatch(
      new RegExp(`berth: volumes of application ${appId}: paused [\\d.]+ s to read again [1-9]\\d* files`),
    );
    expect(puts).toBeGreaterThan(0);
    expect(teams).toBeGreaterThan(0);
    const manifest = JSON.parse(fs.readFileSync(path.join(target, 'manifest.json'), 'utf8')) as {
      files: Array<{ path: string; kind: string; sha256?: string; size?: number }>;
      store: { tables: string[]; migration: string };
    };
    for (const file of manifest.files.filter((f) => f.kind === 'file'))
      expect(fs.statSync(path.join(target, 'blobs', file.sha256!.slice(0, 2), file.sha256!)).size).toBe(
        file.size,
      );
    const blobOf = (name: string) => {
      const entry = manifest.files.find((f) => f.path === `data/apps/${appId}/volumes/data/${name}`)!;
      return Number(
        fs.readFileSync(path.join(target, 'blobs', entry.sha256!.slice(0, 2), entry.sha256!), 'utf8'),
      );
    };
    const [a, c] = [blobOf('a.txt'), blobOf('c.txt')];
    expect(a).toBeGreaterThan(0);
    expect([a, a - 1]).toContain(c);
    // Paused only for the copy: the application writes on.
    const live = () => Number(fs.readFileSync(path.join(volumeDir, 'a.txt'), 'utf8'));
    const after = live();
    await eventually(
      () => Promise.resolve(live() > after ? true : undefined),
      10_000,
      'the application writing again',
    );
    expect((await edgeRequest(berth.edgePort, 'keeper.test', '/churn-stop')).body).toBe('stopped');
    const firstStats = summaryOf(first.stdout) as {
      files: number;
      bytes: number;
      copied_files: number;
      copied_bytes: number;
    };

    // A second backup to the same place copies only what changed.
    const second = await berthCli(dataDir, ['admin', 'backup', '--to', target], {
      BERTH_BACKUP_PASSPHRASE: PASSPHRASE,
    });
    expect(second.code, second.stderr).toBe(0);
    const secondStats = summaryOf(second.stdout) as typeof firstStats;
    expect(secondStats.files).toBeGreaterThanOrEqual(firstStats.files);
    expect(secondStats.copied_files).toBeLessThan(secondStats.files);
    expect(secondStats.copied_bytes).toBeLessThan(secondStats.bytes / 4);

    // The state the restore must give back: the source's rows as the second backup read them, and
    // the source's objects, with nothing written meanwhile (Berth is stopped next).
    await stopBerth(berth, 'SIGTERM');
    berth = undefined;
    await stopAll(dataDir);
    const sourceRows = await storeRows(dataDir);

    // A wrong passphrase is refused, saying so; nothing is written.
    const wrongDir = tempDir('wrong');
    scratch.push(wrongDir);
    const wrong = await berthCli(wrongDir, ['admin', 'restore', '--from', target], {
      BERTH_BACKUP_PASSPHRASE: 'not it',
    });
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toContain('wrong passphrase');
    expect(fs.existsSync(path.join(wrongDir, 'berth.sqlite'))).toBe(false);

    const restore = await berthCli(restoredDir, ['admin', 'restore', '--from', target], {}, PASSPHRASE);
    expect(restore.stderr).toContain('verified:');
    expect(restore.code, restore.stderr).toBe(0);
    const restoredRows = await storeRows(restoredDir);
    expect(Object.keys(restoredRows).sort()).toEqual(Object.keys(sourceRows).sort());
    // Every table as the source left it, but what the restore's provisioning of the database wrote:
    // its instance row (the new machine's port, pid and files), its state's timestamps, the team's
    // revision those writes raised, and the jobs provisioning queues.
    const provisioned = ['managed_instances', 'managed_databases', 'team_revisions', 'jobs'];
    const differing = Object.keys(sourceRows).filter(
      (table) => JSON.stringify(sourceRows[table]) !== JSON.stringify(restoredRows[table]),
    );
    expect(differing.filter((t) => !provisioned.includes(t))).toEqual([]);
    // Those tables hold the same rows (by id) nonetheless.
    const idsOf = (rows: Row[]) => rows.map((r) => String(r.id ?? r.team_id)).sort();
    for (const table of ['managed_instances', 'managed_databases', 'team_revisions'])
      expect(idsOf(restoredRows[table]!)).toEqual(idsOf(sourceRows[table]!));
    // The teams the API load made during the backup are there, as far as the snapshot saw them.
    expect(restoredRows.teams!.filter((r) => String(r.name).startsWith('load-')).length).toBeGreaterThan(0);

    berth = await serveBerth(restoredDir);
    const restored = berth;
    await eventually(
      async () => (await status(restored)) === 'active' || undefined,
      120_000,
      'the restored application',
    );
    const answer = await eventually(
      async () => {
        const a = await edgeRequest(restored.edgePort, 'keeper.test', '/');
        return a.status === 200 ? a : undefined;
      },
      60_000,
      'the restored application to serve',
    );
    expect(JSON.parse(answer.body)).toMatchObject({ version: 'v1', secret: 'secret-of-keeper' });
    const volumeFile = fs.readdirSync(path.join(restoredDir, 'apps'));
    expect(volumeFile).toContain(String(appId));
    expect(
      fs.readFileSync(path.join(restoredDir, 'apps', String(appId), 'volumes', 'data', 'note.txt'), 'utf8'),
    ).toBe('written by v1');
    expect(
      fs
        .readFileSync(path.join(restoredDir, 'apps', String(appId), 'volumes', 'data', 'big.bin'))
        .equals(big),
    ).toBe(true);
    const restoredDb = await eventually(() => databaseOf(restored), 120_000, 'the restored database');
    expect(restoredDb.data.uuid).toBe(database.data.uuid);
    expect(await query(restoredDb.data.connection.uri, 'SELECT note FROM notes')).toEqual([
      { note: 'before the backup' },
    ]);
    const restoredStorage = await restored.call<{
      data: { endpoint: string; users: Array<{ access_key_id: string; secret_key: string }> };
    }>('GET', '/api/v1/teams/default/object-storage/files');
    expect(restoredStorage.data.users[0]!.secret_key).toBe(user.secret_key);
    const s3b = s3Client(restoredStorage.data.endpoint, user.access_key_id, user.secret_key);
    const listed = await s3b.send(new ListObjectsV2Command({ Bucket: 'keeper-files', MaxKeys: 1000 }));
    const keys = (listed.Contents ?? []).map((o) => o.Key!);
    for (let i = 0; i < 20; i++) expect(keys).toContain(`before/${i}`);
    for (const key of keys) {
      const got = await s3b.send(new GetObjectCommand({ Bucket: 'keeper-files', Key: key }));
      const text = await got.Body!.transformToString();
      if (key === 'replaced') expect(text).toMatch(/^during \d+$/);
      else expect(text).toBe(bodies.get(key));
    }

    // An altered file is refused, named, before anything is restored.
    const volumeEntry = manifest.files.find((f) => f.path === `data/apps/${appId}/volumes/data/note.txt`)!;
    const blob = path.join(target, 'blobs', volumeEntry.sha256!.slice(0, 2), volumeEntry.sha256!);
    fs.writeFileSync(blob, 'written by someone else');
    const tamperedDir = tempDir('tampered');
    scratch.push(tamperedDir);
    const tampered = await berthCli(tamperedDir, ['admin', 'restore', '--from', target], {
      BERTH_BACKUP_PASSPHRASE: PASSPHRASE,
    });
    expect(tampered.code).not.toBe(0);
    expect(tampered.stderr).toContain(`data/apps/${appId}/volumes/data/note.txt: its bytes do not match`);
    expect(fs.existsSync(path.join(tamperedDir, 'berth.sqlite'))).toBe(false);

    // To an object-storage URL: the restored Berth backs itself up into its own bucket, and that
    // backup restores (its manifest and blobs read back over S3).
    const s3Settings = {
      BERTH_S3_UPSTREAM_URL: restoredStorage.data.endpoint,
      BERTH_S3_UPSTREAM_ACCESS_KEY_ID: user.access_key_id,
      BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY: user.secret_key,
      BERTH_BACKUP_PASSPHRASE: PASSPHRASE,
    };
    const toBucket = await berthCli(
      restoredDir,
      ['admin', 'backup', '--to', 's3://keeper-files/backups/one'],
      s3Settings,
    );
    expect(toBucket.stderr).toContain('done:');
    expect(toBucket.code, toBucket.stderr).toBe(0);
    const bucketManifest = await s3b.send(
      new GetObjectCommand({ Bucket: 'keeper-files', Key: 'backups/one/manifest.json' }),
    );
    expect(JSON.parse(await bucketManifest.Body!.transformToString())).toMatchObject({
      store: { migration: manifest.store.migration },
    });
    const fromBucketDir = tempDir('from-bucket');
    scratch.push(fromBucketDir);
    const fromBucket = await berthCli(
      fromBucketDir,
      ['admin', 'restore', '--from', 's3://keeper-files/backups/one'],
      s3Settings,
    );
    await stopAll(fromBucketDir);
    expect(fromBucket.stderr).toContain(`database ${database.data.uuid}: restored`);
    expect(fromBucket.code, fromBucket.stderr).toBe(0);
    expect((await storeRows(fromBucketDir)).users).toEqual(restoredRows.users);
  }, 600_000);
});
