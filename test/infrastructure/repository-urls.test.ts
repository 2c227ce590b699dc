// One rule for repository URLs (issue 24): apply accepts exactly what fetch takes — https://, http://
// and git:// (file:// only when the operator allows it) — and refuses ssh:// and scp-style addresses,
// which fetch cannot serve (Berth holds no SSH keys), with a 422 at spec.application.repository.url
// naming the accepted schemes. Fetch reads the same function (test/runtime/source.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acceptedRepositoryUrls, repositoryUrlProblem } from '../../src/domain/repository-urls.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, dumpStore } from './helpers.js';

const ACCEPTED = [
  'https://github.com/acme/shop.git',
  'http://git.example.com/acme/shop',
  'https://x-access-token:secret@github.com/acme/shop.git',
  'git://git.example.com/acme/shop.git',
  'git://[::1]:9418/shop',
];

const REFUSED: Array<[string, string]> = [
  ['ssh://git@github.com/acme/shop.git', 'uses the scheme ssh:, which is not allowed'],
  ['git@github.com:acme/shop.git', 'is an scp-style ssh address, which is not supported'],
  ['file:///srv/git/shop', 'uses the scheme file:, which is not allowed'],
  ['ftp://example.com/shop', 'uses the scheme ftp:, which is not allowed'],
  ['ext::sh -c touch% /tmp/x', 'contains spaces or control characters'],
  ['https://github.com/acme/shop?ref=main', 'has a query or a fragment'],
  ['github.com/acme/shop', 'is not a URL'],
  ['git://exa_mple.com/shop', 'has an invalid host'],
  [`https://github.com/${'a'.repeat(500)}`, 'must have 1 to 500 characters'],
];

describe('the repository URL rule', () => {
  it('accepts https, http and git URLs and names what is wrong with the others', () => {
    for (const url of ACCEPTED)
      expect(repositoryUrlProblem(url, { allowFileUrls: false }), url).toBeUndefined();
    for (const [url, problem] of REFUSED)
      expect(repositoryUrlProblem(url, { allowFileUrls: false }), url).toBe(problem);
  });

  it('accepts file:///path only when the operator allows it, and never with a host', () => {
    expect(repositoryUrlProblem('file:///srv/git/shop', { allowFileUrls: true })).toBeUndefined();
    expect(repositoryUrlProblem('file://host/srv/git/shop', { allowFileUrls: true })).toBe(
      'names a host; a file URL must be file:///path',
    );
    expect(acceptedRepositoryUrls({ allowFileUrls: true })).toContain('file:///path');
    expect(acceptedRepositoryUrls({ allowFileUrls: false })).not.toContain('file');
  });
});

describe.each(DIALECTS)('repository URLs at apply (%s)', (dialect) => {
  let t: TestApp;
  let withFiles: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect);
    withFiles = await createTestApp(dialect, { env: { BERTH_SOURCES_ALLOW_FILE_URLS: 'true' } });
  });
  afterAll(async () => {
    await t.close();
    await withFiles.close();
  });

  const document = (app: TestApp, name: string, url: string) => ({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team: app.user.team_id },
    spec: { application: { name, type: 'nodejs', repository: { url, branch: 'main' } } },
  });

  it('accepts https, http and git URLs', async () => {
    for (const [index, url] of ACCEPTED.entries()) {
      const res = await apply(t, document(t, `ok${index}`, url), index === 0 ? '' : '?dry_run=true');
      expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
    }
  });

  it('refuses ssh, scp-style, file and other URLs with 422 at repository.url naming the accepted schemes', async () => {
    const before = await dumpStore(t.ctx.db);
    for (const [index, [url, problem]] of REFUSED.entries()) {
      for (const query of ['?dry_run=true', '']) {
        const res = await apply(t, document(t, `refused${index}`, url), query);
        expect(res.statusCode, url).toBe(422);
        const errors = res.json<{ errors: Record<string, string[]> }>().errors;
        expect(errors, url).toEqual({
          'spec.application.repository.url': [
            `Application 'refused${index}' repository: field 'url' ${problem}; expected an https://, http:// or git:// URL; ssh:// and git@host: addresses are not supported (Berth holds no SSH keys).`,
          ],
        });
      }
    }
    expect(await dumpStore(t.ctx.db)).toEqual(before);
    // The message never repeats the URL: it may hold credentials.
    const secret = await apply(t, document(t, 'secret', 'https://user:hunter2@example.com/a?x=1'));
    expect(secret.statusCode).toBe(422);
    expect(secret.body).not.toContain('hunter2');
  });

  it('accepts file:///path when BERTH_SOURCES_ALLOW_FILE_URLS is true, as fetch then takes it', async () => {
    const res = await apply(withFiles, document(withFiles, 'local', 'file:///srv/git/shop'));
    expect(res.statusCode, res.body).toBe(200);
    const refused = await apply(withFiles, document(withFiles, 'ssh', 'ssh://git@example.com/shop'));
    expect(
      refused.json<{ errors: Record<string, string[]> }>().errors['spec.application.repository.url'],
    ).toEqual([
      "Application 'ssh' repository: field 'url' uses the scheme ssh:, which is not allowed; expected an https://, http:// or git:// (or file:///path) URL; ssh:// and git@host: addresses are not supported (Berth holds no SSH keys).",
    ]);
  });
});
