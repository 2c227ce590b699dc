// What a route registrar receives (built once in src/app.ts): the services and the few things beside
// them that routes use. Routes never see the context, the store or a repository.
import type { Services } from '../composition.js';
import type { Clock } from '../domain/clock.js';
import type { IdentityService } from '../services/identity.js';

export interface RouteDeps {
  /** Every service of the context (src/composition.ts). */
  readonly services: Services;
  /** Users, teams and credentials. */
  readonly identity: IdentityService;
  readonly clock: Clock;
  /** Whether the store answers (/readyz). */
  ping(): Promise<boolean>;
}
