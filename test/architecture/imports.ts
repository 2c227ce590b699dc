// Berth's own import graph, read from the TypeScript sources (every form: value and type imports,
// re-exports, dynamic import() and import('…') types), and the cycles in it. A cycle is a circle in
// the structure drawing even when only types travel it: the two modules can no longer be read, moved
// or replaced one without the other.
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** Each file under `root` (relative, `/`-separated) and the files of `root` it imports. */
export function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(root)) {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const targets = new Set<string>();
    const visit = (node: ts.Node): void => {
      const specifier = moduleSpecifier(node);
      if (specifier?.startsWith('.')) {
        const target = path.posix.join(path.posix.dirname(file), specifier.replace(/\.js$/, '.ts'));
        if (fs.existsSync(path.join(root, target))) targets.add(target);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
    graph.set(file, [...targets].sort());
  }
  return graph;
}

function moduleSpecifier(node: ts.Node): string | undefined {
  if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier)
    return ts.isStringLiteral(node.moduleSpecifier) ? node.moduleSpecifier.text : undefined;
  if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
    const [argument] = node.arguments;
    return argument && ts.isStringLiteralLike(argument) ? argument.text : undefined;
  }
  if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument))
    return ts.isStringLiteral(node.argument.literal) ? node.argument.literal.text : undefined;
  return undefined;
}

function sourceFiles(root: string, dir = ''): string[] {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const file = dir ? `${dir}/${entry.name}` : entry.name;
    if (entry.isDirectory()) return sourceFiles(root, file);
    return /\.[cm]?tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [file] : [];
  });
}

/**
 * The import cycles of `graph`, one per strongly connected group of files, each as a path that
 * closes on itself (`a.ts → b.ts → a.ts`).
 */
export function importCycles(graph: Map<string, string[]>): string[] {
  // Tarjan's strongly connected components; a group of two or more files (or a file importing
  // itself) is a cycle.
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const connect = (file: string): void => {
    index.set(file, next);
    low.set(file, next++);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        connect(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file)!, index.get(target)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      group.push(member);
    } while (member !== file);
    if (group.length > 1 || graph.get(file)?.includes(file)) groups.push(group);
  };
  for (const file of [...graph.keys()].sort()) if (!index.has(file)) connect(file);
  return groups.map((group) => cyclePath(graph, new Set(group)));
}

/** One circle through a strongly connected group, from its first file (breadth first: the shortest). */
function cyclePath(graph: Map<string, string[]>, group: Set<string>): string {
  const start = [...group].sort()[0]!;
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const target of graph.get(file) ?? []) {
      if (!group.has(target)) continue;
      if (target === start) {
        const circle = [start];
        for (let at = file; at !== start; at = previous.get(at)!) circle.splice(1, 0, at);
        return [...circle, start].join(' → ');
      }
      if (!previous.has(target)) {
        previous.set(target, file);
        queue.push(target);
      }
    }
  }
  return [...group].join(' → ');
}
