// Checks a YAML text against the Infrastructure JSON Schema (/schemas/infrastructure.json) in the
// browser, with line numbers. It reads only the keywords that schema uses (type, properties, required,
// additionalProperties, enum, const, pattern, minimum, maximum, items, allOf, if/then); the server's
// validator stays the authority (apply's dry run shows its answer).
import { LineCounter, parseDocument, type Document } from 'yaml';

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean;
  enum?: unknown[];
  const?: unknown;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  items?: Schema;
  allOf?: Schema[];
  if?: Schema;
  then?: Schema;
};

export interface Problem {
  line: number;
  path: string;
  message: string;
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function typeMatches(want: string, value: unknown): boolean {
  const have = typeOf(value);
  return want === have || (want === 'number' && have === 'integer');
}

function check(
  schema: Schema,
  value: unknown,
  path: Array<string | number>,
  out: Array<{ path: Array<string | number>; message: string }>,
): void {
  const where = path.join('.') || '(document)';
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => typeMatches(t, value))) {
      out.push({ path, message: `${where} must be ${types.join(' or ')}, not ${typeOf(value)}` });
      return;
    }
  }
  if (schema.const !== undefined && value !== schema.const)
    out.push({ path, message: `${where} must be ${JSON.stringify(schema.const)}` });
  if (schema.enum && !schema.enum.includes(value)) {
    out.push({
      path,
      message: `${where} must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(', ')}`,
    });
  }
  if (typeof value === 'string' && schema.pattern && !new RegExp(schema.pattern, 'u').test(value)) {
    out.push({ path, message: `${where} does not match ${schema.pattern}` });
  }
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum)
      out.push({ path, message: `${where} must be at least ${schema.minimum}` });
    if (schema.maximum !== undefined && value > schema.maximum)
      out.push({ path, message: `${where} must be at most ${schema.maximum}` });
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const object = value as Record<string, unknown>;
    for (const key of schema.required ?? []) {
      if (!(key in object)) out.push({ path, message: `${where} needs the field '${key}'` });
    }
    for (const [key, child] of Object.entries(object)) {
      const sub = schema.properties?.[key];
      if (sub) check(sub, child, [...path, key], out);
      else if (schema.additionalProperties === false && schema.properties) {
        out.push({ path: [...path, key], message: `${where}: unknown field '${key}'` });
      }
    }
  }
  if (Array.isArray(value) && schema.items) {
    value.forEach((item, i) => check(schema.items!, item, [...path, i], out));
  }
  for (const sub of schema.allOf ?? []) check(sub, value, path, out);
  if (schema.if && schema.then) {
    const probe: Array<{ path: Array<string | number>; message: string }> = [];
    check(schema.if, value, path, probe);
    if (probe.length === 0) check(schema.then, value, path, out);
  }
}

/** The line a path's node starts on (its parent's when the node is missing). */
function lineOf(doc: Document, counter: LineCounter, path: Array<string | number>): number {
  for (let n = path.length; n >= 0; n--) {
    const node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    const range = (node as { range?: [number, number, number] } | undefined)?.range;
    if (range) return counter.linePos(range[0]).line;
  }
  return 1;
}

export function checkYaml(text: string, schema: unknown): Problem[] {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, prettyErrors: false });
  if (doc.errors.length > 0) {
    return doc.errors.map((e) => ({
      line: e.linePos?.[0]?.line ?? counter.linePos(e.pos[0]).line,
      path: '',
      message: e.message.split('\n')[0] ?? e.message,
    }));
  }
  const out: Array<{ path: Array<string | number>; message: string }> = [];
  check(schema as Schema, doc.toJS() as unknown, [], out);
  return out.map((p) => ({ line: lineOf(doc, counter, p.path), path: p.path.join('.'), message: p.message }));
}
