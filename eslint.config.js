// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** Modules the agent core must never depend on: it is given a Sandbox, a Model and an EventStore. */
const forbiddenInAgent = [
  {
    group: ['probot', 'probot/*', '@octokit/*', 'octokit'],
    message: 'src/agent knows nothing about GitHub.',
  },
  { group: ['bullmq', 'bullmq/*', 'ioredis'], message: 'src/agent knows nothing about the queue.' },
  { group: ['dockerode', 'docker-modem'], message: 'src/agent knows nothing about Docker.' },
  {
    group: ['**/app/**', '**/queue/**', '**/github/**', '**/sandbox/docker/**', '**/workers/**', '**/cli/**'],
    message: 'src/agent may only import the agent core, events, model and sandbox interfaces.',
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
      'action/dist/**',
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
    files: ['src/agent/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: forbiddenInAgent }] },
  },
  {
    // Entry points and test support talk to a terminal.
    files: ['src/cli/**', 'src/app/main.ts', 'workers/**', 'bench/**', 'scripts/**', 'test/**', 'bin/**'],
    rules: { 'no-console': 'off' },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
);
