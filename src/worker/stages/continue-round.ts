import { reduceState } from '../../events/reduce-state.js';
import { issueKey } from '../../queue/ids.js';
import type { JobContext } from './types.js';

/**
 * An answer to the agent's question continues that run's conversation as a new round: the asking
 * run's trajectory (host-written data, never the sandbox's) is copied into this job's folder, then
 * the answer is appended as `round_started`, which reopens the run.
 *
 * Idempotent: the answer is appended only while the copy has no more rounds than the asking run, so
 * a retry (also one after this round asked again) never appends it twice.
 *
 * Returns false when there is no conversation to continue here (the asking run is not on this host,
 * names another issue, or did not end with a question): the job then starts a new run, with the
 * answer among its instructions.
 */
export async function continueConversation(ctx: JobContext): Promise<boolean> {
  const continues = ctx.p.continues;
  if (continues === undefined || continues === null) return false;
  // Only a run of this issue: a payload naming another repository's job must not pull its log in.
  if (!continues.jobId.startsWith(`${issueKey(ctx.p.repo.id, ctx.p.issue.number)}-`)) {
    ctx.log.warn({ earlier: continues.jobId }, 'the conversation to continue is not of this issue');
    return false;
  }
  const earlier = await ctx.storage.open(continues.jobId);
  const fresh = (await ctx.storage.open(ctx.jobId)) === null;
  if (fresh) {
    if (earlier === null || reduceState(earlier.events).outcome?.outcome !== 'needs_info') {
      ctx.log.warn({ earlier: continues.jobId }, 'no question to continue in the run storage');
      return false;
    }
    await ctx.storage.discard(ctx.jobId);
    await ctx.storage.copy(continues.jobId, ctx.jobId);
  }
  const store = await ctx.storage.open(ctx.jobId);
  if (store === null) return false;
  const state = reduceState(store.events);
  const askedRounds = earlier === null ? null : reduceState(earlier.events).rounds;
  if (
    state.outcome?.outcome === 'needs_info' &&
    (askedRounds === null ? fresh : state.rounds === askedRounds)
  ) {
    await store.append({ kind: 'round_started', by: continues.answer.by, text: continues.answer.text });
    ctx.log.info({ earlier: continues.jobId }, 'the conversation continues with the answer');
  }
  return true;
}
