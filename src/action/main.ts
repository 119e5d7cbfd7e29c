import { runAction } from './run-action.js';

/**
 * The action's entry (bundled into dist-action/index.mjs by `npm run build:action`). The runner
 * cancels a job with SIGINT and, a few seconds later, SIGTERM: both stop the agent at its next step
 * boundary, and the progress comment says the run was cancelled.
 */
const controller = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    controller.abort(new Error(`received ${signal}`));
  });
}

runAction(process.env, { signal: controller.signal }).then(
  (result) => {
    process.exitCode = result.exitCode;
  },
  (error: unknown) => {
    process.stdout.write(
      `issue-agent: unexpected failure: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
