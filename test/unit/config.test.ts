import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';

describe('config', () => {
  it('has embedded defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      databaseUrl: undefined,
      secretKey: undefined,
      publicUrl: 'http://127.0.0.1:8080',
      logLevel: 'info',
      rateLimitPerMinute: 60,
      toolsMonthlyCredits: 1000,
    });
    expect(config.dataDir.endsWith('/data')).toBe(true);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('lets flags override the environment', () => {
    const config = loadConfig({ BERTH_PORT: '9000', BERTH_LOG_LEVEL: 'warn' }, { port: '9100' });
    expect(config.port).toBe(9100);
    expect(config.logLevel).toBe('warn');
  });

  it('reports every bad variable in one error', () => {
    let error: unknown;
    try {
      loadConfig({
        BERTH_PORT: 'eighty',
        BERTH_DATABASE_URL: 'mysql://x',
        BERTH_SECRET_KEY: 'short',
        BERTH_PUBLIC_URL: 'ftp://x',
        BERTH_SMTP_URL: 'http://mail',
        BERTH_LOG_LEVEL: 'loud',
        BERTH_RATE_LIMIT_PER_MINUTE: '-1',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    for (const name of [
      'BERTH_PORT',
      'BERTH_DATABASE_URL',
      'BERTH_SECRET_KEY',
      'BERTH_PUBLIC_URL',
      'BERTH_SMTP_URL',
      'BERTH_LOG_LEVEL',
      'BERTH_RATE_LIMIT_PER_MINUTE',
    ]) {
      expect(problems).toContain(name);
    }
    expect((error as ConfigError).problems).toHaveLength(7);
  });

  it('blocks public buckets storage-wide with BERTH_S3_BLOCK_PUBLIC_ACCESS (default false), or names a bad value', () => {
    expect(loadConfig({}).s3BlockPublicAccess).toBe(false);
    expect(loadConfig({ BERTH_S3_BLOCK_PUBLIC_ACCESS: 'true' }).s3BlockPublicAccess).toBe(true);
    expect(loadConfig({}, { s3BlockPublicAccess: 'true' }).s3BlockPublicAccess).toBe(true);
    expect(() => loadConfig({ BERTH_S3_BLOCK_PUBLIC_ACCESS: 'maybe', BERTH_PORT: 'x' })).toThrow(
      /BERTH_S3_BLOCK_PUBLIC_ACCESS must be true or false, got 'maybe'[\s\S]*BERTH_PORT|BERTH_PORT[\s\S]*BERTH_S3_BLOCK_PUBLIC_ACCESS must be true or false/,
    );
  });

  it('accepts a 32-byte key as hex or base64', () => {
    expect(loadConfig({ BERTH_SECRET_KEY: 'ab'.repeat(32) }).secretKey).toBe('ab'.repeat(32));
    const b64 = Buffer.alloc(32, 7).toString('base64');
    expect(loadConfig({ BERTH_SECRET_KEY: b64 }).secretKey).toBe(b64);
  });

  it('caps each application at BERTH_APP_PIDS_MAX processes and BERTH_APP_CPU_CORES cores', () => {
    const defaults = loadConfig({}).runtime;
    expect(defaults.appPidsMax).toBe(512);
    expect(defaults.appCpuCores).toBe(Math.max(1, os.availableParallelism() - 1));
    const set = loadConfig({ BERTH_APP_PIDS_MAX: '2000', BERTH_APP_CPU_CORES: '1.5' }).runtime;
    expect(set).toMatchObject({ appPidsMax: 2000, appCpuCores: 1.5 });
    expect(loadConfig({}, { appCpuCores: '0' }).runtime.appCpuCores).toBeUndefined();
    let error: unknown;
    try {
      loadConfig({ BERTH_APP_PIDS_MAX: '3', BERTH_APP_CPU_CORES: '-1' });
    } catch (e) {
      error = e;
    }
    const problems = (error as ConfigError).problems;
    expect(problems).toHaveLength(2);
    expect(problems[0]).toContain('BERTH_APP_PIDS_MAX must be an integer from 16');
    expect(problems[1]).toContain(
      "BERTH_APP_CPU_CORES must be a number of cores from 0 to 4096 such as 1.5, got '-1'",
    );
  });

  it('serves metrics only with BERTH_METRICS_ADDR, host:port with an IP address, every bad one named', () => {
    expect(loadConfig({}).metricsAddr).toBeUndefined();
    expect(loadConfig({ BERTH_METRICS_ADDR: '127.0.0.1:9464' }).metricsAddr).toEqual({
      host: '127.0.0.1',
      port: 9464,
    });
    expect(loadConfig({}, { metricsAddr: '[::1]:0' }).metricsAddr).toEqual({ host: '::1', port: 0 });
    expect(loadConfig({ BERTH_METRICS_ADDR: 'localhost:9100' }).metricsAddr?.host).toBe('localhost');
    for (const bad of [
      '9464',
      'metrics.example:9464',
      '127.0.0.1:99999',
      '::1:9464',
      '[127.0.0.1]:1',
      '-x:1',
    ]) {
      let error: unknown;
      try {
        loadConfig({ BERTH_METRICS_ADDR: bad, BERTH_PORT: 'eighty' });
      } catch (e) {
        error = e;
      }
      expect((error as ConfigError).problems, bad).toEqual([
        "BERTH_PORT must be an integer from 0 to 65535, got 'eighty'",
        `BERTH_METRICS_ADDR must be host:port with an IP address (or localhost) and a port from 0 to 65535, such as 127.0.0.1:9464 or [::1]:9464, got '${bad}'`,
      ]);
    }
  });

  it("chooses the applications' network with BERTH_APP_NETWORK: namespace (default) or host", () => {
    expect(loadConfig({}).runtime.appNetwork).toBe('namespace');
    expect(loadConfig({ BERTH_APP_NETWORK: 'host' }).runtime.appNetwork).toBe('host');
    expect(loadConfig({}, { appNetwork: 'host' }).runtime.appNetwork).toBe('host');
    let error: unknown;
    try {
      loadConfig({ BERTH_APP_NETWORK: 'bridge', BERTH_EDGE_PROXY: 'nginx' });
    } catch (e) {
      error = e;
    }
    expect((error as ConfigError).problems).toEqual([
      "BERTH_EDGE_PROXY must be one of haproxy, node, got 'nginx'",
      "BERTH_APP_NETWORK must be one of namespace, host, got 'bridge'",
    ]);
  });

  it("chooses the tools' engines with BERTH_TOOLS_DRIVER: local only, a wrong one named with the accepted", () => {
    expect(loadConfig({}).drivers.tools).toBe('local');
    expect(loadConfig({ BERTH_TOOLS_DRIVER: 'local' }).drivers.tools).toBe('local');
    expect(loadConfig({}, { toolsDriver: 'local' }).drivers.tools).toBe('local');
    let error: unknown;
    try {
      loadConfig({ BERTH_TOOLS_DRIVER: 'gotenberg', BERTH_RUNTIME_DRIVER: 'nomad' });
    } catch (e) {
      error = e;
    }
    expect((error as ConfigError).problems).toEqual([
      "BERTH_RUNTIME_DRIVER must be one of local, kubernetes, got 'nomad'",
      "BERTH_TOOLS_DRIVER must be one of local, got 'gotenberg'",
    ]);
  });

  it("takes the builds' registry and variables from BERTH_BUILD_REGISTRY and BERTH_BUILD_ENV", () => {
    const defaults = loadConfig({}).runtime;
    expect(defaults.buildRegistry).toBeUndefined();
    expect(defaults.buildEnv).toEqual({});
    const set = loadConfig({
      BERTH_BUILD_REGISTRY: 'https://npm.mirror.example/repo',
      BERTH_BUILD_ENV: ' HTTPS_PROXY=http://proxy:3128  NO_PROXY=localhost,.internal\nEMPTY=',
    }).runtime;
    expect(set.buildRegistry).toBe('https://npm.mirror.example/repo/');
    expect(set.buildEnv).toEqual({
      HTTPS_PROXY: 'http://proxy:3128',
      NO_PROXY: 'localhost,.internal',
      EMPTY: '',
    });
    expect(loadConfig({}, { buildEnv: 'A=1' }).runtime.buildEnv).toEqual({ A: '1' });
    let error: unknown;
    try {
      loadConfig({ BERTH_BUILD_REGISTRY: 'ftp://mirror', BERTH_BUILD_ENV: 'ok=1 PATH=/x NOVALUE A=1' });
    } catch (e) {
      error = e;
    }
    expect((error as ConfigError).problems).toEqual([
      "BERTH_BUILD_ENV must be NAME=value entries separated by spaces, names matching [A-Z_][A-Z0-9_]* other than PATH, HOME, BERTH_APP_NAME, got 'ok=1', 'PATH=/x', 'NOVALUE'",
      "BERTH_BUILD_REGISTRY must be an http(s) URL, got 'ftp://mirror/'",
    ]);
  });

  it('takes the kubernetes settings with their defaults, the cluster from BERTH_KUBECONFIG, else KUBECONFIG', () => {
    const defaults = loadConfig({});
    expect(defaults.drivers.runtime).toBe('local');
    expect(defaults.kubernetes).toEqual({
      kubeconfig: undefined,
      ingressClass: undefined,
      storageClass: undefined,
      namespacePrefix: 'berth-',
      ingressNamespace: 'ingress-nginx',
      images: { nodejs: 'node:{version}-bookworm-slim', php: 'php:{version}-apache', fetch: 'alpine:3.20' },
    });
    expect(Object.isFrozen(defaults.kubernetes)).toBe(true);
    expect(Object.isFrozen(defaults.kubernetes.images)).toBe(true);
    // KUBECONFIG is read through the config layer; kubectl's list of files gives its first.
    expect(loadConfig({ KUBECONFIG: '/k/one:/k/two' }).kubernetes.kubeconfig).toBe('/k/one');
    expect(loadConfig({ KUBECONFIG: '/k/one', BERTH_KUBECONFIG: 'relative/kc' }).kubernetes.kubeconfig).toBe(
      path.resolve('relative/kc'),
    );
    expect(loadConfig({ BERTH_KUBECONFIG: '/k/env' }, { kubeconfig: '/k/flag' }).kubernetes.kubeconfig).toBe(
      '/k/flag',
    );
    const set = loadConfig(
      {
        BERTH_K8S_INGRESS_CLASS: 'nginx',
        BERTH_K8S_STORAGE_CLASS: 'fast.ssd-1',
        BERTH_K8S_NAMESPACE_PREFIX: 'prod-b1-',
        BERTH_K8S_INGRESS_NAMESPACE: 'kube-system',
        BERTH_K8S_IMAGE_NODEJS: 'registry.example:5000/base/node:{version}-slim',
        BERTH_K8S_IMAGE_PHP: 'php:{version}-fpm@sha256:' + 'a'.repeat(64),
      },
      { k8sImageFetch: 'busybox:1.36' },
    ).kubernetes;
    expect(set).toEqual({
      kubeconfig: undefined,
      ingressClass: 'nginx',
      storageClass: 'fast.ssd-1',
      namespacePrefix: 'prod-b1-',
      ingressNamespace: 'kube-system',
      images: {
        nodejs: 'registry.example:5000/base/node:{version}-slim',
        php: 'php:{version}-fpm@sha256:' + 'a'.repeat(64),
        fetch: 'busybox:1.36',
      },
    });
  });

  it('names each bad kubernetes setting, all in one error', () => {
    let error: unknown;
    try {
      loadConfig({
        BERTH_K8S_INGRESS_CLASS: 'Nginx',
        BERTH_K8S_STORAGE_CLASS: 'fast_ssd',
        BERTH_K8S_NAMESPACE_PREFIX: '1berth-',
        BERTH_K8S_INGRESS_NAMESPACE: 'ingress.nginx',
        BERTH_K8S_IMAGE_NODEJS: '--privileged',
        BERTH_K8S_IMAGE_PHP: 'php:8 apache',
        BERTH_K8S_IMAGE_FETCH: 'alpine:$(id)',
      });
    } catch (e) {
      error = e;
    }
    expect((error as ConfigError).problems).toEqual([
      "BERTH_K8S_INGRESS_CLASS must be a DNS label (lower-case letters, digits and '-', at most 63), got 'Nginx'",
      "BERTH_K8S_STORAGE_CLASS must be a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253), got 'fast_ssd'",
      "BERTH_K8S_NAMESPACE_PREFIX must be a letter, then lower-case letters, digits and '-', at most 20 in all, got '1berth-'",
      "BERTH_K8S_INGRESS_NAMESPACE must be a namespace name (lower-case letters, digits and '-', at most 63), got 'ingress.nginx'",
      "BERTH_K8S_IMAGE_NODEJS must be an image reference such as registry.example:5000/node:{version}-bookworm-slim (no spaces, no leading -), got '--privileged'",
      "BERTH_K8S_IMAGE_PHP must be an image reference such as registry.example:5000/node:{version}-bookworm-slim (no spaces, no leading -), got 'php:8 apache'",
      "BERTH_K8S_IMAGE_FETCH must be an image reference such as registry.example:5000/node:{version}-bookworm-slim (no spaces, no leading -), got 'alpine:$(id)'",
    ]);
    // A prefix past 20 characters would leave `<prefix>app-<id>` too little of a namespace name's 63.
    expect(() => loadConfig({ BERTH_K8S_NAMESPACE_PREFIX: 'a'.repeat(21) })).toThrow(
      'BERTH_K8S_NAMESPACE_PREFIX',
    );
    expect(loadConfig({ BERTH_K8S_NAMESPACE_PREFIX: 'a'.repeat(20) }).kubernetes.namespacePrefix).toBe(
      'a'.repeat(20),
    );
  });

  it('starts the kubernetes runtime driver only with a kubeconfig file or inside a pod', () => {
    const problems = (env: NodeJS.ProcessEnv): string[] => {
      try {
        loadConfig(env);
        return [];
      } catch (e) {
        return (e as ConfigError).problems;
      }
    };
    const missing = path.join(os.tmpdir(), 'berth-no-such-kubeconfig');
    expect(problems({ BERTH_RUNTIME_DRIVER: 'kubernetes', BERTH_KUBECONFIG: missing })).toEqual([
      `BERTH_KUBECONFIG must name a kubeconfig file, '${missing}' is none`,
    ]);
    expect(problems({ BERTH_RUNTIME_DRIVER: 'kubernetes', KUBECONFIG: os.tmpdir() })).toEqual([
      `BERTH_KUBECONFIG must name a kubeconfig file, '${os.tmpdir()}' is none`,
    ]);
    expect(problems({ BERTH_RUNTIME_DRIVER: 'kubernetes' })).toEqual([
      'BERTH_RUNTIME_DRIVER=kubernetes needs a cluster: set BERTH_KUBECONFIG (or KUBECONFIG) to a kubeconfig file, or run Berth in a pod with a service account (KUBERNETES_SERVICE_HOST)',
    ]);
    // With it reported beside the other bad values.
    expect(problems({ BERTH_RUNTIME_DRIVER: 'kubernetes', BERTH_PORT: 'x' })).toHaveLength(2);
    // The local driver does not look for a cluster.
    expect(problems({ BERTH_KUBECONFIG: missing })).toEqual([]);
    expect(problems({ BERTH_RUNTIME_DRIVER: 'kubernetes', KUBERNETES_SERVICE_HOST: '10.96.0.1' })).toEqual(
      [],
    );
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-config-'));
    try {
      const file = path.join(dir, 'kubeconfig');
      fs.writeFileSync(file, 'apiVersion: v1\nkind: Config\n');
      const config = loadConfig({ BERTH_RUNTIME_DRIVER: 'kubernetes', KUBECONFIG: file });
      expect(config.drivers.runtime).toBe('kubernetes');
      expect(config.kubernetes.kubeconfig).toBe(file);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
