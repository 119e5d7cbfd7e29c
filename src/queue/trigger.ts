import { z } from 'zod';

/**
 * GitHub's limit for an issue body, in characters. A captured body is cut there: it travels in the
 * trigger and the job payload, which live in Redis (at most 4 bytes a character, so 256 KiB).
 */
export const ISSUE_BODY_MAX_CHARS = 65_536;

/** An issue body as it is stored in a trigger or a job: cut at GitHub's limit, never split in a pair. */
export function capIssueBody(body: string | null | undefined): string {
  const text = body ?? '';
  if (text.length <= ISSUE_BODY_MAX_CHARS) return text;
  const cut = /[\uD800-\uDBFF]/.test(text.charAt(ISSUE_BODY_MAX_CHARS - 1))
    ? ISSUE_BODY_MAX_CHARS - 1
    : ISSUE_BODY_MAX_CHARS;
  return text.slice(0, cut);
}

/**
 * What a webhook delivery asks of the App, reduced to the fields the App acts on. Parsed with zod
 * from the payload, so a delivery missing a field is ignored with a reason instead of crashing a
 * handler; holds no secret, so it can sit in Redis.
 */
export const triggerSchema = z.object({
  v: z.literal(1),
  /**
   * label / unlabel: the issue's label was added / removed. mention: a conversation comment (issue
   * or PR) that may name the handle. review_comment: a comment on a line of a PR's diff. review: a
   * submitted PR review whose body may name the handle. manual: a request made through the run
   * server's API (never parsed from a webhook). ci_failure: a check run on a pull request's head
   * completed as failed (`check_run`), or a workflow run did (`workflow_run`, what the Action
   * reacts to); only the agent's own pull requests act on it.
   */
  kind: z.enum(['label', 'unlabel', 'mention', 'review_comment', 'review', 'manual', 'ci_failure']),
  deliveryId: z.string().min(1),
  /** 0 for an event without an installation (a workflow's event under the Action). */
  installationId: z.number().int().nonnegative(),
  repo: z.object({
    id: z.number().int().positive(),
    owner: z.string().min(1),
    name: z.string().min(1),
    private: z.boolean(),
  }),
  issue: z.object({
    number: z.number().int().positive(),
    /** The title and body as the delivery gave them: what the person who asked saw. */
    title: z.string(),
    state: z.string(),
    isPullRequest: z.boolean(),
    /**
     * An issue's body (capIssueBody). Absent for a pull request (the App's PRs are its own text),
     * for manual requests, and in triggers queued by versions that did not capture it.
     */
    body: z.string().max(ISSUE_BODY_MAX_CHARS).optional(),
    /** The issue's author (its user id), when the delivery named one: their answer to a question counts. */
    authorId: z.number().int().positive().optional(),
  }),
  sender: z.object({ login: z.string().min(1), id: z.number().int().positive(), type: z.string() }),
  label: z.string().optional(),
  /**
   * The text that may hold the mention: a comment's or a review's body, and when GitHub says it was
   * created (a review: submitted); absent in triggers queued by versions that did not keep it.
   */
  comment: z
    .object({ id: z.number().int().positive(), body: z.string(), createdAt: z.string().optional() })
    .optional(),
  reviewComment: z
    .object({
      path: z.string(),
      line: z.number().int().nullable(),
      diffHunk: z.string(),
      inReplyToId: z.number().int().nullable(),
    })
    .optional(),
  /**
   * A manual request's instructions; `admin` when the run server's admin asked (sender is then the
   * App's bot, and no role is checked: only the run server writes manual triggers).
   */
  manual: z.object({ instructions: z.string(), admin: z.boolean() }).optional(),
  /** The failed check run of a `ci_failure`. */
  checkRun: z
    .object({
      id: z.number().int().positive(),
      name: z.string(),
      headSha: z.string(),
      conclusion: z.string(),
      /** The app that ran it (`github-actions` for a workflow job, whose logs the Actions API has). */
      appSlug: z.string().nullable(),
    })
    .optional(),
  /** The failed workflow run of a `ci_failure` under the Action (`workflow_run`). */
  workflowRun: z
    .object({
      id: z.number().int().positive(),
      name: z.string(),
      headSha: z.string(),
      conclusion: z.string(),
      runAttempt: z.number().int().positive(),
    })
    .optional(),
  receivedAt: z.string(),
  /** W3C trace context (`traceparent`, `tracestate`) of the span that queued it (OpenTelemetry). */
  trace: z.record(z.string(), z.string().max(512)).optional(),
});
export type Trigger = z.infer<typeof triggerSchema>;
