// Answers of the tools API (/api/v1/tools): engine health, credits (both in tools-answers.ts), and the
// files conversions answer with; and the multipart bodies of office conversion and merge, as OpenAPI
// shows them.
import { Type } from 'typebox';
import { OFFICE_EXTENSIONS, TOOLS_LIMITS } from '../../domain/tools.js';
import type { DocumentedBody } from '../types.js';
import { fileResponse } from './common.js';

export { BalanceResponse, HealthResponse, UsageResponse } from './tools-answers.js';

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
