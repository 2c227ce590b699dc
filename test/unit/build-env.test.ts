// What builds get of the host to reach package registries (issue 26, item 2): the host's effective
// npm configuration read from the real npm (a temporary npmrc stands for the host's), and the build
// environment and CA binds made of it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  BUILD_CA_MOUNT,
  prepareBuildNetwork,
  readHostPackageConfig,
  withoutCredentials,
  type HostPackageConfig,
} from '../../src/drivers/runtime/local/build-env.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-build-env-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** An environment whose npm reads only `npmrc` (as the host's global one). */
function npmEnv(npmrc: string, more: Record<string, string> = {}): NodeJS.ProcessEnv {
  const global = path.join(dir, `global-${Math.random().toString(36).slice(2)}`);
  fs.writeFileSync(global, npmrc);
  return {
    PATH: process.env.PATH,
    HOME: dir,
    NPM_CONFIG_GLOBALCONFIG: global,
    NPM_CONFIG_USERCONFIG: path.join(dir, 'no-user-npmrc'),
    ...more,
  };
}

describe('the host package configuration', () => {
  it("reads the registry, CA file, proxies and strict-ssl from the host's npm", async () => {
    const config = await readHostPackageConfig(
      npmEnv(
        [
          'registry=https://npm.mirror.example/',
          'cafile=/etc/corp/ca.pem',
          'proxy=http://proxy.example:3128/',
          'https-proxy=http://proxy.example:3129/',
          'strict-ssl=false',
          'noproxy=localhost,.internal',
        ].join('\n'),
        { NODE_EXTRA_CA_CERTS: '/etc/corp/extra.pem' },
      ),
    );
    expect(config).toEqual({
      registry: 'https://npm.mirror.example/',
      npmCafile: '/etc/corp/ca.pem',
      extraCaCerts: '/etc/corp/extra.pem',
      strictSsl: false,
      httpProxy: 'http://proxy.example:3128/',
      httpsProxy: 'http://proxy.example:3129/',
      noProxy: 'localhost,.internal',
    });
  });

  it("falls back on npm's defaults and the proxy variables", async () => {
    const config = await readHostPackageConfig(
      npmEnv('', { HTTPS_PROXY: 'http://proxy.example:8080', no_proxy: '10.0.0.0/8' }),
    );
    expect(config).toMatchObject({
      registry: 'https://registry.npmjs.org/',
      npmCafile: undefined,
      extraCaCerts: undefined,
      strictSsl: true,
      httpProxy: undefined,
      httpsProxy: 'http://proxy.example:8080',
    });
    // npm itself reads NO_PROXY / no_proxy into its noproxy.
    expect(config.noProxy).toBe('10.0.0.0/8');
  });

  it('does without npm on the host', async () => {
    const config = await readHostPackageConfig({ HTTP_PROXY: 'http://p:1' }, path.join(dir, 'no-npm'));
    expect(config).toMatchObject({ registry: 'https://registry.npmjs.org/', httpProxy: 'http://p:1' });
  });
});

describe('the build network', () => {
  const host: HostPackageConfig = {
    registry: 'https://registry.npmjs.org/',
    npmCafile: undefined,
    extraCaCerts: undefined,
    strictSsl: true,
    httpProxy: undefined,
    httpsProxy: undefined,
    noProxy: undefined,
  };

  it('copies the CA files where builds read them and names them for npm, yarn and Node.js', async () => {
    const ca = path.join(dir, 'ca.pem');
    fs.writeFileSync(ca, 'CERTIFICATE');
    fs.chmodSync(ca, 0o600);
    const caDir = path.join(dir, 'build-ca');
    const network = await prepareBuildNetwork(
      { ...host, npmCafile: ca, extraCaCerts: ca, httpsProxy: 'http://proxy:3128', noProxy: 'localhost' },
      { caDir },
    );
    expect(network.registry).toBe('https://registry.npmjs.org/');
    expect(network.binds).toEqual([
      { source: `${caDir}/npm-cafile.pem`, target: `${BUILD_CA_MOUNT}/npm-cafile.pem`, writable: false },
      {
        source: `${caDir}/node-extra-ca-certs.pem`,
        target: `${BUILD_CA_MOUNT}/node-extra-ca-certs.pem`,
        writable: false,
      },
    ]);
    // Readable by every application's account, whatever the host's file allowed.
    expect(fs.statSync(caDir).mode & 0o777).toBe(0o755);
    expect(fs.statSync(`${caDir}/npm-cafile.pem`).mode & 0o777).toBe(0o644);
    expect(fs.readFileSync(`${caDir}/npm-cafile.pem`, 'utf8')).toBe('CERTIFICATE');
    expect(network.env).toMatchObject({
      npm_config_registry: 'https://registry.npmjs.org/',
      YARN_NPM_REGISTRY_SERVER: 'https://registry.npmjs.org',
      npm_config_cafile: `${BUILD_CA_MOUNT}/npm-cafile.pem`,
      YARN_HTTPS_CA_FILE_PATH: `${BUILD_CA_MOUNT}/npm-cafile.pem`,
      NODE_EXTRA_CA_CERTS: `${BUILD_CA_MOUNT}/node-extra-ca-certs.pem`,
      npm_config_https_proxy: 'http://proxy:3128',
      HTTPS_PROXY: 'http://proxy:3128',
      https_proxy: 'http://proxy:3128',
      NO_PROXY: 'localhost',
      npm_config_fetch_retries: '1',
      npm_config_fetch_timeout: '30000',
    });
    expect(network.env).not.toHaveProperty('npm_config_strict_ssl');
    expect(network.env).not.toHaveProperty('HTTP_PROXY');
  });

  it("puts BERTH_BUILD_REGISTRY in place of the host's registry and BERTH_BUILD_ENV last", async () => {
    const network = await prepareBuildNetwork(
      { ...host, strictSsl: false, npmCafile: path.join(dir, 'missing.pem') },
      {
        registry: 'http://127.0.0.1:4873/',
        extra: { npm_config_fetch_retries: '3', HTTP_PROXY: 'http://p:1' },
        caDir: path.join(dir, 'build-ca-2'),
      },
    );
    expect(network.registry).toBe('http://127.0.0.1:4873/');
    // A CA file the host names but lacks is not carried.
    expect(network.binds).toEqual([]);
    expect(network.env).not.toHaveProperty('npm_config_cafile');
    expect(network.env).toMatchObject({
      npm_config_registry: 'http://127.0.0.1:4873/',
      npm_config_strict_ssl: 'false',
      npm_config_fetch_retries: '3',
      HTTP_PROXY: 'http://p:1',
    });
  });
});

describe('the registry in a log', () => {
  it('shows no credentials', () => {
    expect(withoutCredentials('https://user:pass@npm.mirror.example/repo/')).toBe(
      'https://***:***@npm.mirror.example/repo/',
    );
    expect(withoutCredentials('https://registry.npmjs.org/')).toBe('https://registry.npmjs.org/');
    expect(withoutCredentials('not a url')).toBe('(an invalid URL)');
  });
});
