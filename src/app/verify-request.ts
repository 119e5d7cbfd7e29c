import type { RepoConfig } from '../config/repo-config.js';
import type { FixJob } from '../queue/payloads.js';
import type { Trigger } from '../queue/trigger.js';
import { buildFixJob } from './trigger-rules.js';

/**
 * `@agent verify` on a pull request (or on an issue whose pull request of the App's is open): the
 * PR's verdict reproduced in fresh sandboxes by a worker, as `issue-agent verify` does, put on the
 * **Issue Agent** check run of its head and said in the PR's conversation (worker/verify-job.ts).
 * Anyone who may start jobs may ask: it runs the repository's tests twice and no model.
 */

/** The instruction asks for a reproduction (`verify` as its first word; the rest is for people). */
export const VERIFY = /^verify(?:\s|$)/i;

/** Said on an issue with no open pull request of the App's to verify. */
export const VERIFY_NO_PULL =
  'There is no pull request here to verify: ask `@agent verify` on the pull request, or on an issue whose pull request of mine is open.';

/** The verify job for pull request `pull` (already allowed): it reports in that PR's conversation. */
export function buildVerifyJob(trigger: Trigger, config: RepoConfig, pull: number): FixJob {
  return { ...buildFixJob(trigger, { kind: 'pull', number: pull }, config, '', []), kind: 'verify' };
}
