// The listener of BERTH_METRICS_ADDR: `GET /metrics` in Prometheus' text format and nothing else, apart
// from the API (which never serves /metrics). No credential: the operator binds it where only the
// scraper reaches (docs/security.md, "Metrics").
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Metrics } from '../services/metrics/index.js';

export interface MetricsServer {
  /** `http://host:port`, the port the listener got (BERTH_METRICS_ADDR may say 0). */
  readonly url: string;
  close(): Promise<void>;
}

export async function startMetricsServer(
  metrics: Pick<Metrics, 'render'>,
  listen: { host: string; port: number },
  logger: { warn(obj: object, msg: string): void },
): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      res
        .writeHead(404, { 'content-type': 'text/plain' })
        .end('Not found: this listener serves GET /metrics only.\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('Method not allowed.\n');
      return;
    }
    metrics.render().then(
      ({ contentType, body }) => {
        res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : body);
      },
      (error: unknown) => {
        logger.warn({ err: error }, 'metrics: scrape failed');
        res.writeHead(500, { 'content-type': 'text/plain' }).end('The metrics could not be read.\n');
      },
    );
  });
  server.keepAliveTimeout = 65_000;
  server.listen(listen.port, listen.host);
  await once(server, 'listening'); // rejects with the 'error' of a port that cannot be had
  const { port } = server.address() as AddressInfo;
  const host = listen.host.includes(':') ? `[${listen.host}]` : listen.host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}
