// The `local` tools engines (BERTH_TOOLS_DRIVER=local): warm Chromium slots, LibreOffice listeners in
// their sandbox and pdf-lib on worker threads, all on this host and started on first use
// (docs/tools.md). src/composition.ts makes one per context, on the first tools call.
import os from 'node:os';
import { CHROMIUM_PATH, ChromiumEngine, EngineError, PageBlockedError } from '../../chromium/engine.js';
import { OfficeEngine, OfficeEngineError, UnreadableDocumentError } from '../../libreoffice/engine.js';
import { BlockedAddressError, type AddressGuard } from '../../net/guard.js';
import {
  createPdfPool,
  DEFAULT_PDF_LIMITS,
  InvalidPdfError,
  PdfLimitError,
  type PdfLimits,
} from '../../pdf/merge.js';
import type { ToolsEngines, ToolsFailure } from '../types.js';

export interface LocalToolsOptions {
  chromiumPath: string;
  /** Jobs Chromium runs at once (warm slots). */
  chromiumSlots: number;
  chromiumTimeoutMs: number;
  chromiumJobsPerSlot: number;
  chromiumJobsPerBrowser: number;
  officeListeners: number;
  officeTimeoutMs: number;
  officeJobsPerListener: number;
  /** Merges at once, each on its own worker thread. */
  mergeWorkers: number;
  mergeLimits: PdfLimits;
}

export const DEFAULT_LOCAL_TOOLS_OPTIONS: LocalToolsOptions = {
  chromiumPath: CHROMIUM_PATH,
  // One rendering job per core: more only interleave on the same cores and cost CPU per job (measured on
  // 2 cores: 2 slots 33-40 PDFs/s at 31-39 ms of CPU each, 4 slots 27-32 PDFs/s at 45-53 ms).
  chromiumSlots: Math.max(2, os.availableParallelism()),
  chromiumTimeoutMs: 30_000,
  chromiumJobsPerSlot: 200,
  chromiumJobsPerBrowser: 2_000,
  officeListeners: 2,
  officeTimeoutMs: 60_000,
  officeJobsPerListener: 200,
  // Leaves a core to the event loop and the other engines.
  mergeWorkers: Math.max(1, Math.min(2, os.availableParallelism() - 1)),
  mergeLimits: DEFAULT_PDF_LIMITS,
};

/** The local engines, with the warm Chromium and LibreOffice that tests crash on purpose. */
export interface LocalToolsEngines extends ToolsEngines {
  readonly processes: { readonly chromium: ChromiumEngine; readonly office: OfficeEngine };
}

/** What the engines' own errors mean to the caller; undefined for any other error. */
function failureOf(error: unknown): ToolsFailure | undefined {
  if (error instanceof PageBlockedError) return { kind: 'blocked', message: error.blockedBy.message };
  if (error instanceof BlockedAddressError) return { kind: 'blocked', message: error.message };
  if (error instanceof UnreadableDocumentError) return { kind: 'unreadable', message: error.message };
  if (error instanceof PdfLimitError)
    return { kind: 'limit', message: error.message, tooLarge: error.tooLarge };
  if (error instanceof InvalidPdfError)
    return { kind: 'invalid-pdf', index: error.index, message: error.message };
  if (error instanceof EngineError || error instanceof OfficeEngineError)
    return { kind: 'engine', message: error.message };
  return undefined;
}

/**
 * The engines on this host. They start on their first job; `guard` checks every address a page
 * reaches (BERTH_TOOLS_ALLOW_PRIVATE). Errors are the engines' own (the gotenberg service maps them to
 * Gotenberg's answers); `failure()` says what they mean.
 */
export function createLocalToolsEngines(
  deps: { guard: AddressGuard },
  options: LocalToolsOptions,
): LocalToolsEngines {
  const chromium = new ChromiumEngine({
    executablePath: options.chromiumPath,
    slots: options.chromiumSlots,
    jobTimeoutMs: options.chromiumTimeoutMs,
    maxJobsPerSlot: options.chromiumJobsPerSlot,
    maxJobsPerBrowser: options.chromiumJobsPerBrowser,
    guard: deps.guard,
    maxResourceBytes: 50 * 1024 * 1024,
  });
  const office = new OfficeEngine({
    listeners: options.officeListeners,
    jobTimeoutMs: options.officeTimeoutMs,
    maxJobsPerListener: options.officeJobsPerListener,
    startTimeoutMs: 60_000,
  });
  // pdf-lib runs on worker threads, one merge each.
  const pdf = createPdfPool({ size: options.mergeWorkers, limits: options.mergeLimits });

  return {
    name: 'local',
    capacity: {
      chromium: options.chromiumSlots,
      office: options.officeListeners,
      merge: options.mergeWorkers,
    },
    guard: deps.guard,
    processes: { chromium, office },
    renderPdf: (source, settings) => chromium.pdf(source, settings),
    screenshot: (source, settings) => chromium.screenshot(source, settings),
    office: (bytes, extension, convertOptions) => office.convert(bytes, extension, convertOptions),
    merge: (files) => pdf.merge(files),
    health: () => ({ chromium: chromium.status(), libreoffice: office.status(), pdf: { status: 'ready' } }),
    failure: failureOf,
    async close() {
      await Promise.all([chromium.close(), office.close(), pdf.close()]);
    },
  };
}
