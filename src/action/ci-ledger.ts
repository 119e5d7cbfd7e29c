import { createHash } from 'node:crypto';
import type { CiLedger } from '../app/ci-round.js';
import type { RestClient } from '../app/trigger-rules.js';
import { codeSpan } from '../publish/markdown.js';
import { ciRoundMarker, ciSaidMarker, findCiRoundMarker, findCiSaidMarker } from '../publish/markers.js';
import { publishable, type Audience } from '../publish/publishable.js';

type Where = { readonly owner: string; readonly repo: string };

interface Marked {
  readonly id: number;
  readonly head: string;
  readonly round: number;
  readonly run: string;
}

/**
 * The Action's ledger of CI rounds: a workflow run keeps nothing after it ends, so what was decided
 * on a pull request is read back from the agent's own comments on it, each carrying a hidden marker.
 * Only comments by the agent's account count: anyone can write a marker into a comment, and a
 * forged one must not block or spend a round.
 *
 * A round is claimed by posting its comment, then reading the comments again: when two workflow
 * runs raced for the same head (the example workflow's `concurrency` group already serializes them),
 * the earlier comment wins and the later run deletes its own and does nothing. A re-run of the same
 * workflow run (a new attempt) finds its comment and goes on with the same round.
 */
export function commentCiLedger(
  gh: RestClient,
  where: Where,
  pr: number,
  bot: { readonly id: number },
  run: { readonly id: string; readonly url: string },
  audience: Audience,
): CiLedger {
  const ours = async (): Promise<{ rounds: Marked[]; said: Set<string> }> => {
    const comments = await gh.paginate(gh.rest.issues.listComments, {
      ...where,
      issue_number: pr,
      per_page: 100,
    });
    const rounds: Marked[] = [];
    const said = new Set<string>();
    for (const c of comments) {
      if (c.user?.id !== bot.id || c.body === undefined) continue;
      const round = findCiRoundMarker(c.body);
      if (round !== null)
        rounds.push({ id: c.id, head: round.headSha, round: round.round, run: round.runId });
      const kind = findCiSaidMarker(c.body);
      if (kind !== null) said.add(kind);
    }
    return { rounds, said };
  };
  const kindId = (kind: string): string => createHash('sha256').update(kind).digest('hex').slice(0, 16);
  return {
    async claimHead(sha) {
      const { rounds } = await ours();
      return !rounds.some((r) => r.head === sha && r.run !== run.id);
    },
    async unsaid(kind) {
      const id = kindId(kind);
      const { said } = await ours();
      return { say: !said.has(id), marker: ciSaidMarker(id) };
    },
    async round(sha, max, failing) {
      const before = await ours();
      const mine = before.rounds.find((r) => r.head === sha && r.run === run.id);
      if (mine !== undefined) return { kind: 'round', round: mine.round };
      // Another run claimed this head since claimHead read the comments: its round, not "used up".
      if (before.rounds.some((r) => r.head === sha)) return { kind: 'taken' };
      const used = before.rounds.reduce((n, r) => Math.max(n, r.round), 0);
      if (used >= max) return { kind: 'used' };
      const round = used + 1;
      const { data: posted } = await gh.rest.issues.createComment({
        ...where,
        issue_number: pr,
        body: publishable(
          [
            ciRoundMarker(sha, round, run.id),
            `CI failed on ${codeSpan(sha.slice(0, 7))} (${failing.map((n) => codeSpan(n)).join(', ')}): ` +
              `automatic fix round ${round} of ${max}, in ${run.url}.`,
          ].join('\n'),
          audience,
        ),
      });
      const after = await ours();
      const first = after.rounds.filter((r) => r.head === sha).sort((a, b) => a.id - b.id)[0];
      if (first !== undefined && first.id !== posted.id) {
        await gh.rest.issues.deleteComment({ ...where, comment_id: posted.id });
        return { kind: 'taken' };
      }
      return { kind: 'round', round };
    },
  };
}
