// Health checks of an application: the default path per application type and the status shown.
//
// Defaults (apply rule 8a gives a new application its type's default when the document omits the path):
// Ploi Cloud's documented defaults (a client written for Ploi gets the same checks):
// - laravel:   /                       the application's front page;
// - nodejs:    /                       a Node.js server has no conventional health route;
// - wordpress: /wp-admin/install.php   answers 200 before and after installation, without a theme.
// Applications created before these defaults keep the path they had (migration 019 stored it).
import type { ApplicationType } from './applications.js';

export const APPLICATION_TYPES: readonly ApplicationType[] = ['laravel', 'nodejs', 'wordpress'];

export const DEFAULT_HEALTH_CHECK_PATH: Readonly<Record<ApplicationType, string>> = {
  laravel: '/',
  nodejs: '/',
  wordpress: '/wp-admin/install.php',
};

/** The path checked: the stored one, or the type's default when none is stored. */
export function effectiveHealthCheckPath(type: ApplicationType, stored: string | null): string {
  return stored ?? DEFAULT_HEALTH_CHECK_PATH[type];
}

/**
 * Status shown for an application's health check. With checks disabled the status cannot be
 * monitored (spec, States rule 3); with them enabled it is unknown until a runtime reports.
 */
export type HealthCheckStatus = 'not monitored' | 'unknown' | 'healthy' | 'unhealthy';

export function healthCheckStatus(enabled: boolean): HealthCheckStatus {
  return enabled ? 'unknown' : 'not monitored';
}
