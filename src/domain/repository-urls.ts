// Which repository URLs Berth can fetch: one rule, read by apply (a 422 at
// spec.application.repository.url) and by the fetch itself (drivers/runtime/local/source.ts), so a URL
// apply accepts is one the deployment's fetch takes. Pure: parsing only, no look-up.
//
// git runs over https, http and git:// (fetch pins each to the address it checked). ssh:// and
// scp-style `git@host:path` addresses are refused: they need SSH keys, and Berth holds none. file:// is
// the host's own disk, so only when the operator allows it (BERTH_SOURCES_ALLOW_FILE_URLS).

export const REPOSITORY_SCHEMES = ['https', 'http', 'git'] as const;

/** The longest repository URL accepted (a forge's URLs are far shorter). */
export const MAX_REPOSITORY_URL_LENGTH = 500;

export interface RepositoryUrlRule {
  /** BERTH_SOURCES_ALLOW_FILE_URLS: file:///path URLs are accepted too. */
  allowFileUrls: boolean;
}

/** What is accepted, for messages: "an https://, http:// or git:// URL (…)". */
export function acceptedRepositoryUrls(rule: RepositoryUrlRule): string {
  return `an https://, http:// or git://${rule.allowFileUrls ? ' (or file:///path)' : ''} URL; ssh:// and git@host: addresses are not supported (Berth holds no SSH keys)`;
}

/**
 * Why `raw` is not a repository URL Berth fetches (a phrase such as "uses the scheme ssh:, which is not
 * allowed"), or undefined when it is. Never echoes the URL: it may hold credentials.
 */
export function repositoryUrlProblem(raw: string, rule: RepositoryUrlRule): string | undefined {
  if (raw.length === 0 || raw.length > MAX_REPOSITORY_URL_LENGTH)
    return `must have 1 to ${MAX_REPOSITORY_URL_LENGTH} characters`;
  if (/[\s\u0000-\u001f\u007f]/.test(raw)) return 'contains spaces or control characters';
  // scp-style `user@host:path` is not a URL at all; name it, as it is what ssh users write.
  if (/^[^/:@]+@[^/:]+:/.test(raw)) return 'is an scp-style ssh address, which is not supported';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is not a URL';
  }
  const scheme = url.protocol.slice(0, -1);
  const allowed: readonly string[] = rule.allowFileUrls
    ? [...REPOSITORY_SCHEMES, 'file']
    : REPOSITORY_SCHEMES;
  if (!allowed.includes(scheme)) return `uses the scheme ${scheme}:, which is not allowed`;
  if (url.search || url.hash) return 'has a query or a fragment';
  for (const part of [url.username, url.password]) {
    try {
      decodeURIComponent(part);
    } catch {
      return 'has malformed credentials';
    }
  }
  if (scheme === 'file')
    return url.hostname === '' ? undefined : 'names a host; a file URL must be file:///path';
  // WHATWG keeps a git:// host opaque: hold it to what a host name or an IP literal can be.
  if (!/^[A-Za-z0-9.-]+$/.test(url.hostname) && !/^\[[0-9A-Fa-f:.]+\]$/.test(url.hostname))
    return 'has an invalid host';
  return undefined;
}
