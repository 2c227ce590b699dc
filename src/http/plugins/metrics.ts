// Counts every API request for the operator's metrics (src/services/metrics/): by the route's pattern
// (`/api/v1/applications/:id`, never the URL, whose ids and names would make a series each) and status.
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../../services/metrics/index.js';

/** The label of a request no route matched (404s for any path). */
const UNMATCHED = 'unmatched';

export function registerMetrics(app: FastifyInstance, metrics: Pick<Metrics, 'httpRequest'>): void {
  app.addHook('onResponse', (request, reply, done) => {
    // routeOptions.url is the pattern; a 404 of the not-found handler has none.
    const route = request.is404 ? UNMATCHED : (request.routeOptions.url ?? UNMATCHED);
    metrics.httpRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}
