// docs/operations.md names every series Berth defines, and the Grafana dashboard (docs/grafana/berth.json,
// valid JSON) queries only series that exist.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');

/** The series src/services/metrics/index.ts defines (`name: 'berth_…'` or a gauge/total helper's first argument). */
function defined(): Set<string> {
  const source = read('src/services/metrics/index.ts');
  return new Set(
    [...source.matchAll(/(?:name: |(?:gauge|totalOf)\(\s*)'(berth_[a-z0-9_]+)'/g)].map((m) => m[1]!),
  );
}

describe('metrics documentation', () => {
  it('lists every series in docs/operations.md', () => {
    const names = defined();
    expect(names.size).toBeGreaterThan(25);
    const table = read('docs/operations.md');
    for (const name of names) expect(table, name).toContain(`| \`${name}\` |`);
  });

  it('has a Grafana dashboard whose queries name only series Berth serves', () => {
    const dashboard = JSON.parse(read('docs/grafana/berth.json')) as {
      panels: Array<{ targets?: Array<{ expr: string }> }>;
    };
    const names = defined();
    const queried = dashboard.panels
      .flatMap((panel) => panel.targets ?? [])
      .flatMap((target) => [...target.expr.matchAll(/berth_[a-z0-9_]+/g)].map((m) => m[0]))
      // Histograms' series; prom-client's process set.
      .map((name) => name.replace(/_bucket$/, ''))
      .filter((name) => !/^berth_(process|nodejs)_/.test(name));
    expect(queried.length).toBeGreaterThan(20);
    for (const name of queried) expect(names, name).toContain(name);
    // Every series Berth defines has a panel.
    for (const name of names) expect(queried, name).toContain(name);
  });
});
