// Engine-level operation failures carry a closed set of machine-readable codes; the /1.3 routes map
// them to HTTP with OPERATION_ERROR_STATUS so the code table in docs/api/dbapi.md has one source. They
// are part of the operations' interface (DatabaseOperationsDriver, ../types.ts), declared there.
export {
  OPERATION_ERROR_STATUS,
  OperationError,
  isOperationError,
  type OperationErrorCode,
} from '../types.js';
