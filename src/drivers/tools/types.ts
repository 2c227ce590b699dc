// The tools engines: what renders pages to PDF and images, converts Office documents and merges PDFs
// for the tools endpoints (src/services/tools) and the gotenberg service. The `local` driver runs warm
// Chromium, LibreOffice and pdf-lib engines in Berth's process and on this host (drivers/tools/local);
// another driver (a converter pod, a cloud service) answers the same calls elsewhere. The service keeps
// the use case (credits, validation, bounded queues); the driver only does the work.
//
// The shapes of pages, settings and statuses are the engines' own, named here so that callers depend on
// this interface only (BERTH_TOOLS_DRIVER picks the implementation, src/composition.ts).
export type { PageAsset, PageSource, PdfSettings, ScreenshotSettings } from '../chromium/engine.js';
export type { OfficeConvertOptions } from '../libreoffice/engine.js';
export type { AddressGuard, ResolvedTarget } from '../net/guard.js';

import type { EngineStatus, PageSource, PdfSettings, ScreenshotSettings } from '../chromium/engine.js';
import type { OfficeConvertOptions, OfficeStatus } from '../libreoffice/engine.js';
import type { AddressGuard } from '../net/guard.js';

/** Chromium's state and counters (`GET /tools/health`). */
export type ChromiumStatus = EngineStatus;
export type { OfficeStatus };

export interface ToolsEnginesHealth {
  chromium: ChromiumStatus;
  libreoffice: OfficeStatus;
  pdf: { status: 'ready' };
}

/**
 * What a failed call means to the one who asked, whatever engine failed: the service maps it to its
 * answer (a 422 naming the field, a 413, a 502), the gotenberg service to Gotenberg's.
 */
export type ToolsFailure =
  /** The page, a redirect or the URL itself leads to an address the guard refuses. */
  | { kind: 'blocked'; message: string }
  /** The file is no document of its type. */
  | { kind: 'unreadable'; message: string }
  /** The inputs exceed a limit: of size (`tooLarge`, 413) or of work (pages, objects, time). */
  | { kind: 'limit'; message: string; tooLarge: boolean }
  /** Input `index` is not a usable PDF. */
  | { kind: 'invalid-pdf'; index: number; message: string }
  /** The engine itself failed (crashed, timed out): a retry later may work. */
  | { kind: 'engine'; message: string };

export interface ToolsEngines {
  /** The driver's name (BERTH_TOOLS_DRIVER). */
  readonly name: string;
  /** Jobs each engine runs at once: the service lets that many through and queues the rest. */
  readonly capacity: { readonly chromium: number; readonly office: number; readonly merge: number };
  /**
   * Where pages may lead: a URL's host must resolve to a public address (or one the operator allows,
   * BERTH_TOOLS_ALLOW_PRIVATE). The engines check every connection with it; callers check a URL first.
   */
  readonly guard: AddressGuard;
  /** A page (a URL or HTML with its assets) as PDF; `blocked` lists the requests the guard refused. */
  renderPdf(source: PageSource, settings: PdfSettings): Promise<{ body: Buffer; blocked: string[] }>;
  /** A page as PNG or JPEG. */
  screenshot(source: PageSource, settings: ScreenshotSettings): Promise<{ body: Buffer; blocked: string[] }>;
  /** An Office document (by its extension: `docx`, `xlsx`, …) as PDF. */
  office(bytes: Buffer, extension: string, options?: OfficeConvertOptions): Promise<Buffer>;
  /** The pages of every PDF, in order, as one PDF. */
  merge(files: readonly Uint8Array[]): Promise<Buffer>;
  health(): ToolsEnginesHealth;
  /** What an error thrown by one of these calls means; undefined for one that is not the engines'. */
  failure(error: unknown): ToolsFailure | undefined;
  /** Stops the engines and what they started. */
  close(): Promise<void>;
}
