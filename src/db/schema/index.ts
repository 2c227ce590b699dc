// The whole store's shape: each feature declares its tables in its own file, composed here.
import type { FoundationTables } from './foundation.js';
import type { InfrastructureTables } from './infrastructure.js';
import type { ToolsTables } from './tools.js';
import type { ScheduledDeletionTables } from './scheduled-deletion.js';
import type { ObjectStorageTables } from './object-storage.js';
import type { ManagedInstancesTables } from './managed-instances.js';
import type { DbOperationsTables } from './db-operations.js';
import type { AppServicesTables } from './app-services.js';
import type { WebhookTables } from './webhooks.js';

export type Database = FoundationTables &
  InfrastructureTables &
  ToolsTables &
  ObjectStorageTables &
  ScheduledDeletionTables &
  ManagedInstancesTables &
  DbOperationsTables &
  AppServicesTables &
  WebhookTables;
