// The answers the CLI reads, as the types of the API's own response schemas (src/http/schemas/): a
// shape is written once, there. Type-only imports: the client loads nothing of the server, and a field
// it reads that the server does not send fails the type-check (test/architecture/response-types.test.ts
// keeps copies from coming back).
import type { Static, TSchema } from 'typebox';
import type { SignedInResponse } from '../../http/schemas/accounts.js';
import type {
  MaintenanceResponse,
  MigrationStatusResponse,
  ServiceResponse,
  TaskResponse,
} from '../../http/schemas/dbapi.js';
import type {
  ApplicationsResponse,
  ApplyResponse as ApplySchema,
  ManagedDatabaseResponse,
  ObjectStorageResponse,
  TeamManagedDatabasesResponse,
  TeamObjectStoragesResponse,
} from '../../http/schemas/infrastructure.js';
import type {
  IssuedCredentialResponse,
  ScheduleResponse,
  TeamsResponse,
  UserResponse,
} from '../../http/schemas/platform.js';
import type {
  DeletedApplicationResponse,
  Deployment as DeploymentSchema,
  ExecResponse,
  LogsResponse,
  StatusResponse,
  UploadDeployingResponse,
} from '../../http/schemas/runtime.js';
import type { BalanceResponse } from '../../http/schemas/tools-answers.js';
import type { GitWebhookResponse } from '../../http/schemas/webhooks.js';

/** The `data` of an answer in the platform API's `{data: …}` envelope. */
type DataOf<S extends TSchema> = Static<S> extends { data: infer D } ? D : never;
/** One entry of a listed `data`. */
type EntryOf<S extends TSchema> = DataOf<S> extends ReadonlyArray<infer E> ? E : never;

export type User = DataOf<typeof UserResponse>;
export type Team = EntryOf<typeof TeamsResponse>;
export type IssuedCredential = DataOf<typeof IssuedCredentialResponse>;
export type Schedule = DataOf<typeof ScheduleResponse>;
export type AppSummary = EntryOf<typeof ApplicationsResponse>;
export type AppStatus = DataOf<typeof StatusResponse>;
export type DeletedApplication = DataOf<typeof DeletedApplicationResponse>;
export type Deployment = Static<typeof DeploymentSchema>;
export type LogLine = EntryOf<typeof LogsResponse>;
export type ExecResult = DataOf<typeof ExecResponse>;
export type SourceUpload = DataOf<typeof UploadDeployingResponse>;
export type ApplyAnswer = Static<typeof ApplySchema>;
export type TeamDatabase = EntryOf<typeof TeamManagedDatabasesResponse>;
export type TeamStorage = EntryOf<typeof TeamObjectStoragesResponse>;
export type StorageDetail = DataOf<typeof ObjectStorageResponse>;
/** GET /api/v1/managed-databases/{uuid}: the platform API's view of one managed database. */
export type PlatformDatabase = DataOf<typeof ManagedDatabaseResponse>;
/** /1.3's service object. */
export type ServiceObject = Static<typeof ServiceResponse>;
export type Task = Static<typeof TaskResponse>;
export type MigrationStatus = Static<typeof MigrationStatusResponse>;
export type Maintenance = Static<typeof MaintenanceResponse>;
export type Balance = DataOf<typeof BalanceResponse>;
export type SignedIn = DataOf<typeof SignedInResponse>;
export type GitWebhook = DataOf<typeof GitWebhookResponse>;
