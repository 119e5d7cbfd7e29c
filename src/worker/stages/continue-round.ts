import { existsSync } from 'node:fs';
import { cp, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { reduceState } from '../../events/reduce-state.js';
import { jobFolder } from '../job-folder.js';
import { openStore } from './rounds.js';
import type { JobContext } from './types.js';

/**
 * An answer to the agent's question continues that run's conversation as a new round: the earlier
 * job's trajectory (host-written data, never the sandbox's) is copied into this job's folder, then
 * the answer is appended as `round_started`, which reopens the run. Idempotent: a retry finds the
 * copy, and appends the answer only if the copy still ends waiting for one.
 *
 * Returns false when the earlier trajectory is not on this host (another worker host kept it): the
 * job then starts a new run, with the answer among its instructions.
 */
export async function continueConversation(ctx: JobContext): Promise<boolean> {
  const continues = ctx.p.continues;
  if (continues === undefined || continues === null) return false;
  const own = ctx.paths.trajectory;
  if (!existsSync(join(own, 'base_state.json'))) {
    const earlier = join(jobFolder(ctx.jobsDir, continues.jobId), 'trajectory');
    if (!existsSync(join(earlier, 'base_state.json'))) {
      ctx.log.warn({ earlier: continues.jobId }, 'the conversation to continue is not on this host');
      return false;
    }
    const tmp = `${own}.copy`;
    await rm(tmp, { recursive: true, force: true });
    await cp(earlier, tmp, { recursive: true, errorOnExist: false, verbatimSymlinks: true });
    await rm(own, { recursive: true, force: true });
    await rename(tmp, own);
  }
  const store = openStore(own);
  if (store === null) return false;
  if (reduceState(store.events).outcome?.outcome === 'needs_info') {
    await store.append({ kind: 'round_started', by: continues.answer.by, text: continues.answer.text });
    ctx.log.info({ earlier: continues.jobId }, 'the conversation continues with the answer');
  }
  return true;
}
