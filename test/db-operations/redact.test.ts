// Passwords from source URIs never survive into messages.
import { describe, expect, it } from 'vitest';
import {
  OperationError,
  parseConnectionUri,
  redactText,
  redactUri,
} from '../../src/drivers/databases/operations/index.js';

describe('redaction', () => {
  it('masks the password of a URI and nothing else', () => {
    expect(redactUri('postgres://admin:hunter2@db.example.com:5432/app?sslmode=require')).toBe(
      'postgres://admin:***@db.example.com:5432/app?sslmode=require',
    );
    expect(redactUri('mysql://root@h:3306/x')).toBe('mysql://root@h:3306/x');
    expect(redactUri('postgres://u@h/x?password=topsecret')).toBe('postgres://u@h/x?password=***');
  });

  it('masks given secrets (raw and URL-encoded) and credential-looking fragments in free text', () => {
    const secret = 'p@ss/w0rd#1';
    const text = [
      `connecting to postgres://bob:${encodeURIComponent(secret)}@10.0.0.1/db failed`,
      `conninfo host=h password='${secret}' dbname=x`,
      `raw ${secret} in stderr`,
      'PGPASSWORD=abc123 pg_dump',
      'password=plain123 user=x',
    ].join('\n');
    const out = redactText(text, [secret]);
    expect(out).not.toContain(secret);
    expect(out).not.toContain(encodeURIComponent(secret));
    expect(out).not.toMatch(/abc123|plain123/);
    expect(out).toContain('postgres://bob:***@10.0.0.1/db');
    expect(out).toContain('PGPASSWORD=***');
  });

  it('masks a secret only where it stands whole, never the letters of other words', () => {
    expect(redactText('unexpectedly failed for p at p@host', ['p'])).toBe(
      'unexpectedly failed for *** at ***@host',
    );
    expect(redactText('server said: secret123 is wrong; secret1234 is not it', ['secret123'])).toBe(
      'server said: *** is wrong; secret1234 is not it',
    );
  });

  it('replaces server file paths, and keeps URIs', () => {
    expect(
      redactText(
        'could not open file "/var/lib/berth/databases/0a1b/data/base/1/2": denied; see postgres://u@h:5432/db and /tmp/berth-clone-x/data',
      ),
    ).toBe('could not open file "<path>": denied; see postgres://u@h:5432/db and <path>');
  });

  it('keeps the password out of OperationError messages', () => {
    const error = new OperationError('SOURCE_AUTH_FAILED', 'server said: bad password s3cret for user x', [
      's3cret',
    ]);
    expect(error.message).toBe('server said: bad password *** for user x');
    expect(error.code).toBe('SOURCE_AUTH_FAILED');
  });

  it('parses URIs whose passwords carry unencoded special characters', () => {
    const spec = parseConnectionUri('postgres://admin:a/b@c#d?e@db.internal:6543/app?sslmode=disable');
    expect(spec).toMatchObject({
      engine: 'pg',
      user: 'admin',
      password: 'a/b@c#d?e',
      host: 'db.internal',
      port: 6543,
      database: 'app',
      sslMode: 'disable',
    });
    expect(parseConnectionUri('mysql://root:x@h').sslMode).toBe('prefer');
    expect(parseConnectionUri('mysql://root:x@h', { ssl: true })).toMatchObject({
      sslMode: 'require',
      port: 3306,
      database: '',
    });
    try {
      parseConnectionUri('redis://u:topsecret@h:6379');
      expect.unreachable();
    } catch (error) {
      expect(error).toMatchObject({ code: 'INVALID_SOURCE_URI' });
      expect(String(error)).not.toContain('topsecret');
    }
  });
});
