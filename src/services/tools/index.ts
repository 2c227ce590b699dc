// The tools use cases: charge a credit, run the work on the tools engines (a driver, BERTH_TOOLS_DRIVER)
// behind a bounded queue per engine, give the credit back on failure. One ToolsService per context,
// built by src/composition.ts on first use, so engines start lazily (never in buildApp) and stop with
// the context.
import MarkdownIt from 'markdown-it';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Clock } from '../../domain/clock.js';
import type { Database } from '../../db/schema/index.js';
import { AppError, fieldError } from '../../domain/errors.js';
import type {
  AddressGuard,
  ChromiumStatus,
  OfficeConvertOptions,
  OfficeStatus,
  PageSource,
  PdfSettings,
  ScreenshotSettings,
  ToolsEngines,
} from '../../drivers/tools/types.js';
import { createCreditLedger, type CreditLedger } from './credits.js';
import { MARKDOWN_STYLESHEET } from './markdown-style.js';
import { createWorkQueue, type WorkQueue } from './queue.js';

/** What a page to render is (a URL or HTML), as routes pass it. */
export type { PageSource };

/** How many jobs may wait for each engine: beyond that a call is refused with 429 and Retry-After. */
export interface ToolsQueueOptions {
  chromiumMaxQueued: number;
  officeMaxQueued: number;
  mergeMaxQueued: number;
}

export const DEFAULT_TOOLS_QUEUES: ToolsQueueOptions = {
  chromiumMaxQueued: 100,
  officeMaxQueued: 50,
  mergeMaxQueued: 100,
};

export interface Charged<T> {
  result: T;
  remaining: number;
  blocked?: string[];
}

export interface ToolsHealth {
  status: 'ok' | 'degraded';
  engines: {
    chromium: ChromiumStatus & { running: number; queued: number };
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
  /** The engines it runs on (tests crash the local ones). */
  readonly engines: ToolsEngines;
  close(): Promise<void>;
}

function engineFailure(engines: ToolsEngines, error: unknown): AppError {
  if (error instanceof AppError) return error;
  const failure = engines.failure(error);
  switch (failure?.kind) {
    case 'blocked':
      return fieldError('url', `The url must lead to a public address: ${failure.message}.`);
    case 'unreadable':
      return fieldError('file', `The file could not be read: ${failure.message}.`);
    case 'limit':
      // A 413 body is `{message}`; a 422 names the limit under `files`, like the other merge refusals.
      return failure.tooLarge
        ? new AppError('payload_too_large', failure.message)
        : fieldError('files', failure.message);
    case 'invalid-pdf':
      return fieldError(`files.${failure.index}`, `The file files.${failure.index} ${failure.message}.`);
    case 'engine':
    case undefined: {
      const detail = failure ? `: ${failure.message}` : '';
      return new AppError('engine_failed', `The conversion engine failed${detail}. Please retry later.`, {
        cause: error,
      });
    }
  }
}

/** What the tools service uses; src/composition.ts builds it. */
export interface ToolsDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  /** The engines (BERTH_TOOLS_DRIVER); the service closes them when it closes. */
  engines: ToolsEngines;
  /** BERTH_TOOLS_MONTHLY_CREDITS: each key's monthly allowance. */
  monthlyCredits: number;
  /**
   * Each charged call as it ends: its operation, whether it succeeded (its credit kept) or failed
   * (refunded), for metrics.
   */
  onCharged?: (operation: string, outcome: 'success' | 'failed') => void;
}

/** The tools service of a context; src/composition.ts makes the one each context has. */
export function createToolsService(
  deps: ToolsDeps,
  options: ToolsQueueOptions = DEFAULT_TOOLS_QUEUES,
): ToolsService {
  const { engines } = deps;
  const credits = createCreditLedger({
    db: deps.db,
    clock: deps.clock,
    allowance: () => deps.monthlyCredits,
  });
  // As many jobs run as the engines take at once; a bounded number wait, the rest are refused.
  const chromiumQueue = createWorkQueue({
    name: 'Chromium',
    concurrency: engines.capacity.chromium,
    maxQueued: options.chromiumMaxQueued,
    secondsPerJob: 0.2,
  });
  const officeQueue = createWorkQueue({
    name: 'LibreOffice',
    concurrency: engines.capacity.office,
    maxQueued: options.officeMaxQueued,
    secondsPerJob: 0.5,
  });
  const mergeQueue = createWorkQueue({
    name: 'merge',
    concurrency: engines.capacity.merge,
    maxQueued: options.mergeMaxQueued,
    secondsPerJob: 0.05,
  });
  const markdown = new MarkdownIt({ html: false, linkify: true, typographer: false });

  const queued = (queue: WorkQueue) => ({ running: queue.running, queued: queue.queued });

  return {
    credits,
    guard: engines.guard,
    engines,

    async charge(userId, operation, requestId, work) {
      const reservation = await credits.reserve(userId, operation, requestId);
      try {
        const result = await work();
        deps.onCharged?.(operation, 'success');
        return { result, remaining: reservation.remaining };
      } catch (error) {
        deps.onCharged?.(operation, 'failed');
        const mapped = engineFailure(engines, error);
        await credits.refund(reservation, mapped.message).catch((refundError: unknown) => {
          deps.logger.error({ err: refundError, chargeId: reservation.chargeId }, 'credit refund failed');
        });
        if (mapped.status >= 500) deps.logger.warn({ err: error, operation }, 'tools job failed');
        throw mapped;
      }
    },

    renderPdf(source, settings) {
      return chromiumQueue.run(() => engines.renderPdf(source, settings));
    },

    screenshot(source, settings) {
      return chromiumQueue.run(() => engines.screenshot(source, settings));
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
      return officeQueue.run(() => engines.office(bytes, extension, convertOptions));
    },

    merge(files) {
      return mergeQueue.run(() => engines.merge(files));
    },

    health() {
      const { chromium: c, libreoffice: o, pdf } = engines.health();
      return {
        status: c.status === 'failed' || o.status === 'failed' ? 'degraded' : 'ok',
        engines: {
          chromium: { ...c, ...queued(chromiumQueue) },
          libreoffice: { ...o, ...queued(officeQueue) },
          pdf: { ...pdf, ...queued(mergeQueue) },
        },
      };
    },

    close() {
      return engines.close();
    },
  };
}
