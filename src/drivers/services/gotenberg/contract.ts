// What the `gotenberg` runner is given and promises: the engines it renders with, its limits, the
// Gotenberg release it follows and the form fields it honours (docs/services.md lists them).
import { TOOLS_LIMITS } from '../../../domain/tools.js';
import type { PageSource, PdfSettings } from '../../chromium/engine.js';
import type { OfficeConvertOptions } from '../../libreoffice/engine.js';
import type { AddressGuard } from '../../net/guard.js';

/** The Gotenberg release whose API this follows (`GET /version`; semver-equal to it). */
export const GOTENBERG_VERSION = '8.36.0+berth';

/** What the runner uses: the tools service's warm engines and queues (src/services/tools). */
export interface GotenbergDeps {
  renderPdf(source: PageSource, settings: PdfSettings): Promise<{ body: Buffer; blocked: string[] }>;
  office(bytes: Buffer, extension: string, options?: OfficeConvertOptions): Promise<Buffer>;
  merge(files: readonly Uint8Array[]): Promise<Buffer>;
  /** Markdown → HTML; with a template, the rendered Markdown replaces its `{{ content }}` marker. */
  markdownToHtml(markdown: string, template?: string): string;
  /** The tools' address guard: a URL must lead to a public address (BERTH_TOOLS_ALLOW_PRIVATE aside). */
  guard: AddressGuard;
  health(): {
    engines: {
      chromium: { status: string; lastError: string | null };
      libreoffice: { status: string; lastError: string | null };
    };
  };
}

export interface GotenbergLimits {
  /** Largest file of a form. */
  fileBytes: number;
  /** Largest request body. */
  bodyBytes: number;
  files: number;
  fields: number;
  fieldBytes: number;
  /** Request lines kept per instance for `logs`. */
  logLines: number;
}

export const DEFAULT_GOTENBERG_LIMITS: GotenbergLimits = {
  fileBytes: TOOLS_LIMITS.fileBytes,
  bodyBytes: 64 * 1024 * 1024,
  files: 100,
  fields: 100,
  fieldBytes: 1024 * 1024,
  logLines: 1_000,
};

/** The form fields each route honours (docs/services.md lists them). */
export const GOTENBERG_FIELDS = {
  chromium: [
    'paperWidth',
    'paperHeight',
    'marginTop',
    'marginBottom',
    'marginLeft',
    'marginRight',
    'preferCssPageSize',
    'printBackground',
    'landscape',
    'scale',
    'nativePageRanges',
    'waitDelay',
    'emulatedMediaType',
  ],
  libreoffice: ['landscape', 'nativePageRanges', 'merge'],
  merge: [] as string[],
} as const;
