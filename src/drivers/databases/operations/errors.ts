// Engine-level operation failures carry a closed set of machine-readable codes; the /1.3 routes map
// them to HTTP with OPERATION_ERROR_STATUS so the code table in docs/api/dbapi.md has one source.
import { redactText } from '../../../domain/redact.js';

export type OperationErrorCode =
  | 'INVALID_SOURCE_URI'
  | 'SOURCE_UNREACHABLE'
  | 'SOURCE_AUTH_FAILED'
  | 'SOURCE_DATABASE_NOT_FOUND'
  | 'SOURCE_SSL_UNAVAILABLE'
  | 'SOURCE_VERSION_UNSUPPORTED'
  | 'ENGINE_MISMATCH'
  | 'DUMP_NOT_POSSIBLE'
  | 'REPLICATION_NOT_POSSIBLE'
  | 'MIGRATION_FAILED'
  | 'REPLICATION_NOT_RUNNING'
  | 'TARGET_UNREACHABLE'
  | 'UPGRADE_BINARIES_MISSING'
  | 'UPGRADE_VERSION_NOT_NEWER'
  | 'UPGRADE_EXTENSION_MISSING'
  | 'UPGRADE_FAILED'
  | 'PITR_NOT_SUPPORTED'
  | 'RECOVERY_TIME_INVALID'
  | 'RECOVERY_TIME_IN_FUTURE'
  | 'RECOVERY_TIME_BEFORE_BACKUPS'
  | 'NO_BASE_BACKUP'
  | 'CLONE_FAILED'
  | 'NO_MAINTENANCE_AVAILABLE'
  | 'COMMAND_FAILED';

/** HTTP status each code should be answered with when it surfaces synchronously in a /1.3 request. */
export const OPERATION_ERROR_STATUS: Record<OperationErrorCode, number> = {
  INVALID_SOURCE_URI: 400,
  SOURCE_UNREACHABLE: 422,
  SOURCE_AUTH_FAILED: 422,
  SOURCE_DATABASE_NOT_FOUND: 422,
  SOURCE_SSL_UNAVAILABLE: 422,
  SOURCE_VERSION_UNSUPPORTED: 422,
  ENGINE_MISMATCH: 400,
  DUMP_NOT_POSSIBLE: 422,
  REPLICATION_NOT_POSSIBLE: 422,
  MIGRATION_FAILED: 500,
  REPLICATION_NOT_RUNNING: 409,
  TARGET_UNREACHABLE: 409,
  UPGRADE_BINARIES_MISSING: 422,
  UPGRADE_VERSION_NOT_NEWER: 400,
  UPGRADE_EXTENSION_MISSING: 422,
  UPGRADE_FAILED: 500,
  PITR_NOT_SUPPORTED: 400,
  RECOVERY_TIME_INVALID: 400,
  RECOVERY_TIME_IN_FUTURE: 400,
  RECOVERY_TIME_BEFORE_BACKUPS: 400,
  NO_BASE_BACKUP: 409,
  CLONE_FAILED: 500,
  NO_MAINTENANCE_AVAILABLE: 409,
  COMMAND_FAILED: 500,
};

export class OperationError extends Error {
  constructor(
    readonly code: OperationErrorCode,
    message: string,
    /** Secrets (passwords) that must never appear in the message, e.g. from a source URI. */
    secrets: readonly string[] = [],
  ) {
    // Messages often quote engine stderr, which may echo a connection string: redact before storing.
    super(redactText(message, secrets));
    this.name = 'OperationError';
  }
}

export const isOperationError = (error: unknown): error is OperationError => error instanceof OperationError;
