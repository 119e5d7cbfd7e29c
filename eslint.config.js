// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Modules the agent core must never depend on: it is given a Sandbox, a Model and an EventStore.
 * (Import cycles, the other rooms' boundaries and what the Action's bundle may carry:
 * scripts/check-imports.ts, run by `npm run lint`.)
 * The test-results engine (src/testing) is held to the same rule: the agent core imports it, and
 * the eval and the publishers read test runs through it.
 */
const forbiddenInAgent = [
  {
    group: ['probot', 'probot/*', '@octokit/*', 'octokit'],
    message: 'src/agent knows nothing about GitHub.',
  },
  { group: ['bullmq', 'bullmq/*', 'ioredis'], message: 'src/agent knows nothing about the queue.' },
  { group: ['dockerode', 'docker-modem'], message: 'src/agent knows nothing about Docker.' },
  {
    group: ['**/app/**', '**/queue/**', '**/github/**', '**/sandbox/docker/**', '**/workers/**', '**/cli/**'],
    message:
      'src/agent and src/testing may only import the agent core, testing, events, model and sandbox interfaces.',
  },
];

/**
 * The App's intake decision (src/app/intake-decision.ts) is pure: it reads no GitHub, queue or
 * Redis, only the facts it is given. Types from the modules that read them are fine.
 */
const forbiddenInIntakeDecision = [
  {
    group: ['probot', 'probot/*', '@octokit/*', 'octokit', 'bullmq', 'bullmq/*', 'ioredis'],
    message: 'the intake decision does no I/O: intake.ts reads the facts and carries out the plan.',
  },
  {
    group: [
      '**/github/**',
      '**/queue/queues.js',
      '**/queue/control.js',
      '**/queue/issue-lock.js',
      './intake.js',
      './question.js',
      './ci-round.js',
      './main.js',
    ],
    allowTypeImports: true,
    message: 'the intake decision does no I/O: intake.ts reads the facts and carries out the plan.',
  },
];

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'scratch/**',
      'node_modules/**',
      'coverage/**',
      'test-artifacts/**',
      'dist-action/**',
      // Fixture repositories are other projects' code, with their own runners' globals (jest's).
      'test/fixtures/repos/**',
      'test/fixtures/eval-libraries/**',
      // Code that runs inside a sandbox (a CommonJS MCP server), not the project's own.
      'test/fixtures/mcp/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['*.js', 'bin/*.js', 'scripts/*.mjs'] } },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite'] },
          ],
        },
      ],
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true },
      ],
      '@typescript-eslint/no-unnecessary-condition': ['error', { allowConstantLoopConditions: true }],
      'no-console': 'error',
    },
  },
  {
    // A function a reader can hold in one sitting. Blank lines and comments do not count.
    files: ['src/**/*.ts'],
    rules: {
      'max-lines-per-function': [
        'error',
        { max: 150, skipBlankLines: true, skipComments: true, IIFEs: true },
      ],
      // A client checked out of a pg pool has no 'error' listener: a server restart then ends the
      // process. withClient (events/pg-event-store.ts) listens while the client is out.
      'no-restricted-syntax': [
        'error',
        {
          selector:
            "CallExpression[arguments.length=0][callee.property.name='connect'][callee.object.name=/pool$/i], CallExpression[arguments.length=0][callee.property.name='connect'][callee.object.property.name=/pool$/i]",
          message: 'Check a client out of a pg pool with withClient (src/events/pg-event-store.ts).',
        },
      ],
    },
  },
  {
    files: ['src/agent/**/*.ts', 'src/testing/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: forbiddenInAgent }] },
  },
  {
    files: ['src/app/intake-decision.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: forbiddenInIntakeDecision }] },
  },
  {
    // Entry points and test support talk to a terminal.
    files: [
      'src/cli/**',
      'src/app/main.ts',
      'src/model-sim/main.ts',
      'workers/**',
      'bench/**',
      'scripts/**',
      'test/**',
      'bin/**',
    ],
    rules: { 'no-console': 'off' },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
);
