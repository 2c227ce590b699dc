// The `gotenberg` service: a Gotenberg 8-compatible HTTP API (Chromium URL/HTML/Markdown → PDF,
// LibreOffice → PDF, PDF merge, /health, /version) served by Berth's own process on a loopback port,
// on the warm engines of the tools endpoints (the tools service's functions, handed in by composition),
// without credits. One listener per instance. Private to its application: every route sits under a secret
// path prefix derived from the instance's password (`http://127.0.0.1:<port>/<token>/…`), or at the root
// with HTTP basic auth (Gotenberg's `--api-enable-basic-auth`); anything else is a bare 404.
// Form fields, errors and answers follow Gotenberg's own code (pkg/modules/api/formdata.go, routes.go);
// the fields it honours are listed in docs (GOTENBERG_FIELDS). This file is the listener; the parts are
// beside it: contract (deps, limits, fields), form (multipart), fields and duration (Go's parsers),
// files, conversions, zip, errors.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ServiceRef, ServiceRunner, ServiceRuntime, ServiceSpec } from '../types.js';
import { createConversions } from './conversions.js';
import {
  DEFAULT_GOTENBERG_LIMITS,
  GOTENBERG_VERSION,
  type GotenbergDeps,
  type GotenbergLimits,
} from './contract.js';
import { badForm, gotenbergFailure } from './errors.js';
import { filesWith, missingExtensions } from './files.js';
import { readForm, sanitizeFilename } from './form.js';

export {
  DEFAULT_GOTENBERG_LIMITS,
  GOTENBERG_FIELDS,
  GOTENBERG_VERSION,
  type GotenbergDeps,
  type GotenbergLimits,
} from './contract.js';

interface Instance {
  id: string;
  server: http.Server | undefined;
  port: number;
  token: string;
  username: string;
  password: string;
  logs: string[];
}

/** The secret path segment: the password when it is URL-safe (Berth's are base64url), else a digest of it. */
export function gotenbergToken(password: string): string {
  return /^[A-Za-z0-9_-]{16,}$/.test(password)
    ? password
    : createHash('sha256').update(password).digest('base64url');
}

function sameSecret(a: string, b: string): boolean {
  const da = createHash('sha256').update(a).digest();
  const db = createHash('sha256').update(b).digest();
  return timingSafeEqual(da, db);
}

const ROUTES = new Set([
  'POST /forms/chromium/convert/url',
  'POST /forms/chromium/convert/html',
  'POST /forms/chromium/convert/markdown',
  'POST /forms/libreoffice/convert',
  'POST /forms/pdfengines/merge',
  'GET /health',
  'HEAD /health',
  'GET /version',
  'GET /',
]);
const KNOWN_PATHS = new Set([...ROUTES].map((r) => r.slice(r.indexOf(' ') + 1)));

export interface GotenbergRunnerOptions {
  limits?: Partial<GotenbergLimits>;
  /** The Chromium job's time limit (the tools' chromiumTimeoutMs): bounds waitDelay. */
  jobTimeoutMs?: number;
  host?: string;
}

export function createGotenbergRunner(
  deps: GotenbergDeps,
  options: GotenbergRunnerOptions = {},
): ServiceRunner & { instance(id: string): { port: number; path: string } | undefined } {
  const limits = { ...DEFAULT_GOTENBERG_LIMITS, ...options.limits };
  const host = options.host ?? '127.0.0.1';
  const jobTimeoutMs = options.jobTimeoutMs ?? 30_000;
  const instances = new Map<string, Instance>();
  const { renderChromium, libreoffice } = createConversions(deps, jobTimeoutMs);

  const log = (instance: Instance, line: string) => {
    instance.logs.push(line);
    if (instance.logs.length > limits.logLines)
      instance.logs.splice(0, instance.logs.length - limits.logLines);
  };

  /** Where a request goes once it is authorized, or undefined (a bare 404 or 401). */
  function authorize(instance: Instance, req: http.IncomingMessage, pathname: string): string | 401 | 404 {
    const slash = pathname.indexOf('/', 1);
    const first = slash < 0 ? pathname.slice(1) : pathname.slice(1, slash);
    if (first !== '' && sameSecret(first, instance.token)) return slash < 0 ? '/' : pathname.slice(slash);
    if (!KNOWN_PATHS.has(pathname)) return 404;
    const header = req.headers.authorization ?? '';
    const basic = /^basic\s+(\S+)$/i.exec(header);
    if (basic?.[1]) {
      const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      const user = colon < 0 ? decoded : decoded.slice(0, colon);
      const pass = colon < 0 ? '' : decoded.slice(colon + 1);
      // Both compared, always: no early return tells which one was wrong.
      const ok = [sameSecret(user, instance.username), sameSecret(pass, instance.password)];
      if (ok[0] && ok[1]) return pathname;
    }
    return 401;
  }

  function send(
    res: http.ServerResponse,
    status: number,
    body: Buffer | string,
    headers: Record<string, string>,
  ): void {
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    res.writeHead(status, { ...headers, 'content-length': String(bytes.length) });
    res.end(res.req.method === 'HEAD' ? undefined : bytes);
  }

  const plain = { 'content-type': 'text/plain; charset=UTF-8' };

  function health(): { status: number; body: string } {
    const { chromium, libreoffice } = deps.health().engines;
    const timestamp = new Date().toISOString();
    const check = (engine: { status: string }, name: string) =>
      engine.status === 'failed'
        ? { status: 'down', timestamp, error: `${name} is unhealthy` }
        : { status: 'up', timestamp };
    const details = { chromium: check(chromium, 'Chromium'), libreoffice: check(libreoffice, 'LibreOffice') };
    const up = details.chromium.status === 'up' && details.libreoffice.status === 'up';
    return { status: up ? 200 : 503, body: JSON.stringify({ status: up ? 'up' : 'down', details }) };
  }

  /** Sends a file as Gotenberg does: `attachment; filename="…"`, the name from Gotenberg-Output-Filename. */
  function sendFile(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body: Buffer,
    extension: 'pdf' | 'zip',
    trace: string,
  ): void {
    const wanted = sanitizeFilename(String(req.headers['gotenberg-output-filename'] ?? ''));
    const filename = `${wanted || randomUUID()}.${extension}`;
    send(res, 200, body, {
      'content-type': extension === 'pdf' ? 'application/pdf' : 'application/zip',
      'content-disposition': `attachment; filename="${filename.replace(/["\\]/g, '\\$&')}"`,
      'gotenberg-trace': trace,
      'cache-control': 'no-store',
    });
  }

  async function handle(instance: Instance, req: http.IncomingMessage, res: http.ServerResponse) {
    const started = performance.now();
    const method = req.method ?? 'GET';
    const pathname = (req.url ?? '/').replace(/[?#].*$/s, '');
    let route = '-';
    const finish = (status: number) =>
      log(
        instance,
        `${new Date().toISOString()} ${method} ${route} ${status} ${Math.round(performance.now() - started)}ms`,
      );
    const where = authorize(instance, req, pathname);
    if (where === 404 || where === 401) {
      req.resume();
      send(res, where, where === 404 ? 'Not Found' : 'Unauthorized', {
        ...plain,
        ...(where === 401 ? { 'www-authenticate': 'basic realm=Restricted' } : {}),
      });
      finish(where);
      return;
    }
    route = where;
    const key = `${method} ${route}`;
    const trace = String(req.headers['gotenberg-trace'] ?? '') || randomUUID();
    if (!ROUTES.has(key)) {
      req.resume();
      const status = KNOWN_PATHS.has(route) ? 405 : 404;
      send(res, status, status === 405 ? 'Method Not Allowed' : 'Not Found', plain);
      finish(status);
      return;
    }
    try {
      if (route === '/health') {
        const answer = health();
        send(res, answer.status, answer.body, { 'content-type': 'application/json' });
      } else if (route === '/version') {
        send(res, 200, GOTENBERG_VERSION, plain);
      } else if (route === '/') {
        send(
          res,
          200,
          "Hey, Gotenberg has no UI, it's an API. Head to the documentation to learn how to interact with it.",
          {
            'content-type': 'text/html; charset=UTF-8',
          },
        );
      } else {
        const form = await readForm(req, limits);
        let pageRanges: string | undefined;
        try {
          if (route.startsWith('/forms/chromium/')) {
            pageRanges = form.values.get('nativePageRanges');
            sendFile(req, res, await renderChromium(form, route), 'pdf', trace);
          } else if (route === '/forms/libreoffice/convert') {
            const out = await libreoffice(form);
            sendFile(req, res, out.body, out.extension, trace);
          } else {
            const pdfs = filesWith(form, ['.pdf']);
            if (pdfs.length === 0) throw badForm([missingExtensions(['.pdf'])]);
            const body = pdfs.length === 1 ? pdfs[0]!.bytes : await deps.merge(pdfs.map((f) => f.bytes));
            sendFile(req, res, body, 'pdf', trace);
          }
        } catch (error) {
          throw gotenbergFailure(error, pageRanges ? { pageRanges } : {});
        }
      }
      finish(res.statusCode);
    } catch (error) {
      const failure = gotenbergFailure(error, {});
      if (!res.headersSent)
        send(res, failure.status, failure.message, {
          ...plain,
          ...failure.headers,
          'gotenberg-trace': trace,
        });
      else res.destroy();
      finish(failure.status);
    }
  }

  function listen(instance: Instance, port: number): Promise<number> {
    const server = http.createServer((req, res) => void handle(instance, req, res));
    server.requestTimeout = 5 * 60_000;
    return new Promise<number>((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException) => {
        server.off('listening', onListening);
        reject(error);
      };
      const onListening = () => {
        server.off('error', onError);
        instance.server = server;
        resolve((server.address() as AddressInfo).port);
      };
      server.once('error', onError);
      server.once('listening', onListening);
      server.listen(port, host);
    });
  }

  function runtime(instance: Instance): ServiceRuntime {
    return {
      host,
      port: instance.port,
      pid: null,
      version: GOTENBERG_VERSION,
      location: null,
      extra: { path: `/${instance.token}` },
    };
  }

  async function start(spec: ServiceSpec): Promise<ServiceRuntime> {
    let instance = instances.get(spec.id);
    if (!instance) {
      instance = { id: spec.id, server: undefined, port: 0, token: '', username: '', password: '', logs: [] };
      instances.set(spec.id, instance);
    }
    // The desired state in full: credentials follow the spec on every call.
    instance.token = gotenbergToken(spec.password);
    instance.username = spec.username;
    instance.password = spec.password;
    if (instance.server?.listening) return runtime(instance);
    const wanted = spec.port ?? instance.port;
    try {
      instance.port = await listen(instance, wanted > 0 ? wanted : 0);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || wanted === 0) throw error;
      instance.port = await listen(instance, 0);
    }
    log(instance, `${new Date().toISOString()} listening on ${host}:${instance.port}`);
    return runtime(instance);
  }

  async function stop(ref: ServiceRef): Promise<void> {
    const instance = instances.get(ref.id);
    const server = instance?.server;
    if (!instance || !server) return;
    instance.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    log(instance, `${new Date().toISOString()} stopped`);
  }

  return {
    types: ['gotenberg'],
    provision: start,
    start,
    async restart(spec) {
      await stop({ id: spec.id, type: spec.type });
      return start(spec);
    },
    stop,
    async delete(ref) {
      await stop(ref);
      instances.delete(ref.id);
    },
    status(ref) {
      return Promise.resolve({ running: instances.get(ref.id)?.server?.listening === true, pid: null });
    },
    logs(ref, tail) {
      const lines = instances.get(ref.id)?.logs ?? [];
      return Promise.resolve(tail > 0 ? lines.slice(-tail) : []);
    },
    instance(id) {
      const instance = instances.get(id);
      return instance?.server ? { port: instance.port, path: `/${instance.token}` } : undefined;
    },
  };
}
