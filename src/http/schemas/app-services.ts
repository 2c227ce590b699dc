// Answers of an application's services routes (src/http/routes/platform/app-services.ts).
import { Type } from 'typebox';
import { Data, Nullable, OneOf, Timestamp } from './common.js';

/** services/app-services/index.ts, view. */
export const AppService = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  kind: OneOf(['service', 'container'], {
    description: '`service` (spec.services) or `container` (spec.container_services): their ids overlap',
  }),
  type: Type.String(),
  version: Nullable(Type.String({ description: 'as the document wrote it; null: latest' })),
  memory: Nullable(Type.String()),
  volume_size: Nullable(Type.String()),
  settings: Type.Record(Type.String(), Type.Unknown()),
  command: Nullable(Type.String()),
  status: OneOf(['provisioning', 'running', 'restarting', 'failed', 'unavailable']),
  status_reason: Nullable(Type.String()),
  engine_version: Nullable(Type.String({ description: 'the server version that runs, e.g. 15.18' })),
  host: Nullable(Type.String()),
  port: Nullable(Type.Integer()),
  restarts: Type.Integer(),
  last_restart_at: Nullable(Timestamp),
  last_restart_reason: Nullable(Type.String()),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const AppServicesResponse = Data(Type.Array(AppService), "The application's services");
export const AppServiceResponse = Data(AppService, 'The service');

const EnvironmentEntries = Type.Array(Type.Object({ key: Type.String(), value: Type.String() }));

export const ServiceEnvironmentResponse = Data(
  EnvironmentEntries,
  'The names this service injects into the application, with their values',
);

export const ConnectionFormatsResponse = Data(
  Type.Array(Type.Object({ name: OneOf(['url', 'jdbc', 'cli']), value: Type.String() })),
  'Connection strings for the service',
);

export const ServiceLogsResponse = Data(
  Type.Array(Type.Object({ line: Type.String() })),
  "The newest lines of the service's server log, oldest first",
);

export const InjectedSecretsResponse = Data(
  Type.Array(
    Type.Object({
      key: Type.String(),
      value: Type.String({ description: 'always masked' }),
      service: Type.String({ description: 'the service that injects it' }),
      overridden: Type.Boolean({ description: "true: a secret of the application's with this key wins" }),
    }),
  ),
  "The names the application's services inject, values masked",
);
