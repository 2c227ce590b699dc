// Where in the user's file an error of the apply API points: its dotted path (`spec.services.cache.memory`,
// `spec.domains.0.domain`) walked through the YAML, to the line of the deepest node that exists.
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Node } from 'yaml';

export interface Locator {
  /** The 1-based line of a path, or undefined when the text is not YAML. */
  line(path: string): number | undefined;
}

export function locator(text: string): Locator {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: false });
  const ok = doc.errors.length === 0;
  return {
    line(path) {
      if (!ok) return undefined;
      let node: unknown = doc.contents;
      let offset = (doc.contents as Node | null)?.range?.[0] ?? 0;
      for (const segment of path.split('.')) {
        if (isMap(node)) {
          const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === segment);
          if (!pair) break;
          offset = (pair.key as Node).range?.[0] ?? offset;
          node = pair.value;
        } else if (isSeq(node)) {
          const index = /^\d+$/.test(segment) ? Number(segment) : -1;
          // Entries are addressed by name, or by index when they have no usable name.
          const item =
            node.items.find((i) => isMap(i) && String(i.get('name')) === segment) ??
            (index >= 0 && index < node.items.length ? node.items[index] : undefined);
          if (!item) break;
          offset = (item as Node).range?.[0] ?? offset;
          node = item;
        } else break;
      }
      return lineCounter.linePos(offset).line;
    },
  };
}
