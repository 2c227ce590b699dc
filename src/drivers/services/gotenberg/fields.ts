// The form fields as Gotenberg binds them (FormData): Go's strconv and Gotenberg's own parsers, with
// their messages (Gotenberg answers with them), and its Chromium PDF options.
import type { PdfSettings } from '../../chromium/engine.js';
import { goDuration } from './duration.js';
import { badForm } from './errors.js';

const goQuote = (value: string) => JSON.stringify(value);

function goBool(value: string): boolean | string {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  return `strconv.ParseBool: parsing ${goQuote(value)}: invalid syntax`;
}

function goFloat(value: string): number | string {
  const n = Number(value);
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value) || !Number.isFinite(n))
    return `strconv.ParseFloat: parsing ${goQuote(value)}: invalid syntax`;
  return n;
}

/** Gotenberg's Inches: a unit suffix (pt, px, in, mm, cm, pc) or a bare number of inches. */
function goInches(value: string): number | string {
  const factor: Record<string, number> = {
    pt: 1 / 72,
    px: 1 / 96,
    in: 1,
    mm: 1 / 25.4,
    cm: 1 / 2.54,
    pc: 1 / 6,
  };
  for (const unit of Object.keys(factor)) {
    if (!value.endsWith(unit)) continue;
    const n = goFloat(value.slice(0, -unit.length));
    return typeof n === 'string' ? n : n * factor[unit]!;
  }
  return goFloat(value);
}

/** Binds fields as Gotenberg's FormData does: an empty or absent field takes the default. */
export class FieldReader {
  readonly problems: string[] = [];
  constructor(private readonly values: Map<string, string>) {}

  private read<T>(key: string, fallback: T, parse: (value: string) => T | string): T {
    const value = this.values.get(key);
    if (value === undefined || value === '') return fallback;
    const parsed = parse(value);
    if (typeof parsed === 'string' && typeof fallback !== 'string') {
      this.problems.push(`form field '${key}' is invalid (got '${value}', resulting to ${parsed})`);
      return fallback;
    }
    return parsed as T;
  }

  bool(key: string, fallback: boolean): boolean {
    return this.read(key, fallback, goBool);
  }
  float(key: string, fallback: number): number {
    return this.read(key, fallback, goFloat);
  }
  inches(key: string, fallback: number): number {
    return this.read(key, fallback, goInches);
  }
  duration(key: string, fallback: number): number {
    return this.read(key, fallback, goDuration);
  }
  string(key: string, fallback: string): string {
    return this.values.get(key) || fallback;
  }
  custom(key: string, check: (value: string) => string | undefined): string {
    const value = this.values.get(key) ?? '';
    const problem = value === '' ? undefined : check(value);
    if (problem)
      this.problems.push(`form field '${key}' is invalid (got '${value}', resulting to ${problem})`);
    return problem ? '' : value;
  }
  validate(): void {
    if (this.problems.length > 0) throw badForm(this.problems);
  }
}

/** Gotenberg's Chromium PDF options (FormDataChromiumPdfOptions), as far as Berth's engine honours them. */
export function chromiumSettings(fields: FieldReader, jobTimeoutMs: number): PdfSettings {
  const inches = (key: string, fallback: number) => `${fields.inches(key, fallback)}in`;
  const settings: PdfSettings = {
    landscape: fields.bool('landscape', false),
    printBackground: fields.bool('printBackground', false),
    scale: fields.float('scale', 1),
    width: inches('paperWidth', 8.5),
    height: inches('paperHeight', 11),
    margin: {
      top: inches('marginTop', 0.39),
      bottom: inches('marginBottom', 0.39),
      left: inches('marginLeft', 0.39),
      right: inches('marginRight', 0.39),
    },
    preferCSSPageSize: fields.bool('preferCssPageSize', false),
  };
  const pageRanges = fields.string('nativePageRanges', '');
  if (pageRanges) settings.pageRanges = pageRanges;
  const waitDelay = fields.duration('waitDelay', 0);
  // A delay past the job's time limit ends as Gotenberg's does: the request runs out of time (503).
  if (waitDelay > 0) settings.waitDelayMs = Math.min(waitDelay, jobTimeoutMs + 1_000);
  const media = fields.custom('emulatedMediaType', (value) =>
    value === 'screen' || value === 'print'
      ? undefined
      : "wrong value, expected either 'screen', 'print' or empty",
  );
  if (media === 'screen') settings.media = 'screen';
  // Read (so a bad value is a 400, as in Gotenberg) but not applied: see the docs' differences.
  fields.bool('omitBackground', false);
  fields.bool('singlePage', false);
  fields.bool('generateDocumentOutline', false);
  fields.bool('skipNetworkIdleEvent', true);
  if (!(settings.scale > 0))
    fields.problems.push(
      `form field 'scale' is invalid (got '${settings.scale}', resulting to value must be positive)`,
    );
  return settings;
}
