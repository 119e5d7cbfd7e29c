import { isolationSupport } from '../../src/sandbox/local/launch.js';
import { redisSkipReason } from './redis-server.js';

/**
 * Why an App stack on the isolated `local` sandbox cannot run here, or false: Redis missing, or no
 * isolation mechanism on this host. Under ISSUE_AGENT_REQUIRE_DOCKER (CI) a host without isolation
 * is not a reason to skip: the test runs and fails loudly.
 */
export async function localStackSkip(): Promise<string | false> {
  const redis = redisSkipReason();
  if (redis !== false) return redis;
  const support = await isolationSupport();
  return !support.ok && process.env.ISSUE_AGENT_REQUIRE_DOCKER !== '1'
    ? `no isolation here: ${support.reason}`
    : false;
}
