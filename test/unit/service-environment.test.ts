// The connection environment each service type gives each application type (docs/services.md, "The
// environment"): the names Laravel, WordPress and every other application expect, and the suffixes
// that tell two services of one kind apart.
import { describe, expect, it } from 'vitest';
import {
  connectionEnvironment,
  connectionFormats,
  type ServiceConnection,
} from '../../src/domain/app-services.js';

const at = (
  name: string,
  type: string,
  port: number,
  extra: Record<string, string> = {},
): ServiceConnection => ({
  name,
  type,
  host: '127.0.0.1',
  port,
  username: 'app',
  password: `pw/${name}+`,
  database: type === 'postgresql' || type === 'mysql' ? 'shop' : null,
  extra,
});

const mysql = at('db', 'mysql', 3307);
const redis = at('cache', 'redis', 6380);
const queue = at('queue', 'rabbitmq', 5673, { vhost: 'orders' });
const files = at('files', 'minio', 9000, {
  endpoint: 'http://127.0.0.1:9000',
  bucket: 'app-1-files',
  region: 'europe-1',
});
const sftp = at('upload', 'sftp', 2222);
const chrome = at('browser', 'chrome-headless', 9333, {
  path: '/tok',
  websocketPath: '/devtools/browser/abc',
});
const gotenberg = at('pdf', 'gotenberg', 3001, { path: '/tok2' });

describe('the connection environment', () => {
  it('gives a laravel application the names its stock configuration reads, and the URL forms', () => {
    const env = connectionEnvironment('laravel', [mysql, redis, queue, files]);
    expect(env).toMatchObject({
      DATABASE_URL: 'mysql://app:pw%2Fdb%2B@127.0.0.1:3307/shop',
      DB_CONNECTION: 'mysql',
      DB_HOST: '127.0.0.1',
      DB_PORT: '3307',
      DB_DATABASE: 'shop',
      DB_USERNAME: 'app',
      DB_PASSWORD: 'pw/db+',
      REDIS_URL: 'redis://app:pw%2Fcache%2B@127.0.0.1:6380',
      REDIS_HOST: '127.0.0.1',
      REDIS_PORT: '6380',
      REDIS_USERNAME: 'app',
      REDIS_PASSWORD: 'pw/cache+',
      AMQP_URL: 'amqp://app:pw%2Fqueue%2B@127.0.0.1:5673/orders',
      QUEUE_CONNECTION: 'rabbitmq',
      RABBITMQ_HOST: '127.0.0.1',
      RABBITMQ_PORT: '5673',
      RABBITMQ_USER: 'app',
      RABBITMQ_PASSWORD: 'pw/queue+',
      RABBITMQ_VHOST: 'orders',
      S3_ENDPOINT: 'http://127.0.0.1:9000',
      S3_BUCKET: 'app-1-files',
      FILESYSTEM_DISK: 's3',
      AWS_ACCESS_KEY_ID: 'app',
      AWS_SECRET_ACCESS_KEY: 'pw/files+',
      AWS_DEFAULT_REGION: 'europe-1',
      AWS_BUCKET: 'app-1-files',
      AWS_ENDPOINT: 'http://127.0.0.1:9000',
      AWS_USE_PATH_STYLE_ENDPOINT: 'true',
    });
    expect(env.WORDPRESS_DB_HOST).toBeUndefined();
  });

  it('gives a wordpress application the official image names for MySQL, and a nodejs one URL forms only', () => {
    const wordpress = connectionEnvironment('wordpress', [mysql]);
    expect(wordpress).toEqual({
      DATABASE_URL: 'mysql://app:pw%2Fdb%2B@127.0.0.1:3307/shop',
      WORDPRESS_DB_HOST: '127.0.0.1:3307',
      WORDPRESS_DB_NAME: 'shop',
      WORDPRESS_DB_USER: 'app',
      WORDPRESS_DB_PASSWORD: 'pw/db+',
    });
    // WordPress speaks MySQL only: a postgresql service gives it no WORDPRESS_DB_* names.
    expect(Object.keys(connectionEnvironment('wordpress', [at('pg', 'postgresql', 5433)]))).toEqual([
      'DATABASE_URL',
    ]);
    const node = connectionEnvironment('nodejs', [mysql, redis, queue, files, sftp, chrome, gotenberg]);
    expect(Object.keys(node).sort()).toEqual(
      [
        'AMQP_URL',
        'BROWSER_WS_ENDPOINT',
        'CHROME_URL',
        'DATABASE_URL',
        'GOTENBERG_URL',
        'REDIS_URL',
        'S3_ACCESS_KEY_ID',
        'S3_BUCKET',
        'S3_ENDPOINT',
        'S3_REGION',
        'S3_SECRET_ACCESS_KEY',
        'SFTP_HOST',
        'SFTP_PASSWORD',
        'SFTP_PORT',
        'SFTP_URL',
        'SFTP_USERNAME',
      ].sort(),
    );
    expect(node.CHROME_URL).toBe('http://127.0.0.1:9333/tok');
    expect(node.BROWSER_WS_ENDPOINT).toBe('ws://127.0.0.1:9333/tok/devtools/browser/abc');
    expect(node.GOTENBERG_URL).toBe('http://127.0.0.1:3001/tok2');
    expect(node.SFTP_URL).toBe('sftp://app:pw%2Fupload%2B@127.0.0.1:2222');
  });

  it('suffixes every name of two services of one kind by the service name, and no other', () => {
    const legacy = at('legacy-db', 'postgresql', 5434);
    const env = connectionEnvironment('laravel', [
      mysql,
      legacy,
      redis,
      queue,
      at('events', 'rabbitmq', 5674),
    ]);
    expect(env.DATABASE_URL).toBeUndefined();
    expect(env.DB_HOST).toBeUndefined();
    expect(env.DATABASE_URL_DB).toBe('mysql://app:pw%2Fdb%2B@127.0.0.1:3307/shop');
    expect(env.DATABASE_URL_LEGACY_DB).toBe('postgresql://app:pw%2Flegacy-db%2B@127.0.0.1:5434/shop');
    expect(env.DB_CONNECTION_LEGACY_DB).toBe('pgsql');
    expect(env.DB_PORT_DB).toBe('3307');
    // One key-value service beside them keeps its names.
    expect(env.REDIS_URL).toBe('redis://app:pw%2Fcache%2B@127.0.0.1:6380');
    // Two queues: each suffixed.
    expect(env.AMQP_URL).toBeUndefined();
    expect(env.AMQP_URL_QUEUE).toContain(':5673/');
    expect(env.RABBITMQ_PORT_EVENTS).toBe('5674');
  });

  it('offers the command-line and JDBC forms of a connection', () => {
    expect(connectionFormats(at('pg', 'postgresql', 5433)).map((f) => f.name)).toEqual([
      'url',
      'jdbc',
      'cli',
    ]);
    expect(connectionFormats(sftp)).toEqual([
      { name: 'url', value: 'sftp://app:pw%2Fupload%2B@127.0.0.1:2222' },
      { name: 'cli', value: 'sftp -P 2222 app@127.0.0.1' },
    ]);
    expect(connectionFormats(files)[0]).toEqual({ name: 'url', value: 'http://127.0.0.1:9000/app-1-files' });
  });
});
