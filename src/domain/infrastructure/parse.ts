// The YAML body → a plain value. Anything that is not exactly one YAML mapping is a 400 whose message
// says where the problem is (line and column), as Ploi Cloud answers unparseable bodies.
//
// Two parsers, one answer: js-yaml (YAML 1.2 core schema) reads a well-formed document about ten
// times faster than `yaml`; `yaml` reads everything else and words the error (line, column, and a
// bound on alias expansion). Both use the 1.2 core schema: no timestamps, no merge keys, so a
// document means the same whichever parser read it.
import jsyaml from 'js-yaml';
import { LineCounter, parseAllDocuments } from 'yaml';
import { AppError } from '../errors.js';

/** Aliases may expand a small document into a huge one ("billion laughs"); this bounds it. */
const MAX_ALIAS_COUNT = 100;

function at(lineCounter: LineCounter, offset: number | undefined): string {
  if (offset === undefined) return '';
  const { line, col } = lineCounter.linePos(offset);
  return ` at line ${line}, column ${col}`;
}

const isMapping = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * The fast path, for texts without anchors or aliases: js-yaml shares an aliased node instead of
 * copying it, so a document with aliases could expand without bound later (JSON.stringify); those
 * go to `yaml`, which counts expansions. Anything js-yaml refuses goes there too, for the message.
 */
export function readQuickly(text: string): Record<string, unknown> | undefined {
  if (text.includes('&') || text.includes('*')) return undefined;
  try {
    const docs = jsyaml.loadAll(text, undefined, { schema: jsyaml.CORE_SCHEMA });
    return docs.length === 1 && isMapping(docs[0]) ? docs[0] : undefined;
  } catch {
    return undefined;
  }
}

export function parseInfrastructureYaml(text: string): Record<string, unknown> {
  return readQuickly(text) ?? readCarefully(text);
}

export function readCarefully(text: string): Record<string, unknown> {
  if (text.trim() === '') {
    throw new AppError(
      'bad_request',
      'The request body is empty; send one YAML document (kind: Infrastructure).',
    );
  }
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (!Array.isArray(docs)) {
    throw new AppError('bad_request', 'The request body is not a YAML document.');
  }
  if (docs.length !== 1) {
    const second = docs[1];
    throw new AppError(
      'bad_request',
      `The request body holds ${docs.length} YAML documents${at(lineCounter, second?.range[0])}; send exactly one.`,
    );
  }
  const [doc] = docs;
  if (!doc) throw new AppError('bad_request', 'The request body is not a YAML document.');
  const problem = doc.errors[0];
  if (problem) {
    const reason = problem.message.split('\n')[0] ?? 'invalid YAML';
    throw new AppError(
      'bad_request',
      `The request body is not valid YAML${at(lineCounter, problem.pos[0])}: ${reason}`,
    );
  }
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (error) {
    throw new AppError(
      'bad_request',
      `The YAML document cannot be read: ${error instanceof Error ? error.message : 'invalid'}`,
    );
  }
  if (!isMapping(value)) {
    const where = at(lineCounter, doc.contents?.range[0]);
    throw new AppError(
      'bad_request',
      `The YAML document must be a mapping with apiVersion, kind, metadata and spec${where}.`,
    );
  }
  return value;
}
