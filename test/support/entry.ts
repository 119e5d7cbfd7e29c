import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = join(import.meta.dirname, '..', '..');
/**
 * The TypeScript hooks the test processes run under (scripts/ts-hooks.mjs), as an absolute URL: some
 * tests run their processes in a scratch folder.
 */
export const TS_HOOKS = pathToFileURL(join(ROOT, 'scripts', 'ts-hooks.mjs')).href;

/**
 * Set by `npm test` (scripts/run-tests.mjs --built), which builds dist/ just before the tests: the
 * programs the tests start then run compiled, as they ship. Loading them from source costs CPU in
 * every App, worker and CLI process (through tsx it was 1.3 s more per App or worker and 0.6 s per
 * CLI run), and a suite starts hundreds.
 */
export const FROM_DIST = process.env.ISSUE_AGENT_TEST_FROM_DIST === '1';

/**
 * Node's arguments that start one of the project's programs (`src/cli/main.ts`, relative to the
 * repository): compiled under `npm test`, else from source (TS_HOOKS) so a single file runs on today's
 * source. Preloaded modules (`imports`, a test's hook such as recording-backend.ts) register into the
 * source modules' instances, so a process that has any runs from source either way.
 */
export function entryArgs(script: string, imports: readonly string[] = []): string[] {
  if (FROM_DIST && imports.length === 0) {
    const compiled = join(ROOT, 'dist', script.replace(/\.ts$/, '.js'));
    if (!existsSync(compiled))
      throw new Error(`ISSUE_AGENT_TEST_FROM_DIST=1 but ${compiled} is missing: run npm run build`);
    return [compiled];
  }
  return ['--import', TS_HOOKS, ...imports.flatMap((m) => ['--import', m]), join(ROOT, script)];
}
