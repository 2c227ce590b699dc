// Per-bucket CORS (Put/Get/DeleteBucketCors) and the answers browsers get: the preflight OPTIONS and
// the Access-Control-* headers of actual requests, computed from the bucket's rules as S3 does.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BucketRow, ObjectMetadata } from './metadata.js';
import { errors, S3Error } from './errors.js';
import type { FeatureExchange } from './exchange.js';
import { lookupCache } from './lookup-cache.js';
import { headerValue } from './sigv4.js';
import { elements, text, xmlDocument } from './xml.js';

export interface CorsRule {
  id?: string;
  origins: string[];
  methods: string[];
  headers: string[];
  expose: string[];
  maxAge?: number;
}

const METHODS = new Set(['GET', 'PUT', 'POST', 'DELETE', 'HEAD']);
const MAX_RULES = 100;
/** Values end up in response headers: printable ASCII only, so a rule can never split a header. */
const ORIGIN = /^[\x21-\x7e]{1,512}$/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/;

/** Headers exposed when a bucket has no CORS configuration (see `answer`). */
const DEFAULT_EXPOSED =
  'ETag, Content-Length, Content-Range, Content-Type, Last-Modified, Accept-Ranges, x-amz-request-id';

const corsForbidden = () =>
  new S3Error(
    'AccessForbidden',
    403,
    "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headersare not whitelisted by the resource's CORS spec.",
  );
const noSuchCors = (bucket: string) =>
  new S3Error('NoSuchCORSConfiguration', 404, 'The CORS configuration does not exist', {
    BucketName: bucket,
  });

const atMostOneStar = (value: string) => value.split('*').length <= 2;

/** Parses and validates a CORSConfiguration document (S3's limits: 100 rules, one `*` per value). */
export function parseCors(xml: string): CorsRule[] {
  if (!/<CORSConfiguration[\s>]/.test(xml)) throw errors.malformedXml();
  const rules = elements(xml, 'CORSRule').map((r): CorsRule => {
    const all = (name: string) => elements(r, name).map((v) => text(`<x>${v}</x>`, 'x')!.trim());
    const id = text(r, 'ID');
    const maxAgeText = text(r, 'MaxAgeSeconds')?.trim();
    const rule: CorsRule = {
      ...(id !== undefined ? { id } : {}),
      origins: all('AllowedOrigin'),
      methods: all('AllowedMethod'),
      headers: all('AllowedHeader'),
      expose: all('ExposeHeader'),
      ...(maxAgeText !== undefined ? { maxAge: Number(maxAgeText) } : {}),
    };
    if (rule.origins.length === 0 || rule.methods.length === 0) throw errors.malformedXml();
    for (const m of rule.methods) {
      if (!METHODS.has(m))
        throw errors.invalidRequest(
          `Found unsupported HTTP method in CORS config. Unsupported method is ${m}`,
        );
    }
    for (const o of rule.origins) {
      if (!ORIGIN.test(o) || !atMostOneStar(o))
        throw errors.invalidRequest(`AllowedOrigin "${o}" can not have more than one wildcard.`);
    }
    for (const h of rule.headers) {
      if (!TOKEN.test(h) || !atMostOneStar(h))
        throw errors.invalidRequest(`AllowedHeader "${h}" can not have more than one wildcard.`);
    }
    for (const h of rule.expose) if (!TOKEN.test(h) || h.includes('*')) throw errors.malformedXml();
    if (id !== undefined && id.length > 255) throw errors.malformedXml();
    if (rule.maxAge !== undefined && !(Number.isSafeInteger(rule.maxAge) && rule.maxAge >= 0))
      throw errors.malformedXml();
    return rule;
  });
  if (rules.length === 0 || rules.length > MAX_RULES) throw errors.malformedXml();
  return rules;
}

function wildcard(pattern: string, value: string, caseless: boolean): boolean {
  const [p, v] = caseless ? [pattern.toLowerCase(), value.toLowerCase()] : [pattern, value];
  const star = p.indexOf('*');
  if (star < 0) return p === v;
  const head = p.slice(0, star);
  const tail = p.slice(star + 1);
  return v.length >= head.length + tail.length && v.startsWith(head) && v.endsWith(tail);
}

/** The first rule allowing this origin, method and (for a preflight) request headers, as S3 picks. */
export function matchRule(
  rules: readonly CorsRule[],
  origin: string,
  method: string,
  requestHeaders: readonly string[] = [],
): CorsRule | undefined {
  return rules.find(
    (r) =>
      r.origins.some((o) => wildcard(o, origin, false)) &&
      r.methods.includes(method) &&
      requestHeaders.every((h) => r.headers.some((a) => wildcard(a, h, true))),
  );
}

export function createCors(meta: ObjectMetadata, ttlMs: number) {
  // A bucket's rules are read on every browser request; like buckets and keys, they are reused briefly.
  const cache = lookupCache<{ bucket: BucketRow; rules: CorsRule[] | undefined }>(ttlMs);

  /** A storage's bucket, or (storage unknown: a preflight on the shared endpoint) the first of that name. */
  const load = (storageId: number | undefined, name: string) =>
    cache.get(`${storageId ?? '*'}/${name}`, async () => {
      const bucket =
        storageId === undefined ? await meta.firstBucketNamed(name) : await meta.findBucket(storageId, name);
      if (!bucket) return undefined;
      const stored = await meta.getCors(bucket.id);
      return { bucket, rules: stored === undefined ? undefined : (JSON.parse(stored) as CorsRule[]) };
    });

  const forget = (bucket: BucketRow) => {
    cache.forget(`${bucket.object_storage_id}/${bucket.name}`);
    cache.forget(`*/${bucket.name}`);
  };

  return {
    async put(x: FeatureExchange, bucket: BucketRow): Promise<void> {
      x.allow({ action: 's3:PutBucketCORS', bucket: bucket.name });
      const rules = parseCors(await x.readXml());
      await meta.putCors(bucket.id, JSON.stringify(rules));
      forget(bucket);
      x.reply(200);
    },

    async get(x: FeatureExchange, bucket: BucketRow): Promise<void> {
      x.allow({ action: 's3:GetBucketCORS', bucket: bucket.name });
      const stored = await meta.getCors(bucket.id);
      if (stored === undefined) throw noSuchCors(bucket.name);
      const rules = JSON.parse(stored) as CorsRule[];
      x.replyXml('CORSConfiguration', {
        CORSRule: rules.map((r) => ({
          ID: r.id,
          AllowedHeader: r.headers,
          AllowedMethod: r.methods,
          AllowedOrigin: r.origins,
          ExposeHeader: r.expose,
          MaxAgeSeconds: r.maxAge,
        })),
      });
    },

    async delete(x: FeatureExchange, bucket: BucketRow): Promise<void> {
      // S3 has no separate permission for deleting the configuration.
      x.allow({ action: 's3:PutBucketCORS', bucket: bucket.name });
      await meta.deleteCors(bucket.id);
      forget(bucket);
      x.reply(204);
    },

    /**
     * Browser side, before authentication (a preflight carries no credentials). A bucket with CORS
     * rules gets exactly what they allow: a preflight nothing matches is refused with 403, an actual
     * request nothing matches gets no Access-Control-* headers, so the browser withholds the response.
     * Without rules (or without a bucket) any origin is allowed: every request carries its own
     * signature and no ambient credential, so that exposes nothing a holder of the URL could not read.
     * Returns true when it answered the request (a preflight). `storageId` is the storage the request
     * names (its own endpoint, or the access key it claims); undefined: the first bucket of that name.
     */
    async answer(
      req: IncomingMessage,
      res: ServerResponse,
      storageId: number | undefined,
      bucketName: string | undefined,
    ): Promise<boolean> {
      const origin = headerValue(req.headers, 'origin');
      const requestMethod = headerValue(req.headers, 'access-control-request-method');
      // OPTIONS is CORS's method only: without an Origin and a method to ask about there is nothing to
      // answer (400, as on S3).
      if (req.method === 'OPTIONS' && (origin === undefined || requestMethod === undefined))
        throw new S3Error('BadRequest', 400, 'Insufficient information. Origin request header needed.');
      if (origin === undefined) return false;
      const preflight = req.method === 'OPTIONS';
      const found = bucketName === undefined ? undefined : await load(storageId, bucketName);
      res.setHeader('vary', 'Origin, Access-Control-Request-Headers, Access-Control-Request-Method');
      const requested = (headerValue(req.headers, 'access-control-request-headers') ?? '')
        .split(',')
        .map((h) => h.trim())
        .filter((h) => h !== '');
      if (found?.rules === undefined) {
        res.setHeader('access-control-allow-origin', origin);
        res.setHeader('access-control-expose-headers', DEFAULT_EXPOSED);
        if (!preflight) return false;
        res.writeHead(200, {
          'access-control-allow-methods': 'GET, PUT, POST, DELETE, HEAD',
          'access-control-allow-headers': requested.length > 0 ? requested.join(', ') : '*',
          'access-control-max-age': '3000',
          'content-length': 0,
        });
        res.end();
        return true;
      }
      // An actual request is matched by its method, or by the one it names (as RGW does).
      const rule = matchRule(
        found.rules,
        origin,
        requestMethod ?? req.method ?? 'GET',
        preflight ? requested : [],
      );
      if (rule) {
        res.setHeader('access-control-allow-origin', rule.origins.includes('*') ? '*' : origin);
        if (rule.expose.length > 0) res.setHeader('access-control-expose-headers', rule.expose.join(', '));
        if (!preflight) res.setHeader('access-control-allow-methods', rule.methods.join(', '));
      }
      if (!preflight) return false;
      if (!rule) {
        const error = corsForbidden();
        const body = xmlDocument('Error', { Code: error.code, Message: error.message });
        res.writeHead(403, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
        res.end(body);
        return true;
      }
      const headers: Record<string, string | number> = {
        'access-control-allow-methods': rule.methods.join(', '),
        'content-length': 0,
      };
      if (requested.length > 0) headers['access-control-allow-headers'] = requested.join(', ');
      if (rule.maxAge !== undefined) headers['access-control-max-age'] = rule.maxAge;
      res.writeHead(200, headers);
      res.end();
      return true;
    },
  };
}
