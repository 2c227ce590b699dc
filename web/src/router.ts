// A small history router: the path is a signal; links and navigate() push it.
import { signal } from '@preact/signals';

export const currentPath = signal(location.pathname);
export const currentHash = signal(location.hash);

export function navigate(to: string, replace = false): void {
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  currentPath.value = location.pathname;
  currentHash.value = location.hash;
  window.scrollTo(0, 0);
}

addEventListener('popstate', () => {
  currentPath.value = location.pathname;
  currentHash.value = location.hash;
});

/** Same-origin links open in the panel without a reload (modified clicks keep the browser's way). */
addEventListener('click', (event) => {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey)
    return;
  const link = (event.target as Element | null)?.closest?.('a');
  if (!link || link.target || link.hasAttribute('download')) return;
  const url = new URL(link.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith('/api') || url.pathname.startsWith('/docs'))
    return;
  event.preventDefault();
  navigate(url.pathname + url.search + url.hash);
});

/** `/apps/:id` against a path: the parameters, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split('/');
  const have = path.replace(/\/+$/, '').split('/');
  if (want.length !== have.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    const h = have[i]!;
    if (w.startsWith(':')) params[w.slice(1)] = decodeURIComponent(h);
    else if (w !== h) return null;
  }
  return params;
}
