// The conversions behind the form routes, as Gotenberg does them: Chromium (URL, HTML, Markdown), LibreOffice
// (one PDF, several merged, or a zip of several), on the engines the runner is given.
import { OFFICE_EXTENSIONS, officeTypeProblem } from '../../../domain/tools.js';
import type { PageSource } from '../../chromium/engine.js';
import { UnreadableDocumentError, type OfficeConvertOptions } from '../../libreoffice/engine.js';
import type { GotenbergDeps } from './contract.js';
import { GotenbergError, gotenbergFailure } from './errors.js';
import { chromiumSettings, FieldReader } from './fields.js';
import { assetsOf, filesWith, indexHtml, missingExtensions } from './files.js';
import type { Form, Upload } from './form.js';
import { zip } from './zip.js';

/** `jobTimeoutMs`: the Chromium job's time limit (bounds waitDelay). */
export function createConversions(deps: GotenbergDeps, jobTimeoutMs: number) {
  async function renderChromium(form: Form, route: string): Promise<Buffer> {
    const fields = new FieldReader(form.values);
    const settings = chromiumSettings(fields, jobTimeoutMs);
    let source: PageSource;
    if (route === '/forms/chromium/convert/url') {
      const url = form.values.get('url') ?? '';
      if (url === '') fields.problems.push("form field 'url' is required");
      fields.validate();
      let parsed: URL;
      try {
        parsed = new URL(url);
      } catch (error) {
        throw new GotenbergError(400, `Invalid URL: ${(error as Error).message}`);
      }
      if (parsed.protocol === 'file:')
        throw new GotenbergError(
          400,
          'file:// URLs are not accepted on this route. Use the /convert/html or /convert/markdown routes to render local HTML',
        );
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
        throw new GotenbergError(403, 'Forbidden');
      // The tools' rule: the page must lead to a public address (checked again at every connection).
      await deps.guard.resolve(parsed);
      source = { kind: 'url', url: parsed.href };
    } else {
      const index = (() => {
        try {
          return indexHtml(form);
        } catch (error) {
          fields.problems.push("form file 'index.html' is required");
          return error as GotenbergError;
        }
      })();
      let markdown: Upload[] = [];
      if (route === '/forms/chromium/convert/markdown') {
        markdown = filesWith(form, ['.md']);
        if (markdown.length === 0) fields.problems.push(missingExtensions(['.md']));
      }
      fields.validate();
      const upload = index as Upload;
      let html = upload.bytes.toString('utf8');
      if (markdown.length > 0) html = withMarkdown(html, markdown);
      source = { kind: 'html', html, assets: assetsOf(form, upload.filename) };
    }
    const { body } = await deps.renderPdf(source, settings);
    return body;
  }

  /** Gotenberg's `{{ toHTML "file.md" }}`: each marker becomes its file's Markdown, rendered. */
  function withMarkdown(template: string, markdown: Upload[]): string {
    const missing: string[] = [];
    const out = template.replace(/\{\{\s*toHTML\s+"([^"]*)"\s*\}\}/g, (_all, name: string) => {
      const file = markdown.find((f) => f.filename === name);
      if (!file) {
        missing.push(`'${name}'`);
        return '';
      }
      return deps.markdownToHtml(file.bytes.toString('utf8'), '{{ content }}');
    });
    if (missing.length > 0)
      throw new GotenbergError(400, `Markdown file(s) not found: ${missing.join('\n')}`);
    return out;
  }

  async function libreoffice(form: Form): Promise<{ body: Buffer; extension: 'pdf' | 'zip' }> {
    const fields = new FieldReader(form.values);
    const extensions = OFFICE_EXTENSIONS.map((e) => `.${e}`);
    const inputs = filesWith(form, extensions);
    if (inputs.length === 0) fields.problems.push(missingExtensions(extensions));
    const landscape = fields.bool('landscape', false);
    const pageRanges = fields.string('nativePageRanges', '');
    const merge = fields.bool('merge', false);
    fields.validate();
    const convertOptions: OfficeConvertOptions = {
      ...(landscape ? { landscape } : {}),
      ...(pageRanges ? { pageRanges } : {}),
    };
    const pdfs = await Promise.all(
      inputs.map(async (file) => {
        const extension = /\.([^.]+)$/.exec(file.filename)![1]!.toLowerCase();
        try {
          if (officeTypeProblem(file.bytes, extension)) throw new UnreadableDocumentError('type mismatch');
          return await deps.office(file.bytes, extension, convertOptions);
        } catch (error) {
          throw gotenbergFailure(error, { filename: file.filename });
        }
      }),
    );
    if (pdfs.length === 1) return { body: pdfs[0]!, extension: 'pdf' };
    if (merge) return { body: await deps.merge(pdfs), extension: 'pdf' };
    return {
      body: zip(inputs.map((file, i) => ({ name: `${file.filename}.pdf`, body: pdfs[i]! }))),
      extension: 'zip',
    };
  }

  return { renderChromium, libreoffice };
}
