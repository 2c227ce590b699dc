// Answers of the tools API (/api/v1/tools): engine health, credits, and the files conversions answer
// with; and the multipart bodies of office conversion and merge, as OpenAPI shows them.
import { Type } from 'typebox';
import { OFFICE_EXTENSIONS, TOOLS_LIMITS } from '../../domain/tools.js';
import type { DocumentedBody } from '../types.js';
import { Data, Nullable, OneOf, Timestamp, fileResponse } from './common.js';

const EngineState = OneOf(['idle', 'starting', 'ready', 'failed']);
const Queue = { running: Type.Integer(), queued: Type.Integer() };

export const HealthResponse = Data(
  Type.Object({
    status: OneOf(['ok', 'degraded']),
    engines: Type.Object({
      chromium: Type.Object({
        status: EngineState,
        jobs: Type.Integer(),
        failures: Type.Integer(),
        restarts: Type.Integer(),
        lastError: Nullable(Type.String()),
        ...Queue,
      }),
      libreoffice: Type.Object({
        status: EngineState,
        listeners: Type.Integer(),
        jobs: Type.Integer(),
        coldConversions: Type.Integer(),
        failures: Type.Integer(),
        restarts: Type.Integer(),
        lastError: Nullable(Type.String()),
        ...Queue,
      }),
      pdf: Type.Object({ status: Type.Literal('ready'), ...Queue }),
    }),
  }),
  'The engines and their queues',
);

export const BalanceResponse = Data(
  Type.Object({
    allowance: Type.Integer(),
    used: Type.Integer(),
    remaining: Type.Integer(),
    period: Type.String({ description: 'Calendar month in UTC, YYYY-MM' }),
    period_start: Timestamp,
    resets_at: Timestamp,
  }),
  "This month's credits",
);

export const UsageResponse = Type.Object(
  {
    data: Type.Array(
      Type.Object({
        id: Type.Integer(),
        type: OneOf(['charge', 'refund']),
        operation: Type.String({ description: 'The endpoint charged, e.g. `pdf.convert.html`' }),
        amount: Type.Integer({ description: '+1 for a charge, -1 for a refund' }),
        period: Type.String(),
        refund_of: Nullable(Type.Integer()),
        reason: Nullable(Type.String()),
        request_id: Nullable(Type.String()),
        created_at: Timestamp,
      }),
    ),
    meta: Type.Object({
      limit: Type.Integer(),
      next_before: Nullable(
        Type.Integer({ description: 'Pass as `before` for the next page; null on the last' }),
      ),
    }),
  },
  { description: 'Charges and refunds, newest first' },
);

const FILE_HEADERS = {
  'content-disposition': { type: 'string', description: 'attachment; filename="…"' },
  'x-credits-remaining': { type: 'integer', description: 'Credits left this month' },
  'x-blocked-requests': {
    type: 'integer',
    description: 'How many requests of the page were blocked (only when some were)',
  },
};

export const PdfFile = fileResponse(['application/pdf'], 'The PDF', FILE_HEADERS);
export const ImageFile = fileResponse(['image/png', 'image/jpeg'], 'The screenshot (format)', FILE_HEADERS);

const BinaryFile = (description: string) => Type.String({ format: 'binary', description });

/** POST /api/v1/tools/pdf/convert/office: one file in the multipart field `file`. */
export const OfficeUpload: DocumentedBody = {
  description: `One office file (≤ ${TOOLS_LIMITS.fileBytes / (1024 * 1024)} MiB), multipart field \`file\``,
  content: {
    'multipart/form-data': {
      schema: Type.Object({
        file: BinaryFile(`The document: ${OFFICE_EXTENSIONS.map((e) => `.${e}`).join(', ')}`),
      }),
    },
  },
};

/** POST /api/v1/tools/pdf/merge: the PDFs in order, each a multipart part `files` (or `files[]`). */
export const MergeUpload: DocumentedBody = {
  description: `${TOOLS_LIMITS.mergeMin} to ${TOOLS_LIMITS.mergeMax} PDF files, merged in the order sent`,
  content: {
    'multipart/form-data': {
      schema: Type.Object({
        files: Type.Array(BinaryFile('A PDF'), {
          minItems: TOOLS_LIMITS.mergeMin,
          maxItems: TOOLS_LIMITS.mergeMax,
          description: 'One part per file, named `files` (or `files[]`)',
        }),
      }),
    },
  },
};
