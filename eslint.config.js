// Type-aware lint: the promise rules catch the bugs that matter most in a server full of async work.
// The layer rules keep imports one way (docs/architecture.md, "Layers"): http → services → domain,
// db, drivers, jobs; domain does no I/O; drivers know nothing of services or HTTP; and only the entry
// points (app.ts, main.ts, lifecycle.ts, the CLI) hold the context: services, jobs and HTTP receive
// narrow dependencies built in src/composition.ts and src/app.ts.
import tseslint from 'typescript-eslint';

/** Modules that do I/O or build queries: not for the domain. */
const IO_MODULES = [
  'kysely',
  'pg',
  'better-sqlite3',
  'mysql2',
  'mysql2/promise',
  'nodemailer',
  'playwright-core',
  'node:fs',
  'node:fs/promises',
  'node:child_process',
  'node:net',
  'node:http',
  'node:https',
  'node:dgram',
];

const layer = (message, group) => ({ group, message });

/**
 * A driver's interface is its family's `driver.ts` or `types.ts` (drivers/runtime/driver.ts,
 * drivers/databases/types.ts…); every other file under drivers/ is an implementation. Services see
 * interfaces only: src/composition.ts picks and wires implementations (issue 27).
 */
const DRIVER_IMPLEMENTATION = {
  regex: String.raw`(^|/)drivers/(?![\w-]+/(driver|types)\.js$)`,
  message:
    'Services use a driver through its interface (drivers/<family>/driver.ts or types.ts); src/composition.ts picks the implementation and hands it in.',
};

/** Services do no local I/O of their own: files and processes are a driver's (issue 27). */
const HOST_MODULES = ['fs', 'fs/promises', 'child_process'].flatMap((name) => [name, `node:${name}`]);

/**
 * A dynamic import() escapes no-restricted-imports: where layers are checked, imports are static
 * (and a lazy load of Berth's own modules is the composition root's business).
 */
const NO_DYNAMIC_IMPORT = {
  selector: 'ImportExpression',
  message:
    'Import statically, so that the layer rules see the dependency (a lazy load belongs in src/composition.ts).',
};

/** The context is for the entry points; type imports count too (a type import is still a dependency). */
const NO_CONTEXT = layer(
  'Only the entry points hold the context: take the narrow dependencies you use (src/composition.ts builds them).',
  ['**/context.js'],
);

const DRIVER_LAYERS = layer('Drivers know nothing of services, HTTP, jobs or the context.', [
  '**/services/**',
  '**/http/**',
  '**/jobs/**',
  '**/context.js',
  '**/composition.js',
]);

/** Kysely's query-building entry points: a call of one of these builds SQL. */
const QUERY_BUILDER_METHODS = new Set([
  'selectFrom',
  'selectNoFrom',
  'insertInto',
  'replaceInto',
  'updateTable',
  'deleteFrom',
  'mergeInto',
  'executeQuery',
]);

/**
 * Berth's own layer rules that are not about imports: a plugin of their own, so that they do not share
 * options with (and are not overridden by) the import rules above.
 */
const berth = {
  rules: {
    // SQL lives in src/db (repositories) and src/jobs (the queue): services call repository functions,
    // handing them a transaction when the work must commit together.
    'no-query-builder': {
      meta: {
        type: 'problem',
        schema: [],
        messages: {
          call: "Services call repositories: move this '{{name}}' query into src/db/repositories.",
          sql: 'Services call repositories: move this sql`…` query into src/db/repositories.',
          importSql: "Services call repositories: Kysely's sql belongs in src/db/repositories.",
        },
      },
      create(context) {
        return {
          CallExpression(node) {
            const callee = node.callee;
            if (callee.type !== 'MemberExpression') return;
            const name = callee.property.type === 'Identifier' ? callee.property.name : undefined;
            if (name !== undefined && QUERY_BUILDER_METHODS.has(name))
              context.report({ node, messageId: 'call', data: { name } });
          },
          TaggedTemplateExpression(node) {
            const tag = node.tag.type === 'MemberExpression' ? node.tag.object : node.tag;
            if (tag.type === 'Identifier' && tag.name === 'sql') context.report({ node, messageId: 'sql' });
          },
          ImportDeclaration(node) {
            if (node.source.value !== 'kysely' || node.importKind === 'type') return;
            for (const specifier of node.specifiers) {
              if (
                specifier.type === 'ImportSpecifier' &&
                specifier.importKind !== 'type' &&
                specifier.imported.type === 'Identifier' &&
                specifier.imported.name === 'sql'
              )
                context.report({ node: specifier, messageId: 'importSql' });
            }
          },
        };
      },
    },
    // The CLI's admin commands act through the services (the context's), never on the tables.
    'no-repositories': {
      meta: {
        type: 'problem',
        schema: [],
        messages: {
          repositories:
            'The CLI goes through services (ctx.services, ctx.identity…), not src/db/repositories.',
        },
      },
      create(context) {
        const check = (node, source) => {
          if (
            source?.type === 'Literal' &&
            typeof source.value === 'string' &&
            /(^|\/)db\/repositories\//.test(source.value)
          )
            context.report({ node, messageId: 'repositories' });
        };
        return {
          ImportDeclaration: (node) => check(node, node.source),
          ImportExpression: (node) => check(node, node.source),
          ExportNamedDeclaration: (node) => check(node, node.source),
          ExportAllDeclaration: (node) => check(node, node.source),
        };
      },
    },
  },
};

/**
 * The dashboard (web/src) and the CLI's client (src/cli/client) read the API's answers as the types of
 * its response schemas (docs/architecture.md, "Response types"): type-only imports, so that no code of
 * the server reaches the browser bundle or the client.
 */
const SCHEMA_TYPES_ONLY = {
  group: ['**/http/schemas/**'],
  allowTypeImports: true,
  message:
    "Take the response schemas as types only (import type { … }, then Static<typeof …>): a value brings the server's code along.",
};

const SERVICE_LAYERS = [
  layer('Services do not depend on HTTP.', ['**/http/**']),
  NO_CONTEXT,
  layer('Services are built by the composition root; they do not reach it.', ['**/composition.js']),
];

export const LAYER_RULES = [
  {
    files: ['src/domain/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: IO_MODULES.map((name) => ({ name, message: 'The domain is pure: no I/O, no queries.' })),
          patterns: [
            layer('The domain imports no other layer of Berth.', [
              '**/db/**',
              '**/drivers/**',
              '**/services/**',
              '**/http/**',
              '**/jobs/**',
              '**/context.js',
              '**/composition.js',
            ]),
          ],
        },
      ],
    },
  },
  {
    files: ['src/drivers/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            DRIVER_LAYERS,
            layer("Berth's schema stays out of drivers (the local object storage is the one exception).", [
              '**/db/**',
            ]),
          ],
        },
      ],
    },
  },
  {
    // The local object storage is an S3 server inside Berth whose metadata lives in Berth's store (its SQL
    // in metadata.ts and its own transactions); its interface (driver.ts) carries none of Berth's schema.
    files: ['src/drivers/objectstorage/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [DRIVER_LAYERS],
        },
      ],
    },
  },
  {
    files: ['src/http/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'kysely', message: 'Routes call services; queries live in src/db.' }],
          patterns: [
            layer('Routes call services; they do not reach drivers or jobs.', [
              '**/drivers/**',
              '**/jobs/**',
            ]),
            NO_CONTEXT,
            {
              group: ['**/db/repositories/**', '**/db/connect.js'],
              allowTypeImports: true,
              message: 'Routes call services; queries live in src/db.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/services/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: HOST_MODULES.map((name) => ({
            name,
            message: 'Services do no file or process work of their own: a driver does, behind its interface.',
          })),
          patterns: [...SERVICE_LAYERS, DRIVER_IMPLEMENTATION],
        },
      ],
      'no-restricted-syntax': ['error', NO_DYNAMIC_IMPORT],
    },
  },
  {
    // The job queue and runner sit below the services: the registry gets its handlers from them.
    files: ['src/jobs/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            layer('Jobs know nothing of services or HTTP: handlers are handed in (src/composition.ts).', [
              '**/services/**',
              '**/http/**',
              '**/composition.js',
            ]),
            layer('Jobs know nothing of drivers: the handlers that use them are handed in.', [
              '**/drivers/**',
            ]),
            NO_CONTEXT,
          ],
        },
      ],
      'no-restricted-syntax': ['error', NO_DYNAMIC_IMPORT],
    },
  },
  {
    // The CLI's admin commands reach services through the context it builds (ctx.services), never a
    // service's internals; its lazy import()s are checked too.
    files: ['src/cli/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { patterns: [layer('The CLI uses services through ctx.services.', ['**/services/**'])] },
      ],
      'no-restricted-syntax': [
        'error',
        {
          // esquery's regular expressions take no '/': \x2F is one.
          selector: String.raw`ImportExpression[source.value=/(^|\x2F)services\x2F/]`,
          message: 'The CLI uses services through ctx.services.',
        },
        { selector: "ImportExpression[source.type!='Literal']", message: NO_DYNAMIC_IMPORT.message },
      ],
    },
  },
  {
    // The CLI's client talks to a Berth over HTTP: of the server, it takes the response schemas' types.
    files: ['src/cli/client/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            layer('The CLI uses services through ctx.services.', ['**/services/**']),
            SCHEMA_TYPES_ONLY,
          ],
        },
      ],
    },
  },
  {
    // The dashboard is built for the browser: of the server's code, only the response schemas' types.
    files: ['web/src/**/*.{ts,tsx}'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: String.raw`(^|/)src/(?!http/schemas/)`,
              message: "The dashboard runs in the browser: it imports none of the server's code.",
            },
            SCHEMA_TYPES_ONLY,
          ],
        },
      ],
    },
  },
  {
    // The store is below everything but the domain: services, drivers and jobs use it, not the reverse.
    files: ['src/db/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            layer('The store imports only the domain: services, drivers and jobs use it, not the reverse.', [
              '**/services/**',
              '**/drivers/**',
              '**/jobs/**',
              '**/http/**',
              '**/cli/**',
              '**/context.js',
              '**/composition.js',
            ]),
          ],
        },
      ],
      'no-restricted-syntax': ['error', NO_DYNAMIC_IMPORT],
    },
  },
  {
    // Configuration is read before anything is built, by the entry points; it imports no other layer.
    files: ['src/config/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            layer('Configuration imports no other layer of Berth but the domain.', [
              '**/services/**',
              '**/drivers/**',
              '**/jobs/**',
              '**/db/**',
              '**/http/**',
              '**/cli/**',
              '**/context.js',
              '**/composition.js',
            ]),
          ],
        },
      ],
      'no-restricted-syntax': ['error', NO_DYNAMIC_IMPORT],
    },
  },
  {
    files: ['src/services/**/*.ts'],
    plugins: { berth },
    rules: { 'berth/no-query-builder': 'error' },
  },
  {
    files: ['src/cli/**/*.ts'],
    plugins: { berth },
    rules: { 'berth/no-repositories': 'error' },
  },
];

export default tseslint.config(
  // scripts/*.mjs run where only production dependencies exist (no TypeScript): plain JavaScript, unlinted.
  { ignores: ['dist/**', 'node_modules/**', 'data/**', 'coverage/**', 'scripts/**/*.mjs'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  ...LAYER_RULES,
  {
    // Tests reach Berth over a real socket (test/helpers/http.ts): inject()'s request object is not a
    // socket, and hid a guard that walked a streamed body until the heap ran out (issue 24).
    files: ['test/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "CallExpression[callee.type='MemberExpression'][callee.property.name='inject']",
          message:
            'Send requests over a real socket (t.request(), listenOnSocket() in test/helpers/http.ts); if a test truly needs inject(), disable this rule on that line and say why.',
        },
      ],
    },
  },
  { files: ['eslint.config.js'], ...tseslint.configs.disableTypeChecked },
);
