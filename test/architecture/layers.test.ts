// The layer rules of eslint.config.js hold: an import against the direction of the layers fails lint,
// the same import where it is allowed does not (docs/architecture.md, "Layers").
import { ESLint } from 'eslint';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// Only the layer rule runs, and it needs no type information: without the project service each
// lintText parses one file instead of type-checking the whole program (the file took 42 s, now ~2 s).
const eslint = new ESLint({
  cwd: ROOT,
  ruleFilter: ({ ruleId }) => ruleId === '@typescript-eslint/no-restricted-imports',
  overrideConfig: { languageOptions: { parserOptions: { projectService: false, project: null } } },
});

/** The layer-rule messages ESLint gives `code` linted as the file `file`. */
async function layerProblems(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  expect(result?.messages.filter((m) => m.fatal)).toEqual([]);
  return (result?.messages ?? [])
    .filter((m) => m.ruleId === '@typescript-eslint/no-restricted-imports')
    .map((m) => m.message);
}

describe('layer rules', () => {
  it('keep the domain free of I/O and of the other layers', async () => {
    expect(
      await layerProblems('src/domain/errors.ts', "import fs from 'node:fs';\nexport const f = fs;\n"),
    ).toEqual([expect.stringContaining('The domain is pure')]);
    expect(
      await layerProblems(
        'src/domain/errors.ts',
        "import { createContext } from '../context.js';\nexport const f = createContext;\n",
      ),
    ).toEqual([expect.stringContaining('imports no other layer')]);
    expect(
      await layerProblems(
        'src/domain/errors.ts',
        "import { fieldError } from './errors.js';\nexport const f = fieldError;\n",
      ),
    ).toEqual([]);
  });

  it('keep drivers from services and HTTP, and Berth’s schema out of drivers', async () => {
    const service =
      "import { createServices } from '../../composition.js';\nexport const f = createServices;\n";
    expect(await layerProblems('src/drivers/pdf/merge.ts', service)).toHaveLength(1);
    const schema = "import type { Database } from '../../db/schema/index.js';\nexport type D = Database;\n";
    expect(await layerProblems('src/drivers/pdf/merge.ts', schema)).toHaveLength(1);
    expect(await layerProblems('src/services/identity.ts', schema)).toEqual([]);
  });

  it('keep routes on services: no drivers, jobs or queries', async () => {
    const driver =
      "import { startS3Server } from '../../drivers/objectstorage/local/server.js';\nexport const f = startS3Server;\n";
    expect(await layerProblems('src/http/routes/tools.ts', driver)).toHaveLength(1);
    const repo =
      "import { createInfrastructureRepository } from '../../db/repositories/infrastructure.js';\nexport const f = createInfrastructureRepository;\n";
    expect(await layerProblems('src/http/routes/tools.ts', repo)).toHaveLength(1);
    const service =
      "import { createServices } from '../../composition.js';\nexport const f = createServices;\n";
    expect(await layerProblems('src/http/routes/tools.ts', service)).toEqual([]);
    // No exception any more: the ownership plugin and /readyz receive a service and a ping.
    expect(await layerProblems('src/http/plugins/ownership.ts', repo)).toHaveLength(1);
    const ping = "import { pingStore } from '../../db/connect.js';\nexport const f = pingStore;\n";
    expect(await layerProblems('src/http/routes/system.ts', ping)).toHaveLength(1);
  });

  it('keep services on driver interfaces: no local implementation of any family', async () => {
    for (const family of ['databases', 'objectstorage', 'runtime']) {
      const local = `import * as local from '../drivers/${family}/local/index.js';\nexport const f = local;\n`;
      expect(await layerProblems('src/services/identity.ts', local), family).toEqual([
        expect.stringContaining('through its interface'),
      ]);
    }
    const contract =
      "import type { ObjectStorageDriver } from '../drivers/objectstorage/driver.js';\nexport type D = ObjectStorageDriver;\n";
    expect(await layerProblems('src/services/identity.ts', contract)).toEqual([]);
  });

  it('keep the context to the entry points: services, jobs and HTTP take narrow dependencies', async () => {
    const files = {
      'src/services/identity.ts': '../context.js',
      'src/jobs/runner.ts': '../context.js',
      'src/http/routes/tools.ts': '../../context.js',
      'src/http/plugins/ownership.ts': '../../context.js',
      'src/http/routes/system.ts': '../../context.js',
    };
    for (const [file, target] of Object.entries(files)) {
      const value = `import { createContext } from '${target}';\nexport const f = createContext;\n`;
      const type = `import type { AppContext } from '${target}';\nexport type C = AppContext;\n`;
      expect(await layerProblems(file, value), file).toEqual([
        expect.stringContaining('narrow dependencies'),
      ]);
      expect(await layerProblems(file, type), file).toEqual([expect.stringContaining('narrow dependencies')]);
    }
    // The entry points hold it.
    const entry = "import type { AppContext } from './context.js';\nexport type C = AppContext;\n";
    expect(await layerProblems('src/lifecycle.ts', entry)).toEqual([]);
    expect(await layerProblems('src/app.ts', entry)).toEqual([]);
  });

  it('keep jobs below the services: handlers are handed in', async () => {
    const service =
      "import { createObjectStorageService } from '../services/object-storage/index.js';\nexport const f = createObjectStorageService;\n";
    expect(await layerProblems('src/jobs/index.ts', service)).toEqual([
      expect.stringContaining('Jobs know nothing of services'),
    ]);
    const queue = "import { enqueueJob } from './queue.js';\nexport const f = enqueueJob;\n";
    expect(await layerProblems('src/jobs/index.ts', queue)).toEqual([]);
  });
});
