// A fake of UpCloud's Managed Database API that answers ONLY what test/fixtures/upcloud/fixtures.json
// recorded (go-vcr cassettes of UpCloud's Go SDK tests against api.upcloud.com). Anything else is
// answered 501 and kept in `unmatched`, which tests assert empty.
//
// How a request is matched to a recording:
// - method, and the path with the service's uuid, a user's name (…/users/{user}) and a logical
//   database's name (…/databases/{name}) as placeholders; the query string exactly;
// - the body's shape: the same keys at every level, strings and numbers by type, booleans by value
//   (`{"powered":false}` is not `{"powered":true}`); `type`, `plan` and `zone` of a new service by
//   value, since they choose what the answer describes;
// - for a request on a service, a recording whose service was in the same condition (its type, plan,
//   `powered` and `termination_protection` as the fake last answered them): a read after a power-off
//   is not recorded, so it is not answered.
// The one addition: a new service's `labels` (Berth's mapping of teams to services). No recorded
// request sets labels but every recent recorded answer carries the field, so the fake accepts them on
// POST /1.3/database and echoes them, as UpCloud's API documents.
//
// Answers are the recorded bodies with the recording's uuid and names replaced by the test's: the
// uuid is made here (UpCloud's start with 09), the name is the request's hostname_prefix. The list
// (GET /1.3/database?limit=100&offset=0) answers the services made here, each as last answered.
// Authentication: every request needs the Basic credential the fake was made with, else 401 with
// UpCloud's AUTHENTICATION_FAILED error (not a recording; kept apart in `refused`).
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

interface Interaction {
  source: string;
  index: number;
  method: string;
  path: string;
  query: string | null;
  request_body: unknown;
  status: number;
  response_headers: Record<string, string>;
  response_body: unknown;
}

type ServiceObject = Record<string, unknown> & {
  uuid: string;
  name: string;
  type?: string;
  plan?: string;
  powered?: boolean;
  termination_protection?: boolean;
};

interface Recording extends Interaction {
  /** Path with placeholders: /1.3/database/{uuid}/users/{user}. */
  template: string;
  shape: string;
  /** The recorded service's uuid and name (to replace), and its condition before the request. */
  service?: { uuid: string; name: string; before: ServiceObject | undefined };
  /** The user or database name the path named, to replace in the answer. */
  item?: string;
}

interface FakeService {
  uuid: string;
  name: string;
  title: string;
  labels: unknown[];
  last: ServiceObject;
}

export interface RequestSeen {
  method: string;
  path: string;
  body: unknown;
}

export interface FakeUpCloud {
  url: string;
  /** Requests no recording covers (answered 501). */
  unmatched: RequestSeen[];
  /** Requests refused for a wrong credential (answered 401). */
  refused: RequestSeen[];
  /** Requests answered from a recording: method, path, status and the recording's `source#index`. */
  served: Array<RequestSeen & { status: number; recording: string }>;
  services(): FakeService[];
  close(): Promise<void>;
}

const FIXTURES = path.join(import.meta.dirname, '../../fixtures/upcloud/fixtures.json');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Values of a new service's body that choose its answer. */
const BY_VALUE = new Set(['type', 'plan', 'zone']);

/** The structure of a body: keys, types, booleans by value, BY_VALUE keys by value at the top. */
export function shapeOf(value: unknown, top = true): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return `[${[...new Set(value.map((v) => shapeOf(v, false)))].sort().join('|')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([key]) => !(top && key === 'labels'))
      .sort(([a], [b]) => a.localeCompare(b));
    return `{${entries.map(([k, v]) => `${k}:${top && BY_VALUE.has(k) ? JSON.stringify(v) : shapeOf(v, false)}`).join(',')}}`;
  }
  if (typeof value === 'boolean') return String(value);
  return typeof value;
}

function templateOf(p: string): { template: string; uuid?: string; item?: string } {
  const parts = p.split('/');
  let uuid: string | undefined;
  let item: string | undefined;
  const out = parts.map((part, i) => {
    if (parts[i - 1] === 'database' && UUID.test(part)) {
      uuid = part;
      return '{uuid}';
    }
    if (i === 5 && (parts[4] === 'users' || parts[4] === 'databases') && uuid) {
      item = decodeURIComponent(part);
      return parts[4] === 'users' ? '{user}' : '{name}';
    }
    return part;
  });
  return { template: out.join('/'), ...(uuid ? { uuid } : {}), ...(item ? { item } : {}) };
}

const isService = (body: unknown): body is ServiceObject =>
  typeof body === 'object' && body !== null && !Array.isArray(body) && 'uuid' in body && 'state' in body;

/** The recordings of /1.3/database*, each with its template, body shape and service condition. */
function loadRecordings(): Recording[] {
  const { interactions } = JSON.parse(fs.readFileSync(FIXTURES, 'utf8')) as { interactions: Interaction[] };
  const recordings: Recording[] = [];
  // Per cassette, each service as last answered: the condition the next request found it in.
  const state = new Map<string, ServiceObject>();
  for (const i of interactions) {
    if (!i.path.startsWith('/1.3/database')) continue;
    const { template, uuid, item } = templateOf(i.path);
    const key = (u: string) => `${i.source}#${u}`;
    const before = uuid ? state.get(key(uuid)) : undefined;
    const recording: Recording = { ...i, template, shape: shapeOf(i.request_body) };
    if (item) recording.item = item;
    if (isService(i.response_body)) {
      const after = i.response_body;
      recording.service = { uuid: after.uuid, name: after.name, before: i.method === 'GET' ? after : before };
      if (i.status < 300) state.set(key(after.uuid), after);
    } else if (uuid) {
      const name = before?.name ?? '';
      recording.service = { uuid, name, before };
    }
    if (i.method === 'DELETE' && template === '/1.3/database/{uuid}' && uuid) state.delete(key(uuid));
    recordings.push(recording);
  }
  return recordings;
}

/** Whether a recording's service was in the condition the fake's service is in now. */
function sameCondition(recorded: ServiceObject | undefined, current: ServiceObject): boolean {
  if (!recorded) return true;
  for (const field of ['type', 'plan', 'powered', 'termination_protection'] as const) {
    if (recorded[field] !== undefined && current[field] !== undefined && recorded[field] !== current[field])
      return false;
  }
  return true;
}

/** Deep copy with every string's `from` replaced by `to`, pairs in order. */
function replaced(value: unknown, pairs: Array<[string, string]>): unknown {
  if (typeof value === 'string') {
    let text = value;
    for (const [from, to] of pairs) if (from) text = text.split(from).join(to);
    return text;
  }
  if (Array.isArray(value)) return value.map((v) => replaced(v, pairs));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replaced(v, pairs)]));
  return value;
}

export async function startFakeUpCloud(credential: {
  username: string;
  password: string;
}): Promise<FakeUpCloud> {
  const recordings = loadRecordings();
  const services = new Map<string, FakeService>();
  const unmatched: RequestSeen[] = [];
  const refused: RequestSeen[] = [];
  const served: FakeUpCloud['served'] = [];
  const expected = `Basic ${Buffer.from(`${credential.username}:${credential.password}`).toString('base64')}`;

  function answer(seen: RequestSeen, query: string | null): { status: number; body: unknown; type: string } {
    const { template, uuid, item } = templateOf(seen.path);
    const service = uuid ? services.get(uuid) : undefined;
    if (uuid && !service) return notCovered(seen);
    const shape = shapeOf(seen.body);
    const candidates = recordings.filter(
      (r) =>
        r.method === seen.method &&
        r.template === template &&
        (r.query ?? null) === query &&
        r.shape === shape &&
        (!service || (r.service !== undefined && sameCondition(r.service.before, service.last))),
    );
    // Among equals, a success: the recorded refusals came from conditions the filter already tells.
    const recording = candidates.find((r) => r.status < 300) ?? candidates[0];
    if (!recording) return notCovered(seen);

    let body: unknown;
    if (template === '/1.3/database' && seen.method === 'GET') {
      // The list: the services made here, each as last answered.
      body = [...services.values()].map((s) => s.last);
    } else if (template === '/1.3/database' && seen.method === 'POST') {
      const request = seen.body as { hostname_prefix: string; title: string; labels?: unknown[] };
      const made: FakeService = {
        uuid: `09${randomUUID().slice(2)}`,
        name: request.hostname_prefix,
        title: request.title,
        labels: request.labels ?? [],
        last: {} as ServiceObject,
      };
      const recorded = recording.response_body as ServiceObject;
      body = {
        ...(replaced(recorded, [
          [recorded.uuid, made.uuid],
          [recorded.name, made.name],
        ]) as ServiceObject),
        title: made.title,
        labels: made.labels,
      };
      made.last = body as ServiceObject;
      services.set(made.uuid, made);
    } else {
      const pairs: Array<[string, string]> = [];
      if (service && recording.service) {
        pairs.push([recording.service.uuid, service.uuid]);
        pairs.push([recording.service.name, service.name]);
      }
      body = replaced(recording.response_body, pairs);
      // The user or database the path or the body named is the test's, in the answer too.
      const named = (r: unknown) => (r ?? {}) as { username?: string; name?: string };
      const asked = item ?? named(seen.body).username ?? named(seen.body).name;
      const recorded =
        recording.item ?? named(recording.request_body).username ?? named(recording.request_body).name;
      if (asked && recorded && body && typeof body === 'object' && !Array.isArray(body)) {
        const object = body as Record<string, unknown>;
        if (object.username === recorded) object.username = asked;
        if (object.name === recorded) object.name = asked;
      }
      if (service && isService(body) && recording.status < 300) {
        body = { ...body, title: service.title, labels: service.labels };
        service.last = body as ServiceObject;
      }
      if (
        service &&
        seen.method === 'DELETE' &&
        template === '/1.3/database/{uuid}' &&
        recording.status < 300
      )
        services.delete(service.uuid);
    }
    served.push({
      ...seen,
      status: recording.status,
      recording: `${recording.source.split('/').pop()}#${recording.index}`,
    });
    return {
      status: recording.status,
      body,
      type: recording.response_headers['Content-Type'] ?? 'application/json',
    };
  }

  function notCovered(seen: RequestSeen) {
    unmatched.push(seen);
    return {
      status: 501,
      type: 'application/problem+json',
      body: { title: 'No recorded UpCloud exchange covers this request', status: 501, request: seen },
    };
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown = null;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {
        body = text;
      }
      const seen: RequestSeen = { method: req.method ?? 'GET', path: url.pathname, body };
      let result: { status: number; body: unknown; type: string };
      if (req.headers.authorization !== expected) {
        refused.push(seen);
        result = {
          status: 401,
          type: 'application/json; charset=UTF-8',
          body: {
            error: {
              error_code: 'AUTHENTICATION_FAILED',
              error_message: 'Authentication failed using the given username and password.',
            },
          },
        };
      } else {
        const query = url.search ? url.search.slice(1) : null;
        result = answer(seen, query);
      }
      if (result.status === 204) {
        res.writeHead(204).end();
        return;
      }
      res.writeHead(result.status, { 'content-type': result.type }).end(JSON.stringify(result.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    unmatched,
    refused,
    served,
    services: () => [...services.values()],
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
