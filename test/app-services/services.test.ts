// Application services on real engines (issue 15): a nodejs application with a postgresql service
// (with an extension) and a redis service reads and writes through each using only the environment
// Berth injects, checked through the edge; apply refuses versions and extensions the engines cannot
// provide; the services API with its 403s and 404s; another application cannot connect with its own
// credentials and its own secrets win over injected names; a killed server comes back with its data;
// deleting the application removes the services' processes and data.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { isAlive } from '../../src/drivers/databases/local/process.js';
import { detectCgroups, groupDir } from '../../src/drivers/os/cgroups.js';
import { isMounted } from '../../src/drivers/os/disk-images.js';
import { networksAvailable, vethName } from '../../src/drivers/os/netns.js';
import { runtimeTag } from '../../src/drivers/runtime/local/index.js';
import { findAccount, isRoot } from '../../src/drivers/os/users.js';
import { DIALECTS } from '../helpers/store.js';
import {
  applyYaml,
  edgeRequest,
  eventually,
  startRuntime,
  waitForDeployment,
  type RuntimeHarness,
} from '../runtime/helpers.js';
import { serviceAppFiles } from './service-app.js';
import { data } from './helpers.js';

interface ServiceView {
  id: number;
  name: string;
  type: string;
  status: string;
  status_reason: string | null;
  engine_version: string | null;
  port: number | null;
  restarts: number;
}

function document(
  name: string,
  repositoryUrl: string,
  services: unknown[],
  secrets: Array<{ key: string; value: string }> = [],
): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team: 'acme' },
    spec: {
      application: {
        name,
        type: 'nodejs',
        repository: { url: repositoryUrl, branch: 'main' },
        commands: { build: ['node build.js'], init: ['node init.js'], start: 'npm start' },
        settings: { health_check_path: '/health', replicas: 1, memory: '256Mi' },
      },
      domains: [{ domain: `${name}.test` }],
      secrets: [{ key: 'APP_SECRET', value: `secret-of-${name}` }, ...secrets],
      volumes: [{ name: 'data', mount_path: '/data', volume_size: 1 }],
      services,
    },
  });
}

const SHOP_SERVICES = [
  {
    name: 'db',
    type: 'postgresql',
    version: '15',
    memory: '128Mi',
    volume_size: '1Gi',
    settings: { database: 'shop', extensions: ['citext', 'pg_trgm'] },
  },
  { name: 'cache', type: 'redis', memory: '64Mi' },
];

/** One RESP exchange from the test itself: the replies to AUTH and the commands. */
function resp(port: number, commands: string[][]): Promise<string[]> {
  const encode = (args: string[]) =>
    `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let buffer = '';
    socket.setEncoding('latin1');
    socket.on('error', reject);
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      const lines = buffer.split('\r\n').filter((l) => l !== '');
      // Simple replies only (+OK, -ERR, $n value): enough for AUTH and GET here.
      const replies: string[] = [];
      for (let i = 0; i < lines.length; i += 1) {
        const line = lines[i] as string;
        if (line.startsWith('$') && line !== '$-1') {
          replies.push(lines[i + 1] ?? '');
          i += 1;
        } else replies.push(line);
      }
      if (replies.length >= commands.length) {
        socket.end();
        resolve(replies);
      }
    });
    socket.write(commands.map(encode).join(''));
  });
}

/** The address of the host end of an application's veth (its services are reached there). */
function networkHostOf(h: RuntimeHarness, appId: number): string {
  const veth = vethName(runtimeTag(h.t.ctx.config.dataDir), appId);
  const [link] = JSON.parse(
    execFileSync('ip', ['-j', '-4', 'addr', 'show', 'dev', veth], { encoding: 'utf8' }),
  ) as Array<{ addr_info: Array<{ local: string }> }>;
  return link!.addr_info[0]!.local;
}

describe.each(DIALECTS)('application services (%s)', (dialect) => {
  let h: RuntimeHarness;
  let shopId: number;
  let repositoryUrl: string;

  const api = (method: string, url: string, payload?: unknown, headers = h.t.auth.platform) =>
    h.t.request({
      method: method,
      url,
      headers,
      ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}),
    });
  const services = async (appId: number) =>
    data<ServiceView[]>(await api('GET', `/api/v1/applications/${appId}/services`));
  const environment = async (appId: number, service: string) =>
    Object.fromEntries(
      data<Array<{ key: string; value: string }>>(
        await api('GET', `/api/v1/applications/${appId}/services/${service}/environment`),
      ).map((e) => [e.key, e.value]),
    );

  beforeAll(async () => {
    // The runtime suites' 15 s deadline is sized for a build and a rollout; these deployments also
    // provision database servers (the deadline itself is tested in test/runtime/applications.test.ts).
    h = await startRuntime(dialect, { BERTH_DEPLOYMENT_TIMEOUT: '60' });
    // The engine templates a serving Berth builds at start (once per data dir), as the Node.js runtime
    // is downloaded once: no deployment's deadline pays for initdb.
    await h.t.ctx.services.managedDatabases.driver.warmUp?.();
    h.repository('svc').commit(serviceAppFiles());
    repositoryUrl = h.git.url('svc');
  }, 180_000);
  afterAll(() => h?.close());

  it('refuses at apply (dry run too) a version, extension or database name the engines cannot provide, naming what is available', async () => {
    const attempt = async (service: Record<string, unknown>, query: string) => {
      const response = await h.t.request({
        method: 'POST',
        url: `/api/v1/infrastructure/apply${query}`,
        headers: { ...h.t.auth.platform, 'content-type': 'application/yaml' },
        payload: document('refused', repositoryUrl, [service]),
      });
      expect(response.statusCode).toBe(422);
      return response.json<{ errors: Record<string, string[]> }>().errors;
    };
    for (const query of ['?dry_run=true', '']) {
      const version = await attempt({ name: 'db', type: 'postgresql', version: '9.6' }, query);
      expect(version['spec.services.db.version']?.[0]).toMatch(
        /version 9\.6 is not available here; available: latest, 15\b/,
      );
      const extension = await attempt(
        { name: 'db', type: 'postgresql', settings: { extensions: ['citext', 'postgis'] } },
        query,
      );
      const message = extension['spec.services.db.settings.extensions']?.[0] ?? '';
      expect(message).toMatch(/extension postgis not installable here; available: .*\bcitext\b/);
      expect(message).toContain('pg_trgm');
      // Extensions that reach the server's files are never offered.
      expect(message).not.toMatch(/\b(adminpack|file_fdw)\b/);
      const mysql = await attempt({ name: 'db', type: 'mysql', version: '8.0' }, query);
      expect(mysql['spec.services.db.version']?.[0]).toMatch(/available: latest, 10\.\d+/);
      const redis = await attempt({ name: 'cache', type: 'redis', version: '5' }, query);
      expect(redis['spec.services.cache.version']?.[0]).toMatch(/available: latest, 7, 7\.\d+/);
      const database = await attempt(
        { name: 'db', type: 'postgresql', settings: { database: 'template1' } },
        query,
      );
      expect(database['spec.services.db.settings.database']?.[0]).toMatch(/cannot be used/);
    }
    // Nothing was stored.
    const apps = data<Array<{ name: string }>>(await api('GET', '/api/v1/applications'));
    expect(apps.map((a) => a.name)).not.toContain('refused');
  });

  it('runs the services before the release, and the application reads and writes through each with only the injected environment', async () => {
    // Secrets may reference what a service gives (docs/services.md): resolved at each release.
    const references = [
      { key: 'PG_HOST', value: '${services.db.host}' },
      { key: 'PG_PASSWORD', value: '${services.db.password}' },
      {
        key: 'PG_COMPOSED',
        value: '${services.db.user}@${services.db.host}:${services.db.port}/${services.db.database}',
      },
    ];
    const applied = await applyYaml(h.t, document('shop', repositoryUrl, SHOP_SERVICES, references));
    shopId = applied.application_id;
    const deployment = await waitForDeployment(h.t, shopId, applied.deployment_id!, 90_000);
    expect(deployment.error).toBeNull();
    expect(deployment.status).toBe('success');

    // Through the edge: the application wrote and read back through PostgreSQL (citext makes the
    // upper-cased lookup find the row) and through Redis.
    const answer = await edgeRequest(h.edgePort, 'shop.test', '/roundtrip?value=hello');
    expect(answer.status).toBe(200);
    const body = JSON.parse(answer.body) as {
      pg: { body: string | null; user: string; database: string };
      redis: { auth: string; set: string; got: string };
    };
    expect(body.pg).toEqual({ body: 'hello', user: 'app', database: 'shop' });
    expect(body.redis).toEqual({ auth: 'OK', set: 'OK', got: 'hello' });

    // The init command had the services too (it found the extension before any replica started).
    const env = JSON.parse((await edgeRequest(h.edgePort, 'shop.test', '/env')).body) as {
      keys: string[];
      initRan: string | null;
    };
    expect(env.initRan).toBe('citext:1');
    expect(env.keys).toEqual(expect.arrayContaining(['DATABASE_URL', 'REDIS_URL', 'APP_SECRET']));
    // A nodejs application gets the URL forms only (the DB_* names are laravel's).
    expect(env.keys).not.toContain('DB_HOST');
    expect(env.keys).not.toContain('REDIS_HOST');

    // So does a one-off command.
    const injected = await environment(shopId, 'db');
    const dbUrl = new URL(injected.DATABASE_URL as string);
    const exec = data<{ exit_code: number; output: string }>(
      await api('POST', `/api/v1/applications/${shopId}/exec`, {
        command: 'printenv DATABASE_URL | cut -d@ -f2',
      }),
    );
    expect(exec.exit_code).toBe(0);
    // The host end of the application's own network as root (docs/runtime.md, "Networks"), else loopback.
    expect(dbUrl.hostname).toBe(networksAvailable() ? networkHostOf(h, shopId) : '127.0.0.1');
    expect(exec.output.trim()).toBe(`${dbUrl.hostname}:${dbUrl.port}/shop`);
    // The secrets' service references reached the process resolved; the store keeps only their text.
    const resolved = data<{ exit_code: number; output: string }>(
      await api('POST', `/api/v1/applications/${shopId}/exec`, {
        command: 'printenv PG_HOST PG_PASSWORD PG_COMPOSED',
      }),
    );
    expect(resolved.output.trim().split('\n')).toEqual([
      dbUrl.hostname,
      decodeURIComponent(dbUrl.password),
      `app@${dbUrl.hostname}:${dbUrl.port}/shop`,
    ]);
    const secretRows = await h.t.ctx.db
      .selectFrom('secrets')
      .selectAll()
      .where('application_id', '=', shopId)
      .execute();
    expect(secretRows.map((r) => r.key)).toEqual(expect.arrayContaining(['PG_PASSWORD']));
    expect(JSON.stringify(secretRows)).not.toContain(decodeURIComponent(dbUrl.password));

    // The service's memory sizes the engine: 128Mi gives PostgreSQL 32MB of shared buffers.
    const client = new pg.Client({ connectionString: injected.DATABASE_URL });
    await client.connect();
    try {
      expect(
        (await client.query<{ shared_buffers: string }>('SHOW shared_buffers')).rows[0]?.shared_buffers,
      ).toBe('32MB');
      // The application's user is not a superuser of its own instance.
      const role = await client.query<{ rolsuper: boolean }>(
        'SELECT rolsuper FROM pg_roles WHERE rolname = current_user',
      );
      expect(role.rows[0]?.rolsuper).toBe(false);
    } finally {
      await client.end();
    }

    // Its memory and volume_size are limits (test/managed-databases/service-limits.test.ts fills one):
    // its files are on a volume of 1Gi, its server in a memory group of 128Mi.
    const db = (await h.t.ctx.db
      .selectFrom('app_service_instances')
      .selectAll()
      .where('application_id', '=', shopId)
      .where('engine', '=', 'pg')
      .executeTakeFirst())!;
    expect(db.applied_sizing).toBe('128MiB+1Gi');
    if (isRoot()) {
      expect(isMounted(db.data_dir!)).toBe(true);
      const volume = fs.statfsSync(db.data_dir!);
      expect(volume.blocks * volume.bsize).toBeGreaterThan(0.9 * 1024 ** 3);
      expect(volume.blocks * volume.bsize).toBeLessThanOrEqual(1024 ** 3);
      const cgroups = detectCgroups();
      if (cgroups) {
        const group = groupDir(cgroups, ['databases', db.uuid]);
        expect(fs.readFileSync(`${group}/cgroup.procs`, 'utf8').split('\n')).toContain(String(db.pid));
      }
    }

    // The passwords are in no log and no file of the release.
    const password = decodeURIComponent(dbUrl.password);
    const redisPassword = decodeURIComponent(
      new URL((await environment(shopId, 'cache')).REDIS_URL as string).password,
    );
    const deploymentLog = data<Array<{ line: string }>>(
      await api('GET', `/api/v1/applications/${shopId}/deployments/${applied.deployment_id}/logs`),
    )
      .map((l) => l.line)
      .join('\n');
    expect(deploymentLog).toMatch(/Service db \(postgresql 15\.\d+\) is running/);
    expect(deploymentLog).toMatch(/Service cache \(redis 7\.\d+\.\d+\) is running/);
    const appLog = data<Array<{ line: string }>>(
      await api('GET', `/api/v1/applications/${shopId}/logs?tail=1000`),
    )
      .map((l) => l.line)
      .join('\n');
    for (const secret of [password, redisPassword]) {
      expect(secret.length).toBeGreaterThan(20);
      expect(deploymentLog).not.toContain(secret);
      expect(appLog).not.toContain(secret);
      expect(grepTree(`${h.t.ctx.config.dataDir}/apps/${shopId}`, secret)).toEqual([]);
    }
    // Sealed at rest: the store holds no password in clear.
    const rows = await h.t.ctx.db.selectFrom('app_service_instances').selectAll().execute();
    expect(JSON.stringify(rows)).not.toContain(password);
  }, 120_000);

  it('answers the services API: states, environment, connection formats, restart, logs, injected names masked; 404 and 403', async () => {
    const list = await services(shopId);
    expect(list.map((s) => [s.name, s.type, s.status])).toEqual([
      ['db', 'postgresql', 'running'],
      ['cache', 'redis', 'running'],
    ]);
    const db = list[0]!;
    expect(db.engine_version).toMatch(/^15\.\d+$/);

    const env = await environment(shopId, 'db');
    expect(Object.keys(env)).toEqual(['DATABASE_URL']);
    // Where the application reaches it: its network's host end as root, else loopback.
    const host = (networksAvailable() ? networkHostOf(h, shopId) : '127.0.0.1').replaceAll('.', '\\.');
    expect(env.DATABASE_URL).toMatch(new RegExp(`^postgresql://app:[^@]+@${host}:${db.port}/shop$`));
    // By id as Ploi names it, or by name.
    expect(await environment(shopId, String(db.id))).toEqual(env);

    const formats = data<Array<{ name: string; value: string }>>(
      await api('GET', `/api/v1/applications/${shopId}/services/db/connection-formats`),
    );
    expect(formats.map((f) => f.name)).toEqual(['url', 'jdbc', 'cli']);
    expect(formats[0]?.value).toBe(env.DATABASE_URL);
    expect(formats[1]?.value).toMatch(
      new RegExp(`^jdbc:postgresql://${host}:${db.port}/shop\\?user=app&password=`),
    );

    const injected = data<Array<{ key: string; value: string; service: string; overridden: boolean }>>(
      await api('GET', `/api/v1/applications/${shopId}/secrets/injected`),
    );
    expect(injected).toEqual([
      { key: 'DATABASE_URL', value: '********', service: 'db', overridden: false },
      { key: 'REDIS_URL', value: '********', service: 'cache', overridden: false },
    ]);

    // Restart: a new server process, the same data and port.
    const pidBefore = (
      await h.t.ctx.db
        .selectFrom('app_service_instances')
        .select('pid')
        .where('service_id', '=', db.id)
        .executeTakeFirstOrThrow()
    ).pid;
    const restarted = await api('POST', `/api/v1/applications/${shopId}/services/db/restart`);
    expect(restarted.statusCode).toBe(200);
    expect(data<ServiceView>(restarted)).toMatchObject({ name: 'db', status: 'running', port: db.port });
    const pidAfter = (
      await h.t.ctx.db
        .selectFrom('app_service_instances')
        .select('pid')
        .where('service_id', '=', db.id)
        .executeTakeFirstOrThrow()
    ).pid;
    expect(pidAfter).not.toBe(pidBefore);
    expect(isAlive(pidBefore)).toBe(false);
    const again = JSON.parse((await edgeRequest(h.edgePort, 'shop.test', '/roundtrip?value=again')).body) as {
      pg: { body: string };
    };
    expect(again.pg.body).toBe('again');

    const logs = data<Array<{ line: string }>>(
      await api('GET', `/api/v1/applications/${shopId}/services/db/logs?tail=50`),
    );
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.length).toBeLessThanOrEqual(50);
    expect(logs.map((l) => l.line).join('\n')).toMatch(/database system is ready to accept connections/);

    // Unknown service, unknown application: 404; another team: 403 on every route.
    expect((await api('GET', `/api/v1/applications/${shopId}/services/nope/environment`)).statusCode).toBe(
      404,
    );
    expect((await api('GET', `/api/v1/applications/999999/services`)).statusCode).toBe(404);
    const other = await h.t.ctx.identity.createUser({
      email: `svc-other-${dialect}@example.com`,
      team: 'other',
    });
    const otherAuth = { authorization: `Bearer ${other.api_token}` };
    for (const [method, path] of [
      ['GET', 'services'],
      ['GET', 'secrets/injected'],
      ['GET', 'services/db/environment'],
      ['GET', 'services/db/connection-formats'],
      ['POST', 'services/db/restart'],
      ['GET', 'services/db/logs'],
    ] as const) {
      const response = await api(method, `/api/v1/applications/${shopId}/${path}`, undefined, otherAuth);
      expect(response.statusCode, `${method} ${path}`).toBe(403);
      expect(response.body).not.toContain('postgresql://');
    }
  }, 60_000);

  it('keeps another application out with its own credentials, and its own secrets win over injected names', async () => {
    const applied = await applyYaml(
      h.t,
      document(
        'other',
        repositoryUrl,
        [
          { name: 'db', type: 'postgresql' },
          { name: 'cache', type: 'valkey' },
        ],
        [{ key: 'REDIS_URL', value: 'redis://from-secret:1/' }],
      ),
    );
    const otherId = applied.application_id;
    const deployment = await waitForDeployment(h.t, otherId, applied.deployment_id!, 90_000);
    expect(deployment.error).toBeNull();

    const shop = await services(shopId);
    const shopDb = shop.find((s) => s.name === 'db')!;
    const shopCache = shop.find((s) => s.name === 'cache')!;
    const own = (await services(otherId)).find((s) => s.name === 'db')!;
    expect(own.port).not.toBe(shopDb.port);

    // From inside the other application's sandbox, with the credentials it was given.
    const probe = async (port: number) =>
      (
        JSON.parse((await edgeRequest(h.edgePort, 'other.test', `/probe?port=${port}`)).body) as {
          result: string;
        }
      ).result;
    expect(await probe(own.port!)).toBe('connected');
    // As root the other application's network does not even reach the shop's server
    // (test/runtime/network.test.ts); without root its credentials are all that keep it out.
    expect(await probe(shopDb.port!)).toMatch(
      networksAvailable()
        ? /^refused: connect ECONNREFUSED /
        : /^refused: password authentication failed for user "app"/,
    );

    // Its key-value credentials do not open the shop's Redis either.
    const otherCache = new URL((await environment(otherId, 'cache')).REDIS_URL as string);
    const replies = await resp(shopCache.port!, [
      ['AUTH', 'app', decodeURIComponent(otherCache.password)],
      ['GET', 'note'],
    ]);
    expect(replies[0]).toMatch(/^-WRONGPASS/);
    expect(replies[1]).toMatch(/^-NOAUTH/);

    // The application's secret REDIS_URL wins over the one its valkey service injects.
    const env = JSON.parse((await edgeRequest(h.edgePort, 'other.test', '/env')).body) as {
      redisUrl: string;
    };
    expect(env.redisUrl).toBe('redis://from-secret:1/');
    const injected = data<Array<{ key: string; overridden: boolean }>>(
      await api('GET', `/api/v1/applications/${otherId}/secrets/injected`),
    );
    expect(injected).toEqual([
      expect.objectContaining({ key: 'DATABASE_URL', overridden: false }),
      expect.objectContaining({ key: 'REDIS_URL', overridden: true }),
    ]);
  }, 120_000);

  it('starts a killed service server again, with its data', async () => {
    const cache = (await services(shopId)).find((s) => s.name === 'cache')!;
    const { pid } = await h.t.ctx.db
      .selectFrom('app_service_instances')
      .select('pid')
      .where('service_id', '=', cache.id)
      .executeTakeFirstOrThrow();
    process.kill(pid!, 'SIGKILL');
    const back = await eventually(
      async () => {
        const now = (await services(shopId)).find((s) => s.name === 'cache');
        return now?.status === 'running' && now.restarts === 1 ? now : undefined;
      },
      20_000,
      'the redis service to be restarted',
    );
    expect(back.port).toBe(cache.port);
    const read = JSON.parse((await edgeRequest(h.edgePort, 'shop.test', '/redis')).body) as { got: string };
    expect(read.got).toBe('again');
  }, 30_000);

  it("removes the services' processes and data with the application", async () => {
    const instances = await h.t.ctx.db
      .selectFrom('app_service_instances')
      .selectAll()
      .where('application_id', '=', shopId)
      .execute();
    expect(instances).toHaveLength(2);
    for (const instance of instances) {
      expect(isAlive(instance.pid)).toBe(true);
      expect(fs.existsSync(instance.data_dir!)).toBe(true);
    }
    const deleted = await api('DELETE', `/api/v1/applications/${shopId}`);
    expect(deleted.statusCode).toBe(202);
    await eventually(
      async () => (await api('GET', `/api/v1/applications/${shopId}`)).statusCode === 404 || undefined,
      30_000,
      'the application to be deleted',
    );
    for (const instance of instances) {
      expect(isAlive(instance.pid)).toBe(false);
      expect(isMounted(instance.data_dir!)).toBe(false);
      expect(fs.existsSync(instance.data_dir!)).toBe(false);
      expect(fs.existsSync(`${path.dirname(instance.data_dir!)}/.volumes/${instance.uuid}.ext4`)).toBe(false);
      // Its OS account went too (a later account may get its uid, and nothing is left to own).
      if (isRoot())
        expect(findAccount(`berth-db-${instance.uuid.replace(/-/g, '').slice(0, 20)}`)).toBeUndefined();
    }
    const left = await h.t.ctx.db
      .selectFrom('app_service_instances')
      .select('id')
      .where('application_id', '=', shopId)
      .execute();
    expect(left).toEqual([]);
    // The other application's services are untouched.
    const other = await h.t.ctx.db.selectFrom('app_service_instances').selectAll().execute();
    expect(other).toHaveLength(2);
    for (const instance of other) expect(isAlive(instance.pid)).toBe(true);
  }, 60_000);
});

/** Files under `dir` whose content holds `needle`. */
function grepTree(dir: string, needle: string): string[] {
  const found: string[] = [];
  const walk = (at: string) => {
    for (const entry of fs.readdirSync(at, { withFileTypes: true })) {
      const full = `${at}/${entry.name}`;
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile() && fs.readFileSync(full).includes(needle)) found.push(full);
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return found;
}
