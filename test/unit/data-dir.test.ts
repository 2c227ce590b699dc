// Issue 11, item 15: the store, keys and bootstrap credentials were 0644 in a 0755 data dir. At start
// the data dir loses read/write for others (search stays for instance users), its files become 0600
// and its directories 0700, and each change is logged.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { secureDataDir } from '../../src/config/data-dir.js';
import { createContext } from '../../src/context.js';
import { testConfig } from '../helpers/app.js';

const mode = (file: string) => fs.statSync(file).mode & 0o777;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe('secureDataDir', () => {
  it('tightens an existing data dir, its files and directories, and reports each change', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-modes-'));
    dirs.push(dir);
    fs.chmodSync(dir, 0o755);
    for (const file of ['berth.sqlite', 'secret.key', 'bootstrap.json']) {
      fs.writeFileSync(path.join(dir, file), 'x', { mode: 0o644 });
      fs.chmodSync(path.join(dir, file), 0o644);
    }
    fs.mkdirSync(path.join(dir, 'objects'), { mode: 0o755 });
    fs.chmodSync(path.join(dir, 'objects'), 0o755);
    fs.mkdirSync(path.join(dir, 'databases'), { mode: 0o711 });
    fs.chmodSync(path.join(dir, 'databases'), 0o711);

    const changes = secureDataDir(dir);
    expect(mode(dir)).toBe(0o711);
    for (const file of ['berth.sqlite', 'secret.key', 'bootstrap.json'])
      expect(mode(path.join(dir, file))).toBe(0o600);
    expect(mode(path.join(dir, 'objects'))).toBe(0o700);
    expect(mode(path.join(dir, 'databases'))).toBe(0o711);
    expect(changes.map((c) => path.basename(c.path)).sort()).toEqual(
      ['berth.sqlite', 'bootstrap.json', 'objects', 'secret.key', path.basename(dir)].sort(),
    );
    expect(secureDataDir(dir)).toEqual([]);
  });

  it('creates a missing data dir 0700', () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-modes-'));
    dirs.push(parent);
    secureDataDir(path.join(parent, 'data'));
    expect(mode(path.join(parent, 'data'))).toBe(0o700);
  });

  it('leaves the SQLite store and the generated key 0600 at start', async () => {
    const config = testConfig();
    dirs.push(config.dataDir);
    fs.chmodSync(config.dataDir, 0o755);
    const ctx = await createContext(config, { logger: pino({ level: 'silent' }) });
    try {
      expect(mode(config.dataDir) & 0o066).toBe(0);
      expect(mode(path.join(config.dataDir, 'berth.sqlite'))).toBe(0o600);
      expect(mode(path.join(config.dataDir, 'secret.key'))).toBe(0o600);
    } finally {
      await ctx.close();
    }
  });
});
