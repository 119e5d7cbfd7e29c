import { z } from 'zod';
import { repoConfigSchema } from '../config/repo-config.js';
import { ISSUE_BODY_MAX_CHARS, triggerSchema } from './trigger.js';

/**
 * A fix job: everything a worker needs to resolve one issue, and nothing secret (tokens are minted
 * by the worker from the App's key; the model key lives in the worker's environment). Validated when
 * enqueued and again when a worker takes it, so a payload from an older or newer App version fails
 * with a clear reason instead of half-running.
 */
export const reviewContextSchema = z.object({
  path: z.string(),
  line: z.number().int().nullable(),
  diffHunk: z.string(),
  body: z.string(),
  author: z.string(),
});
export type ReviewContext = z.infer<typeof reviewContextSchema>;

export const EVALUATE_MAX_TASKS = 50;

export const evaluateRequestSchema = z.object({
  /** `oracle`: each task's gold patch as the model (checks the harness on this repository, free). */
  model: z.enum(['configured', 'oracle']),
  /** At most this many tasks, from the most recently closed issues. */
  limit: z.number().int().min(1).max(EVALUATE_MAX_TASKS),
  /** Only issues closed on or after this day (YYYY-MM-DD), or null. */
  since: z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}$/)
    .nullable(),
});
export type EvaluateRequest = z.infer<typeof evaluateRequestSchema>;

export const fixJobSchema = z.object({
  v: z.literal(1),
  /**
   * fix-issue: a first change for an issue; follow-up: more commits on the App's open PR (or a
   * person's, see `pull.human`); evaluate: `@agent evaluate`, the eval of this repository's own
   * closed issues, reported in a comment; review: `@agent review`, one review of a PR, no push;
   * verify: `@agent verify`, the PR's verdict reproduced in fresh sandboxes (`pull`), put on the
   * check run of its head and said in the PR's conversation.
   */
  kind: z.enum(['fix-issue', 'follow-up', 'evaluate', 'review', 'verify']),
  /** The App installation whose token the worker mints; 0 under the Action, which brings its own token. */
  installationId: z.number().int().nonnegative(),
  repo: z.object({
    id: z.number().int().positive(),
    owner: z.string().min(1),
    name: z.string().min(1),
  }),
  /** The conversation the job reports in: the issue, or the PR for a follow-up. */
  issue: z.object({
    number: z.number().int().positive(),
    /** The title when the job was asked for (a PR's number for a follow-up asked on its issue). */
    title: z.string(),
    /**
     * A fix-issue job's task text: the issue's body when the job was asked for, which is what the
     * person who asked approved (the worker works from it, not from the issue as edited since).
     * Null or absent: not captured (a follow-up, a manual request, a job queued by an older
     * version); the worker then reads the issue when the job starts.
     */
    body: z.string().max(ISSUE_BODY_MAX_CHARS).nullable().optional(),
  }),
  /** The PR a follow-up pushes to (or a review is about). */
  pull: z
    .object({
      number: z.number().int().positive(),
      /**
       * A pull request a person opened (not the App), whose branch the follow-up pushes to: asked
       * for on it by someone who may push here. Absent: one of the App's own. `fork`: the branch is
       * in `headRepo`, a fork whose author allows edits by maintainers; the job clones it from
       * `cloneUrl` and pushes there with git (the App is not installed on it, so no API commit).
       */
      human: z
        .object({
          author: z.string().nullable(),
          headRepo: z.string(),
          headRef: z.string().min(1),
          fork: z
            .object({
              cloneUrl: z
                .string()
                .regex(/^https?:\/\/[^@\s/]+\/[^@\s]+$/, 'an http(s) URL without credentials'),
            })
            .optional(),
        })
        .optional(),
    })
    .nullable()
    .default(null),
  /** Cleaned maintainer instructions (text after the handle), oldest first. */
  instructions: z.array(z.string()),
  /** Review comments the request refers to, with their file and line. */
  reviewComments: z.array(reviewContextSchema).default([]),
  trigger: z.object({
    kind: z.enum(['label', 'unlabel', 'mention', 'review_comment', 'review', 'manual', 'ci_failure']),
    deliveryId: z.string(),
    sender: z.object({ login: z.string(), id: z.number().int() }),
    commentId: z.number().int().positive().nullable(),
    /**
     * For an outsider's request (or answer) started by `@agent approve`: who approved it, and what
     * exactly: the request's comment and the sha256 of its text as approved (the text the job's
     * instructions or answer carry), and when the approve comment was created. Absent `covers`
     * and `at`: queued by a version that did not record them.
     */
    approvedBy: z
      .object({
        login: z.string(),
        id: z.number().int(),
        covers: z
          .object({ commentId: z.number().int().positive(), digest: z.string().regex(/^[0-9a-f]{64}$/) })
          .optional(),
        at: z.string().optional(),
      })
      .nullable()
      .optional(),
    /** Where the final answer goes: the PR conversation, or the review thread that asked. */
    replyTo: z
      .object({ kind: z.enum(['conversation', 'review_thread']), commentId: z.number().int().positive() })
      .nullable()
      .default(null),
  }),
  /**
   * An answer to the agent's question (a run that ended `needs_info`): the job continues that run's
   * conversation (its trajectory, copied, with the answer as a new round). The text is the answer as
   * it was when the job was asked for.
   */
  continues: z
    .object({
      jobId: z.string().regex(/^[A-Za-z0-9-]+$/),
      answer: z.object({ by: z.string(), text: z.string().max(ISSUE_BODY_MAX_CHARS) }),
    })
    .nullable()
    .optional(),
  /**
   * A round that fixes the App's own PR's failing CI (a `check_run` failed on its head): which round
   * of how many, and the failing checks as they were when it was queued (logs are untrusted text).
   */
  ci: z
    .object({
      round: z.number().int().positive(),
      of: z.number().int().positive(),
      headSha: z.string(),
      checks: z.array(
        z.object({
          name: z.string(),
          conclusion: z.string(),
          summary: z.string(),
          annotations: z.array(z.string()),
          logTail: z.string(),
        }),
      ),
      /**
       * Checks that failed on the head too but also fail on the base branch's tip: pre-existing,
       * named to the model as not its to fix (absent in payloads queued before this existed).
       */
      preExisting: z.array(z.string()).optional(),
      /** The base branch those checks also fail on. */
      baseRef: z.string().optional(),
    })
    .nullable()
    .optional(),
  /** An evaluate job's request (null for the other kinds). */
  evaluate: evaluateRequestSchema.nullable().optional(),
  /** The repo's settings at trigger time, so a retry runs under the rules it was queued under. */
  config: z.object({
    ...repoConfigSchema.shape,
    label: z.string(),
    handle: z.string(),
  }),
  progressCommentId: z.number().int().positive().nullable(),
  /** W3C trace context (`traceparent`, `tracestate`) of the span that queued it (OpenTelemetry). */
  trace: z.record(z.string(), z.string().max(512)).optional(),
  requestedAt: z.string(),
});
export type FixJob = z.infer<typeof fixJobSchema>;

export const intakeJobSchema = triggerSchema;

/** A job waiting for the running one of the same issue or PR to end (kept in a Redis list). */
export const pendingJobSchema = z.object({ jobId: z.string(), job: fixJobSchema });
export type PendingJob = z.infer<typeof pendingJobSchema>;
