// The operator's metrics (issue 31, item 1): GET /metrics on BERTH_METRICS_ADDR's own listener, read with a
// Prometheus text parser, after what an operator watches: a deployment that succeeds and one whose build
// fails, traffic through the edge, a replica whose health check stops answering (restarted), and an
// S3 PUT. The API port never serves /metrics, the metrics listener never serves the API, and without the
// setting there is no listener at all.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import parsePrometheusTextFormat, { type PrometheusFamily } from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceRunner, ServiceRuntime } from '../../src/drivers/services/types.js';
import { startBackground } from '../../src/lifecycle.js';
import { createTestApp } from '../helpers/app.js';
import { stubDatabaseDriver, stubRuntimeDriver, stubServiceRunner } from '../helpers/stub-drivers.js';
import { apply, fullDocument } from '../infrastructure/helpers.js';
import { makePdf, multipart } from '../tools/helpers.js';
import { DIALECTS } from '../helpers/store.js';
import { adminStorage } from '../object-storage/helpers.js';
import {
  applyYaml,
  edgeRequest,
  eventually,
  nodeDocument,
  startRuntime,
  waitForDeployment,
  type RuntimeHarness,
} from '../runtime/helpers.js';
import { nodeAppFiles } from '../runtime/node-app.js';

/** A plain GET (no keep-alive), its status, content type and body. */
function get(url: string): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { agent: false }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          type: response.headers['content-type'] ?? '',
          body: Buffer.concat(chunks).toString(),
        }),
      );
      response.on('error', reject);
    });
    request.on('error', reject);
  });
}

/** One series' samples, parsed from the exposition text. */
type Series = PrometheusFamily['metrics'];

interface Scrape {
  families: Map<string, PrometheusFamily>;
  /**
   * One labelled histogram's buckets, count and sum. The parser flattens a histogram's samples into one
   * (it reads unlabelled histograms only), so it is given the lines of that label set, labels removed.
   */
  histogram(name: string, labels: Record<string, string>): PrometheusFamily['metrics'][number] | undefined;
}

async function scrape(url: string): Promise<Scrape> {
  const answer = await get(url);
  expect(answer.status).toBe(200);
  expect(answer.type).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = answer.body;
  return {
    families: new Map(parsePrometheusTextFormat(text).map((family) => [family.name, family])),
    histogram(name, labels) {
      const pairs = Object.entries(labels).map(([key, value]) => `${key}=${JSON.stringify(value)}`);
      const lines = text.split('\n').flatMap((line) => {
        if (line === `# TYPE ${name} histogram`) return [line];
        if (!/^(\w+)\{/.test(line) || !line.startsWith(`${name}_`)) return [];
        if (!pairs.every((pair) => line.includes(pair))) return [];
        // Only this label set's lines: strip its labels, keep `le`.
        let kept = line;
        for (const pair of pairs) kept = kept.replace(pair, '');
        return [kept.replace(/\{,*/, '{').replace(/,*\}/, '}').replace(/,,+/g, ',').replace('{}', '')];
      });
      return parsePrometheusTextFormat(`${lines.join('\n')}\n`)[0]?.metrics[0];
    },
  };
}

/** The value of the sample whose labels include `labels`, or undefined. */
function valueOf(series: Series | undefined, labels: Record<string, string>): number | undefined {
  const sample = (series ?? []).find((s) =>
    Object.entries(labels).every(([key, value]) => s.labels?.[key] === value),
  );
  return sample?.value === undefined ? undefined : Number(sample.value);
}

describe.each(DIALECTS)('metrics (%s)', (dialect) => {
  let h: RuntimeHarness;
  let metricsUrl: string;

  beforeAll(async () => {
    h = await startRuntime(dialect, { BERTH_METRICS_ADDR: '127.0.0.1:0' });
    metricsUrl = h.background.endpoints.metrics!;
  }, 120_000);
  afterAll(() => h?.close());

  it('shows a deployment, a failed build, edge traffic, a failing health check and an S3 PUT', async () => {
    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    h.repository('shop').commit(nodeAppFiles('v1'));
    const applied = await applyYaml(h.t, nodeDocument('acme', 'shop', h.git.url('shop')));
    const appId = applied.application_id;
    const deployed = await waitForDeployment(h.t, appId, applied.deployment_id!);
    expect(deployed.status).toBe('success');
    const app = { app: String(appId), name: 'shop', team: 'acme' };

    // A build that fails: a second outcome of deployments.
    h.repository('broken').commit({
      ...nodeAppFiles('v1'),
      'build.js': "console.error('the build breaks'); process.exit(1);",
    });
    const broken = await applyYaml(h.t, nodeDocument('acme', 'broken', h.git.url('broken')));
    expect((await waitForDeployment(h.t, broken.application_id, broken.deployment_id!)).status).toBe(
      'failed',
    );

    for (let i = 0; i < 3; i += 1) expect((await edgeRequest(h.edgePort, 'shop.test', '/')).status).toBe(200);
    // The health path stops answering: the replica is restarted after the failed checks.
    expect((await edgeRequest(h.edgePort, 'shop.test', '/hang')).body).toBe('hanging');
    await eventually(
      async () => {
        const instances = (
          await h.t.request({ url: `/api/v1/applications/${appId}/instances`, headers: h.t.auth.platform })
        ).json<{ data: Array<{ name: string; state: string; restarts: number }> }>().data;
        return instances.some((i) => i.name.startsWith('web-') && i.restarts >= 1 && i.state === 'running');
      },
      30_000,
      'the hung replica to be restarted',
    );

    const s3 = await adminStorage(h.t.ctx, h.t.user.team_id, h.background.endpoints.s3, 'photos');
    const body = Buffer.alloc(64 * 1024, 7);
    await s3.send(new PutObjectCommand({ Bucket: 'photos', Key: 'cat.jpg', Body: body }));
    s3.destroy();

    const scraped = await scrape(metricsUrl);
    const { families } = scraped;
    const series = (name: string, type: PrometheusFamily['type']) => {
      const family = families.get(name);
      expect(family?.type, name).toBe(type);
      return family!.metrics;
    };

    // API requests by route pattern, never the URL with its ids.
    const api = series('berth_http_requests_total', 'COUNTER');
    expect(
      valueOf(api, { method: 'GET', route: '/api/v1/applications/:id/instances', status: '200' }),
    ).toBeGreaterThanOrEqual(1);
    expect(api.some((s) => s.labels?.route?.includes(`/applications/${appId}/`))).toBe(false);
    series('berth_http_request_duration_seconds', 'HISTOGRAM');
    const applyLatency = scraped.histogram('berth_http_request_duration_seconds', {
      method: 'POST',
      route: '/api/v1/infrastructure/apply',
    });
    expect(Number(applyLatency?.count)).toBe(2);
    expect(Number(applyLatency?.buckets?.['+Inf'])).toBe(2);

    // Deployments by outcome, with their durations.
    expect(valueOf(series('berth_deployments_total', 'COUNTER'), { outcome: 'success' })).toBe(1);
    expect(valueOf(series('berth_deployments_total', 'COUNTER'), { outcome: 'failed' })).toBe(1);
    series('berth_deployment_duration_seconds', 'HISTOGRAM');
    const succeeded = scraped.histogram('berth_deployment_duration_seconds', { outcome: 'success' });
    expect(Number(succeeded?.count)).toBe(1);
    expect(Number(succeeded?.sum)).toBeGreaterThan(0);
    expect(Number(scraped.histogram('berth_deployment_duration_seconds', { outcome: 'failed' })?.count)).toBe(
      1,
    );

    // Jobs by type and outcome; the queue (empty now, so no type is due).
    const runs = series('berth_jobs_total', 'COUNTER').filter((s) => s.labels?.type === 'deployment.run');
    expect(runs.reduce((sum, s) => sum + Number(s.value), 0)).toBeGreaterThanOrEqual(2);
    expect(valueOf(runs, { outcome: 'succeeded' })).toBeGreaterThanOrEqual(1);
    expect(families.get('berth_job_queue_depth')?.type).toBe('GAUGE');

    // The application: replicas, the restart, its cgroups' memory and CPU, the edge's counts.
    expect(valueOf(series('berth_app_replicas_desired', 'GAUGE'), app)).toBe(1);
    expect(valueOf(series('berth_app_replicas_running', 'GAUGE'), app)).toBe(1);
    expect(valueOf(series('berth_app_restarts', 'GAUGE'), app)).toBeGreaterThanOrEqual(1);
    expect(valueOf(series('berth_app_memory_bytes', 'GAUGE'), app)).toBeGreaterThan(1024 * 1024);
    expect(valueOf(series('berth_app_cpu_seconds_total', 'COUNTER'), app)).toBeGreaterThan(0);
    expect(valueOf(series('berth_app_edge_requests_total', 'COUNTER'), app)).toBeGreaterThanOrEqual(4);
    expect(valueOf(series('berth_app_edge_errors_total', 'COUNTER'), app)).toBe(0);
    // The application whose only deployment failed runs nothing, and asks for its one replica.
    const brokenApp = { app: String(broken.application_id), name: 'broken', team: 'acme' };
    expect(valueOf(series('berth_app_replicas_running', 'GAUGE'), brokenApp)).toBe(0);

    // The S3 PUT: by operation and status, its body counted in.
    expect(
      valueOf(series('berth_s3_requests_total', 'COUNTER'), { operation: 'PutObject', status: '200' }),
    ).toBe(1);
    expect(
      valueOf(series('berth_s3_received_bytes_total', 'COUNTER'), { operation: 'PutObject' }),
    ).toBeGreaterThanOrEqual(body.length);
    expect(
      valueOf(series('berth_s3_sent_bytes_total', 'COUNTER'), { operation: 'PutObject' }),
    ).toBeGreaterThan(0);

    // Berth's own process, and no part of the scrape left out.
    expect(families.get('berth_process_cpu_seconds_total')?.type).toBe('COUNTER');
    expect(families.get('berth_metrics_collect_failures_total')?.metrics ?? []).toEqual([]);
  }, 120_000);

  it('serves /metrics alone on its listener, and the API port has no /metrics', async () => {
    const base = metricsUrl.replace(/\/metrics$/, '');
    expect((await get(`${base}/healthz`)).status).toBe(404);
    expect((await get(`${base}/api/v1/applications`)).status).toBe(404);
    const onApi = await h.t.request({ url: '/metrics' });
    expect(onApi.statusCode).toBe(404);
    expect(onApi.body).not.toContain('berth_http_requests_total');
  });
});

describe.each(DIALECTS)('metrics switched off (%s)', (dialect) => {
  it('fails the start on a taken metrics port, naming the setting that moves it', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as net.AddressInfo;
    const t = await createTestApp(dialect, { env: { BERTH_METRICS_ADDR: `127.0.0.1:${port}` } });
    try {
      await expect(startBackground(t.ctx)).rejects.toThrow(
        `port ${port} for the metrics listener is already in use (another Berth?); choose another with --metrics-addr or BERTH_METRICS_ADDR (0 picks a free port)`,
      );
    } finally {
      await t.close();
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it('has no metrics listener and nothing counted without BERTH_METRICS_ADDR', async () => {
    const t = await createTestApp(dialect);
    const background = await startBackground(t.ctx, { pollMs: 100 });
    try {
      expect(t.ctx.config.metricsAddr).toBeUndefined();
      expect(background.endpoints.metrics).toBeUndefined();
      expect(t.ctx.services.metrics).toBeUndefined();
      expect((await t.request({ url: '/metrics' })).statusCode).toBe(404);
    } finally {
      await background.stop();
      await t.close();
    }
  });
});

describe.each(DIALECTS)('metrics from the store and the drivers (%s)', (dialect) => {
  const STORAGE_BYTES = 5 * 1024 * 1024;
  it('reads databases, services and tools credits on scrape; a part that does not answer is left out', async () => {
    const calls: string[] = [];
    const runtime = stubRuntimeDriver(calls);
    const databases = stubDatabaseDriver(calls);
    // The gotenberg stub keeps its files in a directory of this Berth's data dir (made once it is known)
    // and cannot count its connections.
    let pdfFiles = '';
    const others = stubServiceRunner(calls, ['gotenberg', 'worker']);
    const withFiles = async (running: Promise<ServiceRuntime>) => ({
      ...(await running),
      location: pdfFiles,
    });
    const pdfRunner: ServiceRunner = {
      ...others,
      provision: (spec) => withFiles(others.provision(spec)),
      start: (spec) => withFiles(others.start(spec)),
      restart: (spec) => withFiles(others.restart(spec)),
    };
    const t = await createTestApp(dialect, {
      env: { BERTH_METRICS_ADDR: '127.0.0.1:0' },
      services: {
        runtimeDriver: {
          ...runtime,
          capabilities: () => ({ ...runtime.capabilities(), phpVersions: ['8.2'], phpExtensions: ['intl'] }),
          // A driver that never answers: the scrape goes on without the applications' part.
          usage: () => new Promise(() => undefined),
        },
        managedDatabaseDriver: {
          ...databases,
          capabilities: () => ({ versions: { pg: ['17'], mysql: ['8.0'], valkey: ['7'] }, pgExtensions: [] }),
          connections: (ports) => Promise.resolve(new Map(ports.map((port) => [port, 3]))),
          health: async (ref, record) => {
            const health = await databases.health(ref, record);
            return health.state === 'running' ? { ...health, storageBytes: STORAGE_BYTES } : health;
          },
        },
        serviceRunners: [pdfRunner],
      },
    });
    pdfFiles = path.join(t.ctx.config.dataDir, 'services', 'pdf-files');
    fs.mkdirSync(path.join(pdfFiles, 'cache'), { recursive: true });
    fs.writeFileSync(path.join(pdfFiles, 'cache', 'fonts'), Buffer.alloc(4321));
    const background = await startBackground(t.ctx, { pollMs: 100 });
    try {
      const document = fullDocument('acme');
      const applied = await apply(t, document);
      expect(applied.statusCode, applied.body).toBe(200);
      await t.ctx.services.jobs.runner().runDue();
      // The background runner may hold a job runDue did not wait for: the deployment starts the services.
      const { application_id, deployment_id } = applied.json<{
        application_id: number;
        deployment_id: number;
      }>();
      expect((await waitForDeployment(t, application_id, deployment_id)).status).toBe('success');
      // The supervisor records the storage use the driver reports at its next pass of the running instance.
      await eventually(async () => {
        const instance = await t.ctx.db
          .selectFrom('managed_instances')
          .select('storage_bytes')
          .executeTakeFirst();
        return instance?.storage_bytes === STORAGE_BYTES;
      });
      const [one, two] = await Promise.all([makePdf(1, 'One'), makePdf(1, 'Two')]);
      const form = multipart(
        [one, two].map((content, i) => ({
          name: 'files[]',
          filename: `f${i}.pdf`,
          content,
          type: 'application/pdf',
        })),
      );
      const merged = await t.request({
        method: 'POST',
        url: '/api/v1/tools/pdf/merge',
        headers: { ...t.auth.tools, ...form.headers },
        payload: form.payload,
      });
      expect(merged.statusCode).toBe(200);

      const { families } = await scrape(background.endpoints.metrics!);
      const samples = (name: string) => families.get(name)?.metrics ?? [];
      const database = { name: 'main-db', team: 'acme', type: 'pg' };
      expect(valueOf(samples('berth_managed_database_state'), { ...database, state: 'running' })).toBe(1);
      expect(valueOf(samples('berth_managed_database_connections'), database)).toBe(3);
      expect(valueOf(samples('berth_managed_database_storage_bytes'), database)).toBe(STORAGE_BYTES);
      const appId = String(application_id);
      expect(valueOf(samples('berth_service_state'), { app: appId, service: 'cache', type: 'valkey' })).toBe(
        1,
      );
      expect(valueOf(samples('berth_service_connections'), { app: appId, service: 'cache' })).toBe(3);
      expect(valueOf(samples('berth_service_state'), { app: appId, service: 'pdf', type: 'gotenberg' })).toBe(
        1,
      );
      expect(valueOf(samples('berth_service_restarts'), { app: appId, service: 'pdf' })).toBe(0);
      // The database service's runner counts its clients; the gotenberg stub cannot tell: no series.
      expect(valueOf(samples('berth_service_connections'), { app: appId, service: 'pdf' })).toBeUndefined();
      // A service's files are measured in the background: a later scrape shows them.
      await eventually(async () => {
        const later = await scrape(background.endpoints.metrics!);
        return (
          valueOf(later.families.get('berth_service_volume_bytes')?.metrics, {
            app: appId,
            service: 'pdf',
          }) === 4321
        );
      });
      expect(
        valueOf(samples('berth_tools_conversions_total'), { operation: 'pdf.merge', outcome: 'success' }),
      ).toBe(1);
      expect(valueOf(samples('berth_tools_credits_used_total'), { operation: 'pdf.merge' })).toBe(1);
      expect(valueOf(samples('berth_tools_credits_used_month'), {})).toBe(1);
      // The applications' part waited for its bound and was left out; the rest was served.
      expect(valueOf(samples('berth_metrics_collect_failures_total'), { part: 'applications' })).toBe(1);
      expect(samples('berth_app_replicas_desired')).toEqual([]);
    } finally {
      await background.stop();
      await t.close();
    }
  }, 60_000);
});
