// A request's multipart form, read as Gotenberg reads it (pkg/modules/api/formdata.go): the first value
// of each field, files by their sanitized base name, the limits answered with Gotenberg's 413. Busboy
// parses the multipart body.
import type http from 'node:http';
import type { Readable } from 'node:stream';
import { Busboy, type BusboyHeaders } from '@fastify/busboy';
import type { GotenbergLimits } from './contract.js';
import { badForm, GotenbergError } from './errors.js';

export interface Upload {
  field: string;
  filename: string;
  bytes: Buffer;
}

export interface Form {
  /** The first value of each field, as Gotenberg reads it. */
  values: Map<string, string>;
  /** By (sanitized) file name; a second file of the same name replaces the first, as in Gotenberg. */
  files: Map<string, Upload>;
}

/** Gotenberg's sanitizeFilename: the base name, without control characters, NFC. */
export function sanitizeFilename(name: string): string {
  const base = name.slice(Math.max(name.lastIndexOf('/'), name.lastIndexOf('\\')) + 1);
  return base.replace(/[\x00-\x1f\x7f]/g, '').normalize('NFC');
}

/** Reads the form of `req`; rejects with the GotenbergError to answer (400, 413). */
export function readForm(req: http.IncomingMessage, limits: GotenbergLimits): Promise<Form> {
  return new Promise<Form>((resolve, reject) => {
    const form: Form = { values: new Map(), files: new Map() };
    const type = req.headers['content-type'] ?? '';
    if (!/^multipart\/form-data/i.test(type)) {
      req.resume();
      reject(badForm(["request Content-Type isn't multipart/form-data"]));
      return;
    }
    let failed: GotenbergError | undefined;
    const fail = (error: GotenbergError) => {
      failed ??= error;
    };
    let busboy;
    try {
      busboy = Busboy({
        headers: req.headers as BusboyHeaders,
        limits: {
          fileSize: limits.fileBytes,
          files: limits.files,
          fields: limits.fields,
          fieldSize: limits.fieldBytes,
          parts: limits.files + limits.fields,
        },
      });
    } catch {
      req.resume();
      reject(badForm(['malformed multipart/form-data']));
      return;
    }
    const pending: Array<Promise<void>> = [];
    let total = 0;
    const tooLarge = () =>
      fail(
        new GotenbergError(
          413,
          'The request body exceeds the configured size limit. Send a smaller request.',
        ),
      );
    req.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total > limits.bodyBytes) {
        tooLarge();
        req.unpipe(busboy);
        req.resume();
        resolveOrReject();
      }
    });
    busboy.on('field', (name: string, value: string, _nameTruncated: boolean, valueTruncated: boolean) => {
      if (valueTruncated) tooLarge();
      if (!form.values.has(name)) form.values.set(name, value);
    });
    busboy.on('file', (field: string, file: Readable, filename: string) => {
      const chunks: Buffer[] = [];
      pending.push(
        new Promise<void>((done) => {
          file.on('data', (chunk: Buffer) => chunks.push(chunk));
          file.on('limit', tooLarge);
          file.on('end', () => {
            const name = sanitizeFilename(filename ?? '');
            if (name !== '') form.files.set(name, { field, filename: name, bytes: Buffer.concat(chunks) });
            done();
          });
          file.on('error', () => done());
        }),
      );
    });
    busboy.on('filesLimit', tooLarge);
    busboy.on('fieldsLimit', tooLarge);
    busboy.on('partsLimit', tooLarge);
    let settled = false;
    const resolveOrReject = () => {
      if (settled) return;
      settled = true;
      void Promise.all(pending).then(() => (failed ? reject(failed) : resolve(form)));
    };
    busboy.on('finish', resolveOrReject);
    busboy.on('error', () => {
      fail(badForm(['malformed multipart/form-data']));
      req.resume();
      resolveOrReject();
    });
    req.pipe(busboy);
  });
}
