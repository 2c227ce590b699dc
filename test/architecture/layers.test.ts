// The layer rules of eslint.config.js hold: an import against the direction of the layers fails lint,
// the same import where it is allowed does not (docs/architecture.md, "Layers").
import { ESLint } from 'eslint';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { importCycles, importGraph } from './imports.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The rules this file proves (the import layers, dynamic import()s, SQL in repositories). */
const LAYER_RULE_IDS = [
  '@typescript-eslint/no-restricted-imports',
  'no-restricted-syntax',
  'berth/no-query-builder',
  'berth/no-repositories',
];
// Only the layer rules run, and they need no type information: without the project service each
// lintText parses one file instead of type-checking the whole program (the file took 42 s, now ~2 s).
const eslint = new ESLint({
  cwd: ROOT,
  ruleFilter: ({ ruleId }) => LAYER_RULE_IDS.includes(ruleId),
  overrideConfig: { languageOptions: { parserOptions: { projectService: false, project: null } } },
});
/** The layer-rule messages ESLint gives `code` linted as the file `file`. */
async function layerProblems(file: string, code: string, rule?: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  expect(result?.messages.filter((m) => m.fatal)).toEqual([]);
  // Without a rule: the import rules, and no-restricted-syntax (the dynamic import()s the layers refuse).
  const rules = rule ? [rule] : ['@typescript-eslint/no-restricted-imports', 'no-restricted-syntax'];
  return (result?.messages ?? []).filter((m) => rules.includes(m.ruleId ?? '')).map((m) => m.message);
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

  it('keep services on driver interfaces: no implementation file at all, static or dynamic (issue 27)', async () => {
    // What services imported before: engines, the engine functions, the service runner adapter.
    const implementations = [
      '../drivers/chromium/engine.js',
      '../drivers/databases/operations/cluster.js',
      '../drivers/databases/operations/index.js',
      '../drivers/databases/plan-limits.js',
      '../drivers/databases/charsets.js',
      '../drivers/services/databases.js',
      '../drivers/net/guard.js',
      '../drivers/mail/index.js',
      '../drivers/tools/local/index.js',
    ];
    // One lint of them all (each lint costs a second): one refusal per import.
    const values = implementations.map(
      (target, i) => `import * as d${i} from '${target}';\nexport const f${i} = d${i};\n`,
    );
    expect(await layerProblems('src/services/identity.ts', values.join(''))).toEqual(
      implementations.map((): unknown => expect.stringContaining('through its interface')),
    );
    // A type from an implementation file is still a dependency on it.
    const type =
      "import type { ChromiumEngine } from '../drivers/chromium/engine.js';\nexport type D = ChromiumEngine;\n";
    expect(await layerProblems('src/services/identity.ts', type)).toEqual([
      expect.stringContaining('through its interface'),
    ]);
    // A dynamic import() does not slip past: the runtime's local driver, or anything else.
    const dynamic =
      "export const f = async () => (await import('../drivers/runtime/local/index.js')).createLocalRuntimeDriver;\n";
    expect(await layerProblems('src/services/identity.ts', dynamic)).toEqual([
      expect.stringContaining('Import statically'),
    ]);
    // The interfaces: each family's driver.ts or types.ts.
    const interfaces = [
      '../drivers/runtime/driver.js',
      '../drivers/databases/types.js',
      '../drivers/services/types.js',
      '../drivers/mail/types.js',
      '../drivers/tools/types.js',
    ].map((target, i) => `import type * as t${i} from '${target}';\nexport type T${i} = typeof t${i};\n`);
    expect(await layerProblems('src/services/identity.ts', interfaces.join(''))).toEqual([]);
    // A deeper types.ts is an implementation's (only a family's own interface counts).
    const deep =
      "import type * as t from '../drivers/databases/local/types.js';\nexport type D = typeof t;\n";
    expect(await layerProblems('src/services/identity.ts', deep)).toHaveLength(1);
  });

  it('keep services off the file system and processes: a driver does that work (issue 27)', async () => {
    const host = ['node:fs', 'node:fs/promises', 'node:child_process', 'fs', 'child_process'];
    const code = host.map((name, i) => `import * as m${i} from '${name}';\nexport const f${i} = m${i};\n`);
    expect(await layerProblems('src/services/identity.ts', code.join(''))).toEqual(
      host.map((): unknown => expect.stringContaining('no file or process work')),
    );
    const pathOnly = "import path from 'node:path';\nexport const f = path;\n";
    expect(await layerProblems('src/services/identity.ts', pathOnly)).toEqual([]);
  });

  it('hold every service to the driver rule: the files once excepted are refused engines and files', async () => {
    // The last services that did engine or file work of their own (issue 27 item 1): the tools, the
    // /1.3 operations, the managed databases' plan sizes and view, scheduled deletion.
    const engineAndFiles =
      "import { ChromiumEngine } from '../../drivers/chromium/engine.js';\nimport fs from 'node:fs/promises';\nexport const f = [ChromiumEngine, fs];\n";
    for (const file of [
      'src/services/tools/index.ts',
      'src/services/scheduled-deletion/index.ts',
      'src/services/db-operations/index.ts',
      'src/services/db-operations/requests.ts',
      'src/services/managed-databases/service.ts',
      'src/services/managed-databases/view.ts',
    ]) {
      expect(fs.existsSync(path.join(ROOT, file)), file).toBe(true);
      expect(await layerProblems(file, engineAndFiles), file).toEqual([
        expect.stringContaining('through its interface'),
        expect.stringContaining('no file or process work'),
      ]);
    }
  });

  it('hold the runtime service to the rule: uploaded sources go through the artifact store', async () => {
    const fsImport = "import fs from 'node:fs';\nexport const f = fs;\n";
    expect(await layerProblems('src/services/applications/runtime.ts', fsImport)).toEqual([
      expect.stringContaining('no file or process work'),
    ]);
    const local =
      "import { createLocalArtifactStore } from '../../drivers/artifacts/local.js';\nexport const f = createLocalArtifactStore;\n";
    expect(await layerProblems('src/services/applications/runtime.ts', local)).toEqual([
      expect.stringContaining('through its interface'),
    ]);
  });

  it('keep the store and the configuration below the services and drivers', async () => {
    // Few lints (each costs seconds on a busy machine): one refusal per import of each.
    const fromStore = [
      '../../services/object-storage/index.js',
      '../../drivers/runtime/local/index.js',
      '../../jobs/queue.js',
    ].map((target, i) => `import * as m${i} from '${target}';\nexport const f${i} = m${i};\n`);
    expect(await layerProblems('src/db/repositories/identity.ts', fromStore.join(''))).toEqual(
      fromStore.map((): unknown => expect.stringContaining('The store imports only')),
    );
    const fromConfig = ['../services/identity.js', '../drivers/net/guard.js', '../db/connect.js'].map(
      (target, i) => `import * as m${i} from '${target}';\nexport const f${i} = m${i};\n`,
    );
    const domain = "import { fieldError } from '../domain/errors.js';\nexport const e = fieldError;\n";
    expect(await layerProblems('src/config/index.ts', fromConfig.join('') + domain)).toEqual(
      fromConfig.map((): unknown => expect.stringContaining('Configuration imports no other layer')),
    );
    const dynamic = "export const f = () => import('../services/identity.js');\n";
    expect(await layerProblems('src/db/connect.ts', dynamic)).toEqual([
      expect.stringContaining('Import statically'),
    ]);
  }, 120_000);

  it('keep the CLI on ctx.services: no service internals, static or dynamic', async () => {
    const value =
      "import { createCreditLedger } from '../services/tools/credits.js';\nexport const f = createCreditLedger;\n";
    expect(await layerProblems('src/cli/index.ts', value)).toEqual([expect.stringContaining('ctx.services')]);
    const dynamic = "export const f = () => import('../services/tools/credits.js');\n";
    expect(await layerProblems('src/cli/index.ts', dynamic)).toEqual([
      expect.stringContaining('ctx.services'),
    ]);
    // Its lazy loads of the entry points stay.
    const serve = "export const f = () => import('../main.js');\n";
    expect(await layerProblems('src/cli/index.ts', serve)).toEqual([]);
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

  it('let the dashboard and the CLI client take the response schemas as types only', async () => {
    const types = (from: string) =>
      `import type { UserResponse } from '${from}/http/schemas/platform.js';\nexport type U = typeof UserResponse;\n`;
    const values = (from: string) =>
      `import { UserResponse } from '${from}/http/schemas/platform.js';\nexport const u = UserResponse;\n`;
    expect(await layerProblems('web/src/api.ts', types('../../src'))).toEqual([]);
    expect(await layerProblems('web/src/pages/apps.tsx', types('../../../src'))).toEqual([]);
    expect(await layerProblems('src/cli/client/answers.ts', types('../..'))).toEqual([]);
    // A value import would put the server's code in the browser bundle or the client.
    expect(await layerProblems('web/src/api.ts', values('../../src'))).toEqual([
      expect.stringContaining('response schemas as types only'),
    ]);
    expect(await layerProblems('src/cli/client/commands/db.ts', values('../../..'))).toEqual([
      expect.stringContaining('response schemas as types only'),
    ]);
    // The dashboard takes nothing else of the server, not even a type.
    const domain =
      "import type { ApplicationType } from '../../src/domain/applications.js';\nexport type A = ApplicationType;\n";
    expect(await layerProblems('web/src/api.ts', domain)).toEqual([
      expect.stringContaining('runs in the browser'),
    ]);
    // The client keeps the CLI's rule: no service internals.
    const service =
      "import { createCreditLedger } from '../../services/tools/credits.js';\nexport const f = createCreditLedger;\n";
    expect(await layerProblems('src/cli/client/resolve.ts', service)).toEqual([
      expect.stringContaining('ctx.services'),
    ]);
  });

  it('keep jobs below the services: handlers are handed in', async () => {
    const service =
      "import { createObjectStorageService } from '../services/object-storage/index.js';\nexport const f = createObjectStorageService;\n";
    expect(await layerProblems('src/jobs/index.ts', service)).toEqual([
      expect.stringContaining('Jobs know nothing of services'),
    ]);
    const queue = "import { enqueueJob } from './queue.js';\nexport const f = enqueueJob;\n";
    expect(await layerProblems('src/jobs/index.ts', queue)).toEqual([]);
    const driver =
      "import { createAddressGuard } from '../drivers/net/guard.js';\nexport const f = createAddressGuard;\n";
    expect(await layerProblems('src/jobs/index.ts', driver)).toEqual([
      expect.stringContaining('Jobs know nothing of drivers'),
    ]);
  });
});

describe('import cycles', () => {
  it('none under src/: every arrow of the structure drawing points one way', () => {
    expect(importCycles(importGraph(path.join(ROOT, 'src')))).toEqual([]);
  });

  it('are found whatever form the import takes: type-only, re-export, dynamic', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-cycles-'));
    try {
      const files: Record<string, string> = {
        'a.ts': "import type { B } from './b.js';\nexport type A = B;\n",
        'b.ts': "export { a } from './c/d.js';\nexport type B = string;\n",
        'c/d.ts': "export const a = () => import('../a.js');\n",
        'e.ts': "import { a } from './c/d.js';\nexport const e = a;\n",
        'f.ts': "export type F = import('./g.js').G;\n",
        'g.ts': "import type { F } from './f.js';\nexport type G = F;\n",
      };
      for (const [file, text] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
        fs.writeFileSync(path.join(dir, file), text);
      }
      expect(importCycles(importGraph(dir)).sort()).toEqual([
        'a.ts → b.ts → c/d.ts → a.ts',
        'f.ts → g.ts → f.ts',
      ]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keep SQL in repositories: services build no query', async () => {
    const rule = 'berth/no-query-builder';
    const header =
      "import type { Kysely } from 'kysely';\nimport type { Database } from '../db/schema/index.js';\n";
    const queries = `${header}export const f = async (db: Kysely<Database>) => {
  await db.selectFrom('users').selectAll().execute();
  await db.insertInto('teams').values({ name: 'a', created_at: '' }).execute();
  await db.updateTable('users').set({ email: 'a' }).execute();
  // Inside a transaction too: the repository function takes the transaction instead.
  await db.transaction().execute((trx) => trx.deleteFrom('users').execute());
};\n`;
    expect(await layerProblems('src/services/identity.ts', queries, rule)).toEqual(
      ['selectFrom', 'insertInto', 'updateTable', 'deleteFrom'].map((name): unknown =>
        expect.stringContaining(`move this '${name}' query into src/db/repositories`),
      ),
    );
    // The same queries where queries live.
    expect(
      await layerProblems(
        'src/db/repositories/identity.ts',
        queries.replace('../db/schema/', '../schema/'),
        rule,
      ),
    ).toEqual([]);
    const raw = "import { sql } from 'kysely';\nexport const q = sql`SELECT 1`;\n";
    expect(await layerProblems('src/services/identity.ts', raw, rule)).toEqual([
      expect.stringContaining("Kysely's sql belongs in src/db/repositories"),
      expect.stringContaining('move this sql`…` query'),
    ]);
    // Starting a transaction and handing it to repositories is the service's to do.
    const transaction = `import type { Kysely } from 'kysely';
import type { Database } from '../db/schema/index.js';
import { createIdentityRepository } from '../db/repositories/identity.js';
export const f = (db: Kysely<Database>) =>
  db.transaction().execute((trx) => createIdentityRepository(trx).findUser(1));\n`;
    expect(await layerProblems('src/services/identity.ts', transaction, rule)).toEqual([]);
  });

  it('keep SQL in repositories: the CLI acts through services, not repositories', async () => {
    const cli = 'berth/no-repositories';
    const repo =
      "import { createIdentityRepository } from '../db/repositories/identity.js';\nexport const f = createIdentityRepository;\n";
    expect(await layerProblems('src/cli/index.ts', repo, cli)).toEqual([
      expect.stringContaining('The CLI goes through services'),
    ]);
    const dynamic = "export const f = () => import('../db/repositories/identity.js');\n";
    expect(await layerProblems('src/cli/index.ts', dynamic, cli)).toHaveLength(1);
    const service =
      "import { createIdentityService } from '../services/identity.js';\nexport const f = createIdentityService;\n";
    expect(await layerProblems('src/cli/index.ts', service, cli)).toEqual([]);
  });
});
