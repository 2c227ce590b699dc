import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createSecretBox, loadOrCreateMasterKey } from '../../src/crypto/secret-box.js';

describe('secret box', () => {
  const box = createSecretBox(randomBytes(32));

  it('round-trips and never stores the plaintext', () => {
    const sealed = box.encrypt('hunter2');
    expect(sealed).not.toContain('hunter2');
    expect(box.decrypt(sealed)).toBe('hunter2');
    expect(box.encrypt('hunter2')).not.toBe(sealed); // fresh IV each time
  });

  it('detects tampering', () => {
    const sealed = box.encrypt('value');
    const raw = Buffer.from(sealed.slice(3), 'base64');
    raw[raw.length - 1] = (raw[raw.length - 1] ?? 0) ^ 1;
    expect(() => box.decrypt(`v1:${raw.toString('base64')}`)).toThrow();
  });

  it('refuses another key', () => {
    const other = createSecretBox(randomBytes(32));
    expect(() => other.decrypt(box.encrypt('value'))).toThrow();
  });

  it('gives equal keyed hashes for equal values only', () => {
    expect(box.keyedHash('a')).toBe(box.keyedHash('a'));
    expect(box.keyedHash('a')).not.toBe(box.keyedHash('b'));
    expect(createSecretBox(randomBytes(32)).keyedHash('a')).not.toBe(box.keyedHash('a'));
  });

  it('generates the key once into a 0600 file', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-key-'));
    const first = loadOrCreateMasterKey(dir, undefined);
    const second = loadOrCreateMasterKey(dir, undefined);
    expect(first.equals(second)).toBe(true);
    expect(fs.statSync(path.join(dir, 'secret.key')).mode & 0o777).toBe(0o600);
    fs.rmSync(dir, { recursive: true });
  });
});
