import type { EnvironmentRecord } from '../events/schema.js';

/**
 * Setup failed; the record says what ran. The job ends `failed` with cause `setup_failed`. Kept
 * apart from prepare.ts so that code which only reports the failure does not load the Docker client.
 */
export class EnvironmentSetupError extends Error {
  override readonly name = 'EnvironmentSetupError';
  constructor(
    message: string,
    readonly record: EnvironmentRecord,
    /** A network failure: a later attempt may succeed. */
    readonly transient: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
