// The dashboard (web/, built by Vite into dist/web): index.html at `/` and at the panel's own paths
// (the single-page app routes in the browser), hashed assets under `/assets/` cached for a year. Only
// the prefixes below fall back to the page, so no API path (`/api`, `/1.3`, `/docs`, `/openapi.json`,
// `/schemas`, the probes) is ever shadowed: an unknown API path still answers its JSON 404.
import fs from 'node:fs/promises';
import path from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { platformErrors } from '../schemas/errors.js';

/** The panel's pages: `/<prefix>` and everything under it answer index.html. */
export const PANEL_PREFIXES = [
  'sign-in',
  'apps',
  'apply',
  'databases',
  'storage',
  'tools',
  'account',
  'team',
  'notifications',
  'audit-log',
] as const;

/** Every path the panel serves (for the route sweeps of the tests). */
export const PANEL_PATHS = [
  '/',
  '/assets/*',
  ...PANEL_PREFIXES.flatMap((prefix) => [`/${prefix}`, `/${prefix}/*`]),
];

/**
 * What the page may do: its own scripts and styles only (Vite emits no inline code), calls to this
 * origin, images from data: and blob: (screenshot previews), blob: frames (PDF previews), no plugins,
 * no framing by other sites.
 */
export const PANEL_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "frame-src 'self' blob:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const ASSET_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.map': 'application/json; charset=utf-8',
};

const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Berth</title></head>
<body><h1>Berth</h1>
<p>The dashboard is not built. Run <code>npm run build</code> (or <code>./scripts/start.sh</code>) and reload.</p>
<p>The API answers at <a href="/docs">/docs</a>.</p></body></html>
`;

function panelHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', PANEL_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY');
}

const tags = ['panel'];
const htmlPage = {
  200: { description: 'The dashboard page', content: { 'text/html': { schema: Type.String() } } },
  ...platformErrors(),
};

export function registerPanelRoutes(app: FastifyInstance, options: { dir: string }): void {
  const index = path.join(options.dir, 'index.html');
  const assets = path.join(options.dir, 'assets');

  const page = async (_request: unknown, reply: FastifyReply) => {
    let html: string;
    try {
      html = await fs.readFile(index, 'utf8');
    } catch {
      html = NOT_BUILT;
    }
    return panelHeaders(reply)
      .header('cache-control', 'no-cache')
      .type('text/html; charset=utf-8')
      .send(html);
  };

  const pageConfig = { auth: 'none' as const, produces: ['text/html'] };
  app.get(
    '/',
    {
      config: pageConfig,
      schema: { tags, summary: 'The dashboard (open; it signs in)', response: htmlPage },
    },
    page,
  );
  for (const prefix of PANEL_PREFIXES) {
    for (const url of [`/${prefix}`, `/${prefix}/*`]) {
      app.get(
        url,
        {
          config: pageConfig,
          schema: { tags, summary: `The dashboard's ${prefix} pages`, response: htmlPage },
        },
        page,
      );
    }
  }

  app.get<{ Params: { '*': string } }>(
    '/assets/*',
    {
      config: {
        auth: 'none',
        produces: [...new Set(Object.values(ASSET_TYPES).map((t) => t.split(';')[0]!))],
      },
      schema: {
        tags,
        summary: "The dashboard's scripts and styles (hashed names, cached for a year)",
        response: {
          200: {
            description: 'The file',
            content: { 'text/javascript': { schema: Type.String() }, 'text/css': { schema: Type.String() } },
          },
          ...platformErrors(),
        },
      },
    },
    async (request, reply) => {
      const name = request.params['*'];
      const type = ASSET_TYPES[path.extname(name)];
      // One level, plain names only: nothing outside the assets folder can be named.
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name) || type === undefined) return reply.callNotFound();
      let body: Buffer;
      try {
        body = await fs.readFile(path.join(assets, name));
      } catch {
        return reply.callNotFound();
      }
      return panelHeaders(reply)
        .header('cache-control', 'public, max-age=31536000, immutable')
        .type(type)
        .send(body);
    },
  );
}
