// The tools use cases: charge a credit, run the work on a warm engine, give the credit back on failure.
// One ToolsService per context, built by src/composition.ts on first use, so engines start lazily (never
// in buildApp) and stop with the context.
import os from 'node:os';
import MarkdownIt from 'markdown-it';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Clock } from '../../domain/clock.js';
import type { Database } from '../../db/schema/index.js';
import { AppError, fieldError } from '../../domain/errors.js';
import {
  CHROMIUM_PATH,
  ChromiumEngine,
  EngineError,
  PageBlockedError,
  type EngineStatus,
  type PageSource,
  type PdfSettings,
  type ScreenshotSettings,
} from '../../drivers/chromium/engine.js';
import {
  OfficeEngine,
  OfficeEngineError,
  UnreadableDocumentError,
  type OfficeConvertOptions,
  type OfficeStatus,
} from '../../drivers/libreoffice/engine.js';
import { createAddressGuard, BlockedAddressError, type AddressGuard } from '../../drivers/net/guard.js';
import {
  createPdfPool,
  DEFAULT_PDF_LIMITS,
  InvalidPdfError,
  PdfLimitError,
  type PdfLimits,
} from '../../drivers/pdf/merge.js';
import { createCreditLedger, type CreditLedger } from './credits.js';
import { MARKDOWN_STYLESHEET } from './markdown-style.js';

/** What a page to render is (a URL or HTML), as routes pass it. */
export type { PageSource };
import { createWorkQueue, type WorkQueue } from './queue.js';

export interface ToolsOptions {
  chromiumPath: string;
  /** Jobs Chromium runs at once (warm slots). */
  chromiumSlots: number;
  chromiumTimeoutMs: number;
  chromiumMaxQueued: number;
  chromiumJobsPerSlot: number;
  chromiumJobsPerBrowser: number;
  officeListeners: number;
  officeTimeoutMs: number;
  officeMaxQueued: number;
  officeJobsPerListener: number;
  mergeMaxQueued: number;
  /** Merges at once, each on its own worker thread. */
  mergeWorkers: number;
  mergeLimits: PdfLimits;
}

export const DEFAULT_TOOLS_OPTIONS: ToolsOptions = {
  chromiumPath: CHROMIUM_PATH,
  // One rendering job per core: more only interleave on the same cores and cost CPU per job (measured on
  // 2 cores: 2 slots 33-40 PDFs/s at 31-39 ms of CPU each, 4 slots 27-32 PDFs/s at 45-53 ms).
  chromiumSlots: Math.max(2, os.availableParallelism()),
  chromiumTimeoutMs: 30_000,
  chromiumMaxQueued: 100,
  chromiumJobsPerSlot: 200,
  chromiumJobsPerBrowser: 2_000,
  officeListeners: 2,
  officeTimeoutMs: 60_000,
  officeMaxQueued: 50,
  officeJobsPerListener: 200,
  mergeMaxQueued: 100,
  // Leaves a core to the event loop and the other engines.
  mergeWorkers: Math.max(1, Math.min(2, os.availableParallelism() - 1)),
  mergeLimits: DEFAULT_PDF_LIMITS,
};

export interface Charged<T> {
  result: T;
  remaining: number;
  blocked?: string[];
}

export interface ToolsHealth {
  status: 'ok' | 'degraded';
  engines: {
    chromium: EngineStatus & { running: number; queued: number };
    libreoffice: OfficeStatus & { running: number; queued: number };
    pdf: { status: 'ready'; running: number; queued: number };
  };
}

export interface ToolsService {
  readonly credits: CreditLedger;
  readonly guard: AddressGuard;
  /** Reserve a credit, run `work`, refund when it throws. */
  charge<T>(
    userId: number,
    operation: string,
    requestId: string,
    work: () => Promise<T>,
  ): Promise<{ result: T; remaining: number }>;
  renderPdf(source: PageSource, settings: PdfSettings): Promise<{ body: Buffer; blocked: string[] }>;
  screenshot(source: PageSource, settings: ScreenshotSettings): Promise<{ body: Buffer; blocked: string[] }>;
  markdownToHtml(markdown: string, template?: string): string;
  office(bytes: Buffer, extension: string, options?: OfficeConvertOptions): Promise<Buffer>;
  merge(files: readonly Uint8Array[]): Promise<Buffer>;
  health(): ToolsHealth;
  /** Engines, for tests that simulate crashes. */
  readonly engines: { chromium: ChromiumEngine; office: OfficeEngine };
  close(): Promise<void>;
}

function engineFailure(error: unknown): AppError {
  if (error instanceof AppError) return error;
  if (error instanceof PageBlockedError || error instanceof BlockedAddressError) {
    const blocked = error instanceof PageBlockedError ? error.blockedBy : error;
    return fieldError('url', `The url must lead to a public address: ${blocked.message}.`);
  }
  if (error instanceof UnreadableDocumentError) {
    return fieldError('file', `The file could not be read: ${error.message}.`);
  }
  if (error instanceof PdfLimitError) {
    // A 413 body is `{message}`; a 422 names the limit under `files`, like the other merge refusals.
    return error.tooLarge
      ? new AppError('payload_too_large', error.message)
      : fieldError('files', error.message);
  }
  if (error instanceof InvalidPdfError) {
    return fieldError(`files.${error.index}`, `The file files.${error.index} ${error.message}.`);
  }
  const detail =
    error instanceof EngineError || error instanceof OfficeEngineError ? `: ${error.message}` : '';
  return new AppError('engine_failed', `The conversion engine failed${detail}. Please retry later.`, {
    cause: error,
  });
}

/** What the tools service uses; src/composition.ts builds it. */
export interface ToolsDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  /** BERTH_TOOLS_ALLOW_PRIVATE: the private addresses pages may reach. */
  allowPrivate: readonly string[];
  /** BERTH_TOOLS_MONTHLY_CREDITS: each key's monthly allowance. */
  monthlyCredits: number;
}

/** The tools service of a context; src/composition.ts makes the one each context has. */
export function createToolsService(deps: ToolsDeps, options: ToolsOptions): ToolsService {
  const guard = createAddressGuard({ allow: deps.allowPrivate });
  const credits = createCreditLedger({
    db: deps.db,
    clock: deps.clock,
    allowance: () => deps.monthlyCredits,
  });
  const chromium = new ChromiumEngine({
    executablePath: options.chromiumPath,
    slots: options.chromiumSlots,
    jobTimeoutMs: options.chromiumTimeoutMs,
    maxJobsPerSlot: options.chromiumJobsPerSlot,
    maxJobsPerBrowser: options.chromiumJobsPerBrowser,
    guard,
    maxResourceBytes: 50 * 1024 * 1024,
  });
  const office = new OfficeEngine({
    listeners: options.officeListeners,
    jobTimeoutMs: options.officeTimeoutMs,
    maxJobsPerListener: options.officeJobsPerListener,
    startTimeoutMs: 60_000,
  });
  const chromiumQueue = createWorkQueue({
    name: 'Chromium',
    concurrency: options.chromiumSlots,
    maxQueued: options.chromiumMaxQueued,
    secondsPerJob: 0.2,
  });
  const officeQueue = createWorkQueue({
    name: 'LibreOffice',
    concurrency: options.officeListeners,
    maxQueued: options.officeMaxQueued,
    secondsPerJob: 0.5,
  });
  // pdf-lib runs on worker threads; the queue bounds how many merges wait for one.
  const pdf = createPdfPool({ size: options.mergeWorkers, limits: options.mergeLimits });
  const mergeQueue = createWorkQueue({
    name: 'merge',
    concurrency: options.mergeWorkers,
    maxQueued: options.mergeMaxQueued,
    secondsPerJob: 0.05,
  });
  const markdown = new MarkdownIt({ html: false, linkify: true, typographer: false });

  const queued = (queue: WorkQueue) => ({ running: queue.running, queued: queue.queued });

  return {
    credits,
    guard,
    engines: { chromium, office },

    async charge(userId, operation, requestId, work) {
      const reservation = await credits.reserve(userId, operation, requestId);
      try {
        const result = await work();
        return { result, remaining: reservation.remaining };
      } catch (error) {
        const mapped = engineFailure(error);
        await credits.refund(reservation, mapped.message).catch((refundError: unknown) => {
          deps.logger.error({ err: refundError, chargeId: reservation.chargeId }, 'credit refund failed');
        });
        if (mapped.status >= 500) deps.logger.warn({ err: error, operation }, 'tools job failed');
        throw mapped;
      }
    },

    renderPdf(source, settings) {
      return chromiumQueue.run(() => chromium.pdf(source, settings));
    },

    screenshot(source, settings) {
      return chromiumQueue.run(() => chromium.screenshot(source, settings));
    },

    markdownToHtml(text, template) {
      const body = markdown.render(text);
      if (template !== undefined) {
        // Ploi/Gotenberg templates mark the spot with {{ toHTML "file.md" }}; {{ content }} works too.
        const marker = /\{\{\s*(?:toHTML\s+"[^"]*"|content)\s*\}\}/;
        if (marker.test(template)) return template.replace(marker, () => body);
        return template.includes('</body>')
          ? template.replace('</body>', () => `${body}</body>`)
          : template + body;
      }
      return `<!doctype html><html><head><meta charset="utf-8"><style>${MARKDOWN_STYLESHEET}</style></head><body><main>${body}</main></body></html>`;
    },

    office(bytes, extension, convertOptions) {
      return officeQueue.run(() => office.convert(bytes, extension, convertOptions));
    },

    merge(files) {
      return mergeQueue.run(() => pdf.merge(files));
    },

    health() {
      const c = chromium.status();
      const o = office.status();
      return {
        status: c.status === 'failed' || o.status === 'failed' ? 'degraded' : 'ok',
        engines: {
          chromium: { ...c, ...queued(chromiumQueue) },
          libreoffice: { ...o, ...queued(officeQueue) },
          pdf: { status: 'ready', ...queued(mergeQueue) },
        },
      };
    },

    async close() {
      await Promise.all([chromium.close(), office.close(), pdf.close()]);
    },
  };
}
