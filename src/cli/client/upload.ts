// `berth deploy APP --source DIR|FILE`: a directory packed (see pack.ts) or an archive sent as it is,
// streamed to POST /api/v1/applications/{id}/source, which stores it and starts its deployment.
import fs from 'node:fs';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import type { SourceUpload } from './answers.js';
import { ApiError, UsageError, type Api } from './http.js';
import { clean, err } from './output.js';
import { formatSize, listSource, packDirectory, type Packing } from './pack.js';

/** The server's limit on an upload (SOURCE_UPLOAD_LIMIT_BYTES): past it the sending stops here. */
export const UPLOAD_LIMIT_BYTES = 100 * 1024 * 1024;

const ARCHIVE_TYPES: Array<[RegExp, string]> = [
  [/\.(tar\.gz|tgz)$/i, 'application/gzip'],
  [/\.zip$/i, 'application/zip'],
];

function note(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** Counts what passes; past the limit it fails the stream (the request ends, nothing is kept). */
function limited(source: Readable, what: string): { stream: Readable; sent: () => number } {
  let sent = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      sent += chunk.length;
      if (sent > UPLOAD_LIMIT_BYTES)
        callback(
          new UsageError(
            `${what} is larger than ${formatSize(UPLOAD_LIMIT_BYTES)}, the most Berth takes; leave out what the build does not need (.berthignore)`,
          ),
        );
      else callback(null, chunk);
    },
  });
  source.on('error', (error) => counter.destroy(error));
  return { stream: source.pipe(counter), sent: () => sent };
}

/**
 * Sends `source` (a directory, or a .tar.gz/.tgz/.zip file) as the application's source and returns the
 * deployment it started. Progress lines go to stderr, so that --output json stays one document.
 */
export async function uploadSource(api: Api, appId: number, source: string): Promise<SourceUpload> {
  const stat = fs.statSync(source, { throwIfNoEntry: false });
  if (!stat) throw new UsageError(`--source ${source}: no such file or directory`);
  let contentType: string;
  let body: Readable;
  let packing: Packing | undefined;
  let what: string;
  if (stat.isDirectory()) {
    const listed = listSource(source);
    if (listed.files.length === 0)
      throw new UsageError(`--source ${source}: no file to send (everything is ignored, or it is empty)`);
    // What chose the files: a .berthignore is named only where there is one.
    const chosen = [listed.git ? 'as git lists them' : '.gitignore files applied'];
    if (listed.berthignore) chosen.push('less .berthignore');
    note(
      `Packing ${listed.files.length} file${listed.files.length === 1 ? '' : 's'} (${formatSize(listed.bytes)}) of ${source} (${chosen.join(', ')})…`,
    );
    packing = packDirectory(source, listed.files);
    body = packing.stream;
    contentType = 'application/gzip';
    what = 'The packed source';
  } else if (stat.isFile()) {
    const type = ARCHIVE_TYPES.find(([pattern]) => pattern.test(source))?.[1];
    if (!type)
      throw new UsageError(
        `--source must be a directory or a .tar.gz, .tgz or .zip archive; got '${path.basename(source)}'`,
      );
    if (stat.size > UPLOAD_LIMIT_BYTES)
      throw new UsageError(
        `${source} is ${stat.size} bytes: more than ${UPLOAD_LIMIT_BYTES} (${formatSize(UPLOAD_LIMIT_BYTES)}), the most Berth takes`,
      );
    note(`Sending ${source} (${formatSize(stat.size)})…`);
    body = fs.createReadStream(source);
    contentType = type;
    what = source;
  } else throw new UsageError(`--source ${source} is neither a directory nor a file`);

  const counted = limited(body, what);
  let failure: unknown;
  counted.stream.on('error', (error) => (failure = error));
  let uploaded: SourceUpload;
  try {
    uploaded = await api.data<SourceUpload>('POST', `/api/v1/applications/${appId}/source`, {
      body: Readable.toWeb(counted.stream) as ReadableStream<Uint8Array>,
      contentType,
    });
  } catch (error) {
    // tar's own failure, told apart from the broken pipe it gets once the request is given up.
    const tar = packing?.ended();
    const tarFailed = tar && tar.code !== 0 ? `tar failed: ${clean(tar.stderr.trim())}` : undefined;
    body.destroy();
    // Our own stream's failure (the limit) says more than the cut connection it caused.
    if (failure instanceof UsageError) throw failure;
    if (error instanceof ApiError && error.status !== 0) {
      if (tarFailed) note(`${err('red', 'berth:')} ${tarFailed}`);
      throw error;
    }
    if (tarFailed) throw new UsageError(tarFailed);
    if (error instanceof ApiError)
      throw new ApiError(`the upload was cut off after ${formatSize(counted.sent())}: ${error.message}`, 0);
    throw error;
  }
  const tar = await packing?.done;
  if (tar && tar.code !== 0) note(`${err('yellow', 'berth:')} tar: ${clean(tar.stderr.trim())}`);
  note(`Uploaded ${formatSize(uploaded.size)}.`);
  return uploaded;
}
