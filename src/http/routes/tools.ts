// The tools API (/api/v1/tools): PDF from URL/HTML/Markdown/office files, PDF merge, screenshots,
// credits. Authorization is the raw tools API key. Successful conversions answer with the file itself.
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../deps.js';
import { fieldError } from '../../domain/errors.js';
import {
  TOOLS_LIMITS,
  checkMergeCount,
  httpUrl,
  officeFile,
  pdfLayout,
  pdfName,
} from '../../domain/tools.js';
import { type PageSource, type ToolsService } from '../../services/tools/index.js';
import { principalOf } from '../types.js';
import { platformErrors } from '../schemas/errors.js';
import {
  BalanceResponse,
  HealthResponse,
  ImageFile,
  MergeUpload,
  OfficeUpload,
  PdfFile,
  UsageResponse,
} from '../schemas/tools.js';

/** A conversion reads its input and answers a file: it changes no resource (its credits are in the ledger). */
const CONVERSION = { none: 'a conversion changes no resource; its credits are charged in the credit ledger' };

const LengthField = Type.Optional(Type.String({ maxLength: 20 }));
const pdfFields = {
  landscape: Type.Optional(Type.Boolean()),
  printBackground: Type.Optional(Type.Boolean()),
  scale: Type.Optional(Type.Number({ minimum: 0.1, maximum: 2 })),
  paperWidth: LengthField,
  paperHeight: LengthField,
  marginTop: LengthField,
  marginBottom: LengthField,
  marginLeft: LengthField,
  marginRight: LengthField,
};
const UrlBody = Type.Object({
  url: Type.String({ minLength: 1, maxLength: TOOLS_LIMITS.urlLength }),
  ...pdfFields,
});
const HtmlBody = Type.Object({
  html: Type.String({ minLength: 1, maxLength: TOOLS_LIMITS.htmlChars }),
  ...pdfFields,
});
const MarkdownBody = Type.Object({
  markdown: Type.String({ minLength: 1, maxLength: TOOLS_LIMITS.markdownChars }),
  html: Type.Optional(Type.String({ maxLength: TOOLS_LIMITS.markdownChars })),
  ...pdfFields,
});
const shotFields = {
  width: Type.Integer({ minimum: TOOLS_LIMITS.sizeMin, maximum: TOOLS_LIMITS.sizeMax, default: 1920 }),
  height: Type.Integer({ minimum: TOOLS_LIMITS.sizeMin, maximum: TOOLS_LIMITS.sizeMax, default: 1080 }),
  format: Type.Union([Type.Literal('png'), Type.Literal('jpeg')], { default: 'png' }),
  fullPage: Type.Optional(Type.Boolean()),
  quality: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
};
const ShotUrlBody = Type.Object({
  url: Type.String({ minLength: 1, maxLength: TOOLS_LIMITS.urlLength }),
  ...shotFields,
});
const ShotHtmlBody = Type.Object({
  html: Type.String({ minLength: 1, maxLength: TOOLS_LIMITS.htmlChars }),
  ...shotFields,
});
const UsageQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 500, default: 50 }),
  before: Type.Optional(Type.Integer({ minimum: 1 })),
});

const tags = ['tools'];
const PDF_TYPES = ['application/pdf', 'application/json'];
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'application/json'];

/** A charged conversion: the file, or why not (no credits, a field, the size, the engine). */
const pdfResponses = { 200: PdfFile, ...platformErrors(401, 402, 413, 422, 502) };
const imageResponses = { 200: ImageFile, ...platformErrors(401, 402, 413, 422, 502) };

function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

function sendFile(
  reply: FastifyReply,
  file: { body: Buffer; type: string; filename: string; remaining: number; blocked?: string[] },
): FastifyReply {
  void reply
    .code(200)
    .header('content-type', file.type)
    .header('content-disposition', contentDisposition(file.filename))
    .header('x-credits-remaining', String(file.remaining))
    .header('cache-control', 'no-store');
  if (file.blocked && file.blocked.length > 0)
    void reply.header('x-blocked-requests', String(file.blocked.length));
  return reply.send(file.body);
}

interface UploadedFile {
  field: string;
  filename: string;
  bytes: Buffer;
}

/** Reads every file part; a too-large file or too many files is a 422, like the field errors. */
async function readUploads(
  request: FastifyRequest,
  maxFiles: number,
  field: string,
  fieldNames: readonly string[],
): Promise<UploadedFile[]> {
  if (!request.isMultipart()) {
    throw fieldError(field, `The ${field} field is required (send multipart/form-data).`);
  }
  const files: UploadedFile[] = [];
  try {
    for await (const part of request.parts()) {
      if (part.type !== 'file') continue;
      if (!fieldNames.includes(part.fieldname)) {
        // A part under another name is not ours: read past it.
        await part.toBuffer().catch(() => undefined);
        continue;
      }
      if (files.length >= maxFiles) {
        // Drain the rest so the connection stays usable, then refuse.
        await part.toBuffer().catch(() => undefined);
        files.push({ field: part.fieldname, filename: part.filename, bytes: Buffer.alloc(0) });
        continue;
      }
      files.push({ field: part.fieldname, filename: part.filename, bytes: await part.toBuffer() });
    }
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'FST_REQ_FILE_TOO_LARGE') {
      throw fieldError(
        field,
        `Each file may not be greater than ${TOOLS_LIMITS.fileBytes / 1024} kilobytes.`,
      );
    }
    if (code === 'FST_FILES_LIMIT') {
      throw fieldError(field, `The ${field} field must not have more than ${TOOLS_LIMITS.mergeMax} items.`);
    }
    throw error;
  }
  return files;
}

/**
 * The tools are served twice over the same use cases and credits: under `/api/v1/tools` with a tools
 * API key (the spec's API), and under `/api/v1/user/tools` with an API token or a browser session, so
 * that the dashboard's try-it form spends the signed-in user's credits without holding a tools key.
 */
interface ToolsApi {
  prefix: string;
  /** The caller's own credits and conversions: no team, any caller (`member`). */
  config: { auth: 'tools_key' | 'api_token'; role: 'member' };
  security: Array<Record<string, string[]>>;
}

const TOOLS_APIS: ToolsApi[] = [
  {
    prefix: '/api/v1/tools',
    config: { auth: 'tools_key' as const, role: 'member' as const },
    security: [{ toolsKey: [] }],
  },
  {
    prefix: '/api/v1/user/tools',
    config: { auth: 'api_token' as const, role: 'member' as const },
    security: [{ bearer: [] }],
  },
];

export function registerToolsRoutes(app: FastifyInstance, deps: RouteDeps): void {
  for (const api of TOOLS_APIS) registerTools(app, deps, api);
}

function registerTools(app: FastifyInstance, deps: RouteDeps, api: ToolsApi): void {
  const { config, security, prefix } = api;
  const tools = (): ToolsService => deps.services.tools;

  void app.register(async (scope) => {
    await scope.register(multipart, {
      limits: { fileSize: TOOLS_LIMITS.fileBytes, files: TOOLS_LIMITS.mergeMax + 1, fields: 50, parts: 100 },
    });

    scope.get(
      `${prefix}/health`,
      {
        config,
        schema: {
          tags,
          security,
          summary: 'Engines (Chromium, LibreOffice, PDF) and their queues',
          response: { 200: HealthResponse, ...platformErrors(401) },
        },
      },
      () => Promise.resolve({ data: tools().health() }),
    );

    scope.get(
      `${prefix}/balance`,
      {
        config,
        schema: {
          tags,
          security,
          summary: "This month's credits: allowance, used, remaining, reset",
          response: { 200: BalanceResponse, ...platformErrors(401) },
        },
      },
      async (request) => {
        const balance = await tools().credits.balance(principalOf(request).userId);
        return {
          data: {
            allowance: balance.allowance,
            used: balance.used,
            remaining: balance.remaining,
            period: balance.period,
            period_start: balance.periodStart,
            resets_at: balance.resetsAt,
          },
        };
      },
    );

    scope.get<{ Querystring: Static<typeof UsageQuery> }>(
      `${prefix}/usage`,
      {
        config,
        schema: {
          tags,
          security,
          summary: 'Charges and refunds, newest first (limit, before)',
          querystring: UsageQuery,
          response: { 200: UsageResponse, ...platformErrors(401, 422) },
        },
      },
      async (request) => {
        const entries = await tools().credits.usage(principalOf(request).userId, {
          limit: request.query.limit,
          beforeId: request.query.before,
        });
        const last = entries.at(-1);
        return {
          data: entries,
          meta: {
            limit: request.query.limit,
            next_before: entries.length === request.query.limit ? last?.id : null,
          },
        };
      },
    );

    const chargeAndSend = async <T extends { body: Buffer; blocked?: string[] }>(
      request: FastifyRequest,
      reply: FastifyReply,
      operation: string,
      file: { type: string; filename: string },
      work: () => Promise<T>,
    ) => {
      const { result, remaining } = await tools().charge(
        principalOf(request).userId,
        operation,
        request.id,
        work,
      );
      return sendFile(reply, {
        ...file,
        body: result.body,
        remaining,
        ...(result.blocked ? { blocked: result.blocked } : {}),
      });
    };

    /** The top URL is checked before anything is charged; the engine checks it again at connect time. */
    const publicUrl = async (value: string): Promise<URL> => {
      const url = httpUrl(value);
      await tools()
        .guard.resolve(url)
        .catch((error: unknown) => {
          throw fieldError('url', `The url must lead to a public address: ${(error as Error).message}.`);
        });
      return url;
    };

    scope.post<{ Body: Static<typeof UrlBody> }>(
      `${prefix}/pdf/convert/url`,
      {
        config: { ...config, produces: PDF_TYPES, audit: CONVERSION },
        schema: {
          tags,
          security,
          summary: 'PDF of a public web page (one credit)',
          body: UrlBody,
          response: pdfResponses,
        },
      },
      async (request, reply) => {
        const settings = pdfLayout(request.body);
        const url = await publicUrl(request.body.url);
        const source: PageSource = { kind: 'url', url: url.href };
        return chargeAndSend(
          request,
          reply,
          'pdf.convert.url',
          { type: 'application/pdf', filename: pdfName(url) },
          () => tools().renderPdf(source, settings),
        );
      },
    );

    scope.post<{ Body: Static<typeof HtmlBody> }>(
      `${prefix}/pdf/convert/html`,
      {
        config: { ...config, produces: PDF_TYPES, audit: CONVERSION },
        schema: {
          tags,
          security,
          summary: 'PDF of an HTML document (one credit)',
          body: HtmlBody,
          response: pdfResponses,
        },
      },
      async (request, reply) => {
        const settings = pdfLayout(request.body);
        const source: PageSource = { kind: 'html', html: request.body.html };
        return chargeAndSend(
          request,
          reply,
          'pdf.convert.html',
          { type: 'application/pdf', filename: 'document.pdf' },
          () => tools().renderPdf(source, settings),
        );
      },
    );

    scope.post<{ Body: Static<typeof MarkdownBody> }>(
      `${prefix}/pdf/convert/markdown`,
      {
        config: { ...config, produces: PDF_TYPES, audit: CONVERSION },
        schema: {
          tags,
          security,
          summary: 'PDF of a Markdown document, optionally in an HTML template (one credit)',
          body: MarkdownBody,
          response: pdfResponses,
        },
      },
      async (request, reply) => {
        const settings = pdfLayout(request.body);
        const html = tools().markdownToHtml(request.body.markdown, request.body.html);
        return chargeAndSend(
          request,
          reply,
          'pdf.convert.markdown',
          { type: 'application/pdf', filename: 'document.pdf' },
          () => tools().renderPdf({ kind: 'html', html }, { ...settings, printBackground: true }),
        );
      },
    );

    scope.post(
      `${prefix}/pdf/convert/office`,
      {
        // The upload is read part by part (readUploads): documented here, never validated by Fastify.
        config: { ...config, produces: PDF_TYPES, documentedBody: OfficeUpload, audit: CONVERSION },
        schema: {
          tags,
          security,
          summary:
            'PDF of an office document (Word, Excel, PowerPoint, OpenDocument, RTF, text, CSV; one credit)',
          response: pdfResponses,
        },
      },
      async (request, reply) => {
        const files = await readUploads(request, 1, 'file', ['file']);
        const file = files[0];
        if (!file || files.length !== 1)
          throw fieldError('file', file ? 'Send exactly one file.' : 'The file field is required.');
        const { extension, base } = officeFile(file.filename, file.bytes);
        return chargeAndSend(
          request,
          reply,
          'pdf.convert.office',
          { type: 'application/pdf', filename: `${base}.pdf` },
          async () => ({ body: await tools().office(file.bytes, extension) }),
        );
      },
    );

    scope.post(
      `${prefix}/pdf/merge`,
      {
        config: { ...config, produces: PDF_TYPES, documentedBody: MergeUpload, audit: CONVERSION },
        schema: {
          tags,
          security,
          summary: 'Merge 2 to 20 PDFs into one, in the order sent (one credit)',
          response: pdfResponses,
        },
      },
      async (request, reply) => {
        const files = await readUploads(request, TOOLS_LIMITS.mergeMax, 'files', ['files[]', 'files']);
        checkMergeCount(files.length);
        return chargeAndSend(
          request,
          reply,
          'pdf.merge',
          { type: 'application/pdf', filename: 'merged.pdf' },
          async () => ({
            body: await tools().merge(files.map((f) => f.bytes)),
          }),
        );
      },
    );

    const screenshot = async (
      request: FastifyRequest,
      reply: FastifyReply,
      operation: string,
      source: PageSource,
      body: Static<typeof ShotHtmlBody> | Static<typeof ShotUrlBody>,
    ) => {
      const settings = {
        width: body.width,
        height: body.height,
        format: body.format,
        fullPage: body.fullPage ?? false,
        ...(body.quality !== undefined ? { quality: body.quality } : {}),
      };
      return chargeAndSend(
        request,
        reply,
        operation,
        { type: `image/${body.format}`, filename: `screenshot.${body.format === 'jpeg' ? 'jpg' : 'png'}` },
        () => tools().screenshot(source, settings),
      );
    };

    scope.post<{ Body: Static<typeof ShotUrlBody> }>(
      `${prefix}/screenshot/url`,
      {
        config: { ...config, produces: IMAGE_TYPES, audit: CONVERSION },
        schema: {
          tags,
          security,
          summary: 'Screenshot of a public web page, PNG or JPEG (one credit)',
          body: ShotUrlBody,
          response: imageResponses,
        },
      },
      async (request, reply) => {
        const url = await publicUrl(request.body.url);
        return screenshot(request, reply, 'screenshot.url', { kind: 'url', url: url.href }, request.body);
      },
    );

    scope.post<{ Body: Static<typeof ShotHtmlBody> }>(
      `${prefix}/screenshot/html`,
      {
        config: { ...config, produces: IMAGE_TYPES, audit: CONVERSION },
        schema: {
          tags,
          security,
          summary: 'Screenshot of an HTML document, PNG or JPEG (one credit)',
          body: ShotHtmlBody,
          response: imageResponses,
        },
      },
      async (request, reply) => {
        return screenshot(
          request,
          reply,
          'screenshot.html',
          { kind: 'html', html: request.body.html },
          request.body,
        );
      },
    );
  });
}
