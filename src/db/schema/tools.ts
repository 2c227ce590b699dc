// Tables of the tools API: the credits each user has used per month, and the ledger of every charge and refund.
import type { Generated } from 'kysely';

export interface ToolsCreditUsageTable {
  user_id: number;
  /** Calendar month in UTC, `YYYY-MM`. A new month starts with a new row, which is the monthly reset. */
  period: string;
  /** Credits held by successful or in-flight calls; never above the allowance (checked in the UPDATE). */
  used: number;
  updated_at: string;
}

export type ToolsLedgerKind = 'charge' | 'refund';

export interface ToolsLedgerTable {
  id: Generated<number>;
  user_id: number;
  period: string;
  kind: ToolsLedgerKind;
  /** The endpoint that was charged, e.g. `pdf.convert.html`. */
  operation: string;
  /** +1 for a charge, -1 for a refund. */
  amount: number;
  /** For a refund: the charge it gives back (unique, so a charge is refunded at most once). */
  refund_of: number | null;
  /** For a refund: why the call failed. */
  reason: string | null;
  request_id: string | null;
  created_at: string;
}

export interface ToolsTables {
  tools_credit_usage: ToolsCreditUsageTable;
  tools_ledger: ToolsLedgerTable;
}
