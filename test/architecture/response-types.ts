// Finds answer shapes written again by hand where they are read (the dashboard, the CLI's client)
// instead of taken from the response schemas (src/http/schemas) as types: docs/architecture.md,
// "Response types".
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';

/** An object of a response schema: where it is (`ApplicationResponse.data`) and its field names. */
export interface SchemaObject {
  where: string;
  fields: Set<string>;
}

/** The response schemas' names, and every object shape in them, from the modules under `dir`. */
export async function responseSchemas(dir: string): Promise<{ names: Set<string>; objects: SchemaObject[] }> {
  const names = new Set<string>();
  const objects: SchemaObject[] = [];
  for (const file of fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .sort()) {
    const exported = (await import(pathToFileURL(path.join(dir, file)).href)) as Record<string, unknown>;
    for (const [name, value] of Object.entries(exported)) {
      if (!isSchema(value)) continue;
      names.add(name);
      collectObjects(value, name, objects);
    }
  }
  return { names, objects };
}

type Json = Record<string, unknown>;

/** A JSON Schema (TypeBox's objects are plain JSON Schema), not a helper function or a file answer. */
const isSchema = (value: unknown): value is Json =>
  typeof value === 'object' &&
  value !== null &&
  ('type' in value || 'anyOf' in value || 'properties' in value);

function collectObjects(schema: unknown, where: string, out: SchemaObject[]): void {
  if (typeof schema !== 'object' || schema === null) return;
  const node = schema as Json;
  const properties = node.properties as Record<string, unknown> | undefined;
  if (properties && typeof properties === 'object') {
    out.push({ where, fields: new Set(Object.keys(properties)) });
    for (const [key, child] of Object.entries(properties)) collectObjects(child, `${where}.${key}`, out);
  }
  if (node.items) collectObjects(node.items, `${where}[]`, out);
  for (const member of (node.anyOf as unknown[] | undefined) ?? []) collectObjects(member, where, out);
  if (typeof node.additionalProperties === 'object')
    collectObjects(node.additionalProperties, `${where}.*`, out);
  for (const child of Object.values((node.patternProperties as Json | undefined) ?? {}))
    collectObjects(child, `${where}.*`, out);
}

/** A type declared in a consumer: its name (or `(inline)`), where, and whether it is written by hand. */
export interface Declared {
  name: string;
  at: string;
  kind: 'interface' | 'type' | 'inline';
  /** An interface, or a type whose fields are given types of their own (string, number, …). */
  handWritten: boolean;
  /** Its own field names (an interface's, or an object type literal's). */
  fields: string[];
}

/** Every interface, type alias and object type literal of the .ts/.tsx files under `root`. */
export function declaredTypes(root: string, base = root): Declared[] {
  const out: Declared[] = [];
  for (const file of sourceFiles(root)) {
    const text = fs.readFileSync(file, 'utf8');
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, scriptKind(file));
    const at = (node: ts.Node) =>
      `${path.relative(base, file)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
    const visit = (node: ts.Node): void => {
      if (ts.isInterfaceDeclaration(node)) {
        out.push({
          name: node.name.text,
          at: at(node),
          kind: 'interface',
          handWritten: true,
          fields: memberNames(node.members),
        });
      } else if (ts.isTypeAliasDeclaration(node)) {
        out.push({
          name: node.name.text,
          at: at(node),
          kind: 'type',
          handWritten: writesFieldTypes(node.type),
          fields: ts.isTypeLiteralNode(node.type) ? memberNames(node.type.members) : [],
        });
      } else if (ts.isTypeLiteralNode(node) && !ts.isTypeAliasDeclaration(node.parent)) {
        out.push({
          name: '(inline)',
          at: at(node),
          kind: 'inline',
          handWritten: true,
          fields: memberNames(node.members),
        });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return out;
}

function memberNames(members: ts.NodeArray<ts.TypeElement>): string[] {
  return members.flatMap((m) =>
    ts.isPropertySignature(m) && (ts.isIdentifier(m.name) || ts.isStringLiteral(m.name)) ? [m.name.text] : [],
  );
}

/**
 * True when a field in `type` is given a type by hand: a keyword (string, number…) or a literal (not a
 * key named to Pick, Omit or an indexed access: `Pick<Task, 'id'>`, `Task['id']`).
 */
function writesFieldTypes(type: ts.TypeNode): boolean {
  let found = false;
  const inField = (node: ts.Node, naming = false): void => {
    if (found) return;
    if (isKeywordType(node) || (ts.isLiteralTypeNode(node) && !naming)) found = true;
    else {
      const keys = ts.isTypeReferenceNode(node) || ts.isIndexedAccessTypeNode(node);
      ts.forEachChild(node, (child) => inField(child, naming || keys));
    }
  };
  const visit = (node: ts.Node): void => {
    if (found) return;
    if (ts.isPropertySignature(node) || ts.isIndexSignatureDeclaration(node)) {
      if (node.type) inField(node.type);
    }
    ts.forEachChild(node, visit);
  };
  visit(type);
  return found;
}

const KEYWORD_TYPES = new Set([
  ts.SyntaxKind.StringKeyword,
  ts.SyntaxKind.NumberKeyword,
  ts.SyntaxKind.BooleanKeyword,
  ts.SyntaxKind.BigIntKeyword,
  ts.SyntaxKind.NullKeyword,
]);
const isKeywordType = (node: ts.Node) => KEYWORD_TYPES.has(node.kind);

const scriptKind = (file: string) => (file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(file);
    return /\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [file] : [];
  });
}

/** The least number of fields a shape must have to count as a copy of a schema object. */
export const COPY_MIN_FIELDS = 3;

/**
 * The answer shapes written again: a declaration named like a response schema (`TaskResponse`, or
 * `Task`) or named in `derived` that is written by hand, and any shape of COPY_MIN_FIELDS fields or
 * more whose fields are all fields of one response schema object (a copy under another name).
 */
export function copiedShapes(
  declared: Declared[],
  schemas: { names: Set<string>; objects: SchemaObject[] },
  derived: readonly string[],
): string[] {
  const guarded = new Set(derived);
  for (const name of schemas.names) {
    guarded.add(name);
    if (name.endsWith('Response') && name !== 'Response') guarded.add(name.slice(0, -'Response'.length));
  }
  const problems: string[] = [];
  for (const d of declared) {
    if (d.kind !== 'inline' && d.handWritten && guarded.has(d.name)) {
      problems.push(
        `${d.at}: ${d.kind} ${d.name} is written by hand; take it from the response schema (Static<typeof …>)`,
      );
      continue;
    }
    if (d.fields.length < COPY_MIN_FIELDS) continue;
    const copied = schemas.objects.find((o) => d.fields.every((f) => o.fields.has(f)));
    if (copied)
      problems.push(
        `${d.at}: ${d.kind === 'inline' ? 'a type' : `${d.kind} ${d.name}`} copies fields of ${copied.where} (${d.fields.join(', ')}); take it from the schema`,
      );
  }
  return problems;
}
