// The artifact store (issue 27, item 1): uploaded sources are written through it, whole or not at all
// (a body over the cap leaves no file), and deployed from it; sources uploaded before it, at
// <dataDir>/uploads/<id>-<name>, are moved into it and still deploy; another host fetches an artifact by
// the short-lived URL the store signs (GET /internal/artifacts/<key>?expires=…&signature=…): within its
// time it answers the bytes, after it 403, with a tampered signature, one for another key or one made
// under another signing key 403, a missing artifact 404, and a key with `..` is refused.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/domain/clock.js';
import { createLocalArtifactStore } from '../../src/drivers/artifacts/local.js';
import { ArtifactTooLargeError, sourceKey } from '../../src/drivers/artifacts/types.js';
import { SOURCE_UPLOAD_LIMIT_BYTES } from '../../src/services/applications/runtime.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { requestPort } from '../helpers/http.js';
import { DIALECTS } from '../helpers/store.js';
import { apply } from '../infrastructure/helpers.js';
import {
  applyYaml,
  edgeRequest,
  eventually,
  nodeDocument,
  startRuntime,
  waitForDeployment,
  type RuntimeHarness,
} from './helpers.js';
import { archiveOf, nodeAppFiles } from './node-app.js';

/** Every file under `dir`, relative to it (none when it does not exist). */
function filesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)))
    .sort();
}

const modeOf = (file: string) => fs.statSync(file).mode & 0o777;

describe('uploaded sources through the artifact store, deployed', () => {
  let h: RuntimeHarness;
  const artifacts = () => path.join(h.t.ctx.config.dataDir, 'artifacts');

  beforeAll(async () => {
    h = await startRuntime('sqlite');
  }, 120_000);
  afterAll(() => h.close());

  const noSource = (name: string) =>
    nodeDocument('acme', name, 'unused', {
      application: { repository: undefined, commands: { build: ['node build.js'], start: 'npm start' } },
    });

  it('moves a source uploaded before the store into it and deploys it (nothing uploaded then is lost)', async () => {
    const applied = await applyYaml(h.t, noSource('legacy'));
    const appId = applied.application_id;
    await waitForDeployment(h.t, appId, applied.deployment_id!);
    // What an earlier Berth left: the archive at <dataDir>/uploads/<id>-<name>, named on the application.
    // The store is made on first use, so it has not looked at uploads/ yet.
    expect(fs.existsSync(artifacts())).toBe(false);
    const legacy = path.join(h.t.ctx.config.dataDir, 'uploads');
    fs.mkdirSync(legacy, { mode: 0o700 });
    const bytes = archiveOf(nodeAppFiles('from-before'));
    fs.writeFileSync(path.join(legacy, `${appId}-mf3k2a1.archive`), bytes, { mode: 0o600 });
    await h.t.ctx.db
      .updateTable('applications')
      .set({ uploaded_source: 'mf3k2a1.archive' })
      .where('id', '=', appId)
      .execute();

    const deploy = await h.t.request({
      method: 'POST',
      url: `/api/v1/applications/${appId}/deploy`,
      headers: h.t.auth.platform,
      payload: {},
    });
    expect(deploy.statusCode, deploy.body).toBe(202);
    const deployment = await waitForDeployment(h.t, appId, deploy.json<{ data: { id: number } }>().data.id);
    expect(deployment.error).toBeNull();
    expect(JSON.parse((await edgeRequest(h.edgePort, 'legacy.test', '/')).body)).toMatchObject({
      version: 'from-before',
    });
    // Moved, byte for byte, and the old directory is gone.
    expect(filesUnder(artifacts())).toEqual([`apps/${appId}/sources/mf3k2a1.archive`]);
    expect(fs.readFileSync(path.join(artifacts(), `apps/${appId}/sources/mf3k2a1.archive`))).toEqual(bytes);
    expect(fs.existsSync(legacy)).toBe(false);
  });

  it('stores an upload (0600 in 0700 directories), deploys it, serves it by signed URL, and keeps one', async () => {
    const applied = await applyYaml(h.t, noSource('upload'));
    const appId = applied.application_id;
    await waitForDeployment(h.t, appId, applied.deployment_id!);
    const upload = async (version: string) => {
      const bytes = archiveOf(nodeAppFiles(version));
      const response = await h.t.request({
        method: 'POST',
        url: `/api/v1/applications/${appId}/source`,
        headers: { ...h.t.auth.platform, 'content-type': 'application/gzip' },
        payload: bytes,
      });
      expect(response.statusCode, response.body).toBe(202);
      const deployment = await waitForDeployment(
        h.t,
        appId,
        response.json<{ data: { deployment: { id: number } } }>().data.deployment.id,
      );
      expect(deployment.error).toBeNull();
      expect(JSON.parse((await edgeRequest(h.edgePort, 'upload.test', '/')).body)).toMatchObject({ version });
      const row = await h.t.ctx.db
        .selectFrom('applications')
        .select('uploaded_source')
        .where('id', '=', appId)
        .executeTakeFirstOrThrow();
      return { bytes, key: sourceKey(appId, row.uploaded_source!) };
    };

    const first = await upload('one');
    const file = path.join(artifacts(), first.key);
    expect(modeOf(file)).toBe(0o600);
    for (const dir of ['', 'apps', `apps/${appId}`, `apps/${appId}/sources`])
      expect(modeOf(path.join(artifacts(), dir))).toBe(0o700);

    // Another host: a plain GET of the signed URL, no credential, gets the bytes.
    const url = new URL(h.t.ctx.services.artifacts.url(first.key, 300));
    expect(url.pathname).toBe(`/internal/artifacts/${first.key}`);
    const fetched = await requestPort(h.t.port, { url: `${url.pathname}${url.search}` });
    expect(fetched.statusCode).toBe(200);
    expect(fetched.headers['content-type']).toBe('application/octet-stream');
    expect(fetched.rawPayload).toEqual(first.bytes);

    // A new upload replaces the old one in the store.
    const second = await upload('two');
    expect(filesUnder(path.join(artifacts(), 'apps', String(appId)))).toEqual([
      path.relative(`apps/${appId}`, second.key),
    ]);

    // Deleting the application removes its artifacts.
    const deleted = await h.t.request({
      method: 'DELETE',
      url: `/api/v1/applications/${appId}`,
      headers: h.t.auth.platform,
    });
    expect(deleted.statusCode, deleted.body).toBe(202);
    await eventually(
      () => Promise.resolve(fs.existsSync(path.join(artifacts(), 'apps', String(appId))) ? undefined : true),
      30_000,
      "the deleted application's artifacts to go",
    );
  });
});

describe.each(DIALECTS)('signed artifact URLs and failed uploads (%s)', (dialect) => {
  let t: TestApp;
  let appId: number;
  const clock = createManualClock('2026-11-27T12:00:00Z');
  const bytes = archiveOf({ 'server.js': 'console.log(1)\n' });
  let key: string;
  const artifacts = () => path.join(t.ctx.config.dataDir, 'artifacts');

  beforeAll(async () => {
    t = await createTestApp(dialect, { clock });
    const res = await apply(t, {
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name: 'signed', team: t.user.team_id },
      spec: { application: { name: 'signed', type: 'nodejs', commands: { start: 'node server.js' } } },
    });
    expect(res.statusCode, res.body).toBe(200);
    appId = res.json<{ application_id: number }>().application_id;
    const stored = await t.request({
      method: 'POST',
      url: `/api/v1/applications/${appId}/source?deploy=false`,
      headers: { ...t.auth.platform, 'content-type': 'application/gzip' },
      payload: bytes,
    });
    expect(stored.statusCode, stored.body).toBe(200);
    const row = await t.ctx.db
      .selectFrom('applications')
      .select('uploaded_source')
      .where('id', '=', appId)
      .executeTakeFirstOrThrow();
    key = sourceKey(appId, row.uploaded_source!);
  });
  afterAll(() => t.close());

  /** GET of a URL the store signed, with its path and query as given (no authentication header). */
  const get = (signed: string) => {
    const url = new URL(signed);
    return t.request({ url: `${url.pathname}${url.search}` });
  };

  it('answers within its time and 403 from its expiry on (the clock Berth reads)', async () => {
    const url = t.ctx.services.artifacts.url(key, 60);
    const answer = await get(url);
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['content-length']).toBe(String(bytes.length));
    expect(answer.rawPayload).toEqual(bytes);

    clock.advance(59_000);
    expect((await get(url)).statusCode).toBe(200);
    clock.advance(1_000);
    const expired = await get(url);
    expect(expired.statusCode).toBe(403);
    expect(expired.json<{ message: string }>().message).toContain('expired');
    // A new URL for the same artifact works again.
    expect((await get(t.ctx.services.artifacts.url(key, 60))).statusCode).toBe(200);
  });

  it('refuses a tampered signature, another key’s, or one made under another signing key with 403', async () => {
    const url = new URL(t.ctx.services.artifacts.url(key, 60));
    const signature = url.searchParams.get('signature')!;
    const flipped = `${signature[0] === '0' ? '1' : '0'}${signature.slice(1)}`;
    const tampered = new URL(url);
    tampered.searchParams.set('signature', flipped);
    expect((await get(tampered.href)).statusCode).toBe(403);

    // A later expiry with the same signature.
    const longer = new URL(url);
    longer.searchParams.set('expires', String(Number(url.searchParams.get('expires')) + 3600));
    expect((await get(longer.href)).statusCode).toBe(403);

    // The signature of one key on another (that exists: this is no 404).
    const otherKey = sourceKey(appId, 'other.archive');
    fs.writeFileSync(path.join(artifacts(), otherKey), 'other', { mode: 0o600 });
    const moved = new URL(url);
    moved.pathname = `/internal/artifacts/${otherKey}`;
    expect((await get(moved.href)).statusCode).toBe(403);
    expect((await get(t.ctx.services.artifacts.url(otherKey, 60))).statusCode).toBe(200);

    // Signed by a store with another key (another Berth's secret key).
    const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-artifacts-'));
    try {
      const stranger = createLocalArtifactStore({
        dataDir: elsewhere,
        publicUrl: 'http://127.0.0.1:1',
        clock,
        signingKey: randomBytes(32),
      });
      const forged = await get(stranger.url(key, 60));
      expect(forged.statusCode).toBe(403);
      expect(forged.json<{ message: string }>().message).toContain('signature');
    } finally {
      fs.rmSync(elsewhere, { recursive: true, force: true });
    }

    // No signature at all, or not one in form: the fields are named.
    const bare = await t.request({ url: `/internal/artifacts/${key}` });
    expect(bare.statusCode).toBe(422);
    expect(Object.keys(bare.json<{ errors: Record<string, string[]> }>().errors).sort()).toEqual([
      'expires',
      'signature',
    ]);
  });

  it('answers 404 for a missing artifact with a good signature, and never lists', async () => {
    const missing = sourceKey(appId, 'never-uploaded.archive');
    const answer = await get(t.ctx.services.artifacts.url(missing, 60));
    expect(answer.statusCode).toBe(404);
    // A directory is no key.
    const url = new URL(t.ctx.services.artifacts.url(key, 60));
    const listing = await t.request({ url: `/internal/artifacts/apps/${appId}/sources/${url.search}` });
    expect(listing.statusCode).toBe(422);
    expect(listing.json<{ errors: Record<string, string[]> }>().errors.key).toBeDefined();
  });

  it('refuses keys with .. or outside apps/<id>/…: the route with 422 naming the key, the store to sign them', async () => {
    const { search } = new URL(t.ctx.services.artifacts.url(key, 60));
    for (const bad of [
      `apps/${appId}/sources/a..archive`,
      `apps/${appId}/sources/..%2F..%2F..%2Fsecret.key`,
      `apps/${appId}/sources/%2e%2e`,
      `secret.key`,
      `.tmp/x.part`,
      `apps/${appId}/volumes/data`,
    ]) {
      const answer = await t.request({ url: `/internal/artifacts/${bad}${search}` });
      expect(answer.statusCode, bad).toBe(422);
      expect(answer.json<{ errors: Record<string, string[]> }>().errors.key?.[0]).toContain('no ".."');
    }
    for (const bad of [`apps/${appId}/sources/a..b`, `apps/${appId}/sources/../../secret.key`, '/etc/passwd'])
      expect(() => t.ctx.services.artifacts.url(bad, 60), bad).toThrow(/artifact key must be/);
    expect(() => t.ctx.services.artifacts.url(key, 0)).toThrow(RangeError);
  });

  it('keeps nothing of a body over the cap (413) or one that fails midway', async () => {
    const before = filesUnder(artifacts());
    // One byte over the cap, streamed (no Content-Length: only the store's count stops it).
    let sent = 0;
    const chunk = Buffer.alloc(1024 * 1024, 7);
    const body = new Readable({
      read() {
        if (sent > SOURCE_UPLOAD_LIMIT_BYTES) return this.push(null);
        const piece = chunk.subarray(0, Math.min(chunk.length, SOURCE_UPLOAD_LIMIT_BYTES + 1 - sent));
        sent += piece.length;
        this.push(piece);
        if (sent > SOURCE_UPLOAD_LIMIT_BYTES) this.push(null);
      },
    });
    // Berth stops reading at the cap and ends the connection (it does not read an endless body to the
    // end): the client sees the 413, or the reset when that comes first.
    const answer = await t
      .request({
        method: 'POST',
        url: `/api/v1/applications/${appId}/source`,
        headers: { ...t.auth.platform, 'content-type': 'application/gzip', 'transfer-encoding': 'chunked' },
        payload: body,
      })
      .then(
        (response) => `${response.statusCode} ${response.body}`,
        (error: NodeJS.ErrnoException) => error.code ?? String(error),
      );
    expect(answer).toMatch(/^(413 .*larger than 104857600 bytes|ECONNRESET|EPIPE)/);
    // Written to a temporary file while it came (all of it was sent): gone once the refusal is handled.
    await eventually(
      () => Promise.resolve(JSON.stringify(filesUnder(artifacts())) === JSON.stringify(before) || undefined),
      30_000,
      "the refused upload's temporary file to go",
    );

    // The store itself: a body that errors midway, and one over its cap, leave no file, not even a
    // temporary one; the key keeps what it had.
    const store = t.ctx.services.artifacts;
    const failing = Readable.from(
      (async function* () {
        yield Buffer.from('half of it');
        await Promise.resolve();
        throw new Error('the client went away');
      })(),
    );
    await expect(store.put(key, failing, { maxBytes: 1024 })).rejects.toThrow('the client went away');
    await expect(store.put(key, Readable.from([Buffer.alloc(2048)]), { maxBytes: 1024 })).rejects.toThrow(
      ArtifactTooLargeError,
    );
    expect(filesUnder(artifacts())).toEqual(before);
    expect(fs.readFileSync(path.join(artifacts(), key))).toEqual(bytes);
  });
});
