import { z } from 'zod';
import { stripHiddenText } from '../agent/untrusted-text.js';
import { capIssueBody, type Trigger } from '../queue/trigger.js';

const user = z.object({ login: z.string().min(1), id: z.number().int().positive(), type: z.string() });
const repository = z.object({
  id: z.number().int().positive(),
  name: z.string().min(1),
  private: z.boolean(),
  owner: z.object({ login: z.string().min(1) }),
});
const issue = z.object({
  number: z.number().int().positive(),
  title: z.string(),
  body: z.string().nullable().optional(),
  state: z.string(),
  pull_request: z.unknown().optional(),
  user: z.object({ id: z.number().int().positive() }).nullable().optional(),
});
const pullRequest = z.object({ number: z.number().int().positive(), title: z.string(), state: z.string() });
const installation = z.object({ id: z.number().int().positive() }).optional();
const checkRunPayload = z.object({
  action: z.literal('completed'),
  check_run: z.object({
    id: z.number().int().positive(),
    name: z.string(),
    head_sha: z.string(),
    conclusion: z.string().nullable(),
    app: z.object({ id: z.number(), slug: z.string().optional() }).nullable().optional(),
    pull_requests: z.array(z.object({ number: z.number().int().positive() })),
    check_suite: z.object({ head_branch: z.string().nullable() }).optional(),
  }),
  repository,
  sender: user,
  installation,
});

const workflowRunPayload = z.object({
  action: z.literal('completed'),
  workflow_run: z.object({
    id: z.number().int().positive(),
    name: z.string().nullable().optional(),
    head_sha: z.string(),
    head_branch: z.string().nullable(),
    conclusion: z.string().nullable(),
    run_attempt: z.number().int().positive().optional(),
    pull_requests: z.array(z.object({ number: z.number().int().positive() })),
    head_repository: z.object({ id: z.number().int().positive() }).nullable().optional(),
  }),
  repository,
  sender: user,
  installation,
});

/** Conclusions that ask for a fix; `cancelled`, `skipped` and `neutral` do not. */
const FAILED_CONCLUSIONS = new Set(['failure', 'timed_out']);
const viaApp = z.object({ id: z.number() }).nullable().optional();

const labeledPayload = z.object({
  action: z.enum(['labeled', 'unlabeled']),
  issue,
  label: z.object({ name: z.string() }),
  repository,
  sender: user,
  installation,
});
const commentPayload = z.object({
  action: z.literal('created'),
  issue,
  comment: z.object({
    id: z.number().int().positive(),
    body: z.string().nullable(),
    created_at: z.string().optional(),
    performed_via_github_app: viaApp,
  }),
  repository,
  sender: user,
  installation,
});
const reviewCommentPayload = z.object({
  action: z.literal('created'),
  pull_request: pullRequest,
  comment: z.object({
    id: z.number().int().positive(),
    body: z.string(),
    path: z.string(),
    line: z.number().int().nullable().optional(),
    original_line: z.number().int().nullable().optional(),
    diff_hunk: z.string(),
    in_reply_to_id: z.number().int().optional(),
    created_at: z.string().optional(),
    performed_via_github_app: viaApp,
  }),
  repository,
  sender: user,
  installation,
});
const reviewPayload = z.object({
  action: z.literal('submitted'),
  pull_request: pullRequest,
  review: z.object({
    id: z.number().int().positive(),
    body: z.string().nullable(),
    state: z.string(),
    submitted_at: z.string().nullable().optional(),
  }),
  repository,
  sender: user,
  installation,
});

export type TriggerParse = { ok: true; trigger: Trigger } | { ok: false; reason: string };

/**
 * The cheap, synchronous first look at a delivery, done before the webhook is acknowledged: no
 * network, so acknowledgement stays fast. Who may trigger and the repo's own label and handle are
 * checked later, off the request path, by the intake processor. Comments that mention nobody are
 * dropped here: only mentions act, discussion never does.
 */
export function parseTrigger(
  event: string,
  deliveryId: string,
  payload: unknown,
  appId: number,
  now: Date = new Date(),
  options: {
    readonly requireInstallation?: boolean;
    /**
     * Keep an issue's comments that mention nobody (they may answer the agent's question; the App
     * checks that one waits before queueing them). PR comments that mention nobody are dropped.
     */
    readonly plainComments?: boolean;
  } = {},
): TriggerParse {
  const parsed = parseAny(event, deliveryId, payload, appId, now, options.plainComments ?? false);
  // A webhook always names the installation it is for; only a workflow's event file may lack it.
  if (parsed.ok && parsed.trigger.installationId === 0 && (options.requireInstallation ?? true))
    return { ok: false, reason: `${event} payload is missing or has a wrong field: installation` };
  return parsed;
}

function parseAny(
  event: string,
  deliveryId: string,
  payload: unknown,
  appId: number,
  now: Date,
  plainComments: boolean,
): TriggerParse {
  const common: Common = (p) => ({
    v: 1 as const,
    deliveryId,
    installationId: p.installation?.id ?? 0,
    repo: repoOf(p.repository),
    sender: p.sender,
    receivedAt: now.toISOString(),
  });
  if (event === 'issues') {
    const p = labeledPayload.safeParse(payload);
    if (!p.success) return { ok: false, reason: describe('issues', payload, p.error) };
    return {
      ok: true,
      trigger: {
        ...common(p.data),
        kind: p.data.action === 'labeled' ? 'label' : 'unlabel',
        issue: issueOf(p.data.issue),
        label: p.data.label.name,
      },
    };
  }
  if (event === 'issue_comment') {
    const p = commentPayload.safeParse(payload);
    if (!p.success) return { ok: false, reason: describe('issue_comment', payload, p.error) };
    if (p.data.comment.performed_via_github_app?.id === appId)
      return { ok: false, reason: 'a comment made by this App' };
    const body = p.data.comment.body ?? '';
    const onIssue = p.data.issue.pull_request == null;
    if (!body.includes('@') && !(plainComments && onIssue))
      return { ok: false, reason: 'a comment that mentions nobody' };
    return {
      ok: true,
      trigger: {
        ...common(p.data),
        kind: 'mention',
        issue: issueOf(p.data.issue),
        comment: { id: p.data.comment.id, body, ...createdAt(p.data.comment.created_at) },
      },
    };
  }
  if (event === 'pull_request_review_comment') {
    const p = reviewCommentPayload.safeParse(payload);
    if (!p.success) return { ok: false, reason: describe(event, payload, p.error) };
    const c = p.data.comment;
    if (c.performed_via_github_app?.id === appId)
      return { ok: false, reason: 'a review comment made by this App' };
    if (!c.body.includes('@')) return { ok: false, reason: 'a review comment that mentions nobody' };
    return {
      ok: true,
      trigger: {
        ...common(p.data),
        kind: 'review_comment',
        issue: pullOf(p.data.pull_request),
        comment: { id: c.id, body: c.body, ...createdAt(c.created_at) },
        reviewComment: {
          path: c.path,
          line: c.line ?? c.original_line ?? null,
          diffHunk: c.diff_hunk,
          inReplyToId: c.in_reply_to_id ?? null,
        },
      },
    };
  }
  if (event === 'pull_request_review') {
    const p = reviewPayload.safeParse(payload);
    if (!p.success) return { ok: false, reason: describe(event, payload, p.error) };
    const body = p.data.review.body ?? '';
    if (!body.includes('@')) return { ok: false, reason: 'a review whose body mentions nobody' };
    return {
      ok: true,
      trigger: {
        ...common(p.data),
        kind: 'review',
        issue: pullOf(p.data.pull_request),
        comment: { id: p.data.review.id, body, ...createdAt(p.data.review.submitted_at) },
      },
    };
  }
  if (event === 'check_run') return parseCheckRun(payload, appId, common);
  if (event === 'workflow_run') return parseWorkflowRun(payload, common);
  return { ok: false, reason: `event ${event} is not handled` };
}

/** A payload's repository, sender and installation: what every trigger carries. */
type Sourced = {
  repository: z.infer<typeof repository>;
  sender: z.infer<typeof user>;
  installation?: { id: number } | undefined;
};
type Common = (
  p: Sourced,
) => Pick<Trigger, 'v' | 'deliveryId' | 'installationId' | 'repo' | 'sender' | 'receivedAt'>;

/** A failed check run on one of the App's pull requests (not one of its own checks). */
function parseCheckRun(payload: unknown, appId: number, common: Common): TriggerParse {
  const p = checkRunPayload.safeParse(payload);
  if (!p.success) return { ok: false, reason: describe('check_run', payload, p.error) };
  const run = p.data.check_run;
  if (run.app?.id === appId) return { ok: false, reason: 'a check run of this App' };
  if (run.conclusion === null || !FAILED_CONCLUSIONS.has(run.conclusion))
    return { ok: false, reason: `a check run that did not fail (${run.conclusion ?? 'no conclusion'})` };
  // One pull request per delivery: GitHub lists every open PR whose head is this commit; the
  // App's own branches are never another PR's head in practice, and intake checks ownership.
  const pr = run.pull_requests[0];
  if (pr === undefined) return { ok: false, reason: 'a failed check run on no pull request' };
  // Only the App's own branches get rounds: anything else is dropped before it costs a request.
  const branch = run.check_suite?.head_branch ?? null;
  if (branch !== null && !branch.startsWith('issue-agent/issue-'))
    return { ok: false, reason: 'a failed check run on a branch that is not the App’s' };
  return {
    ok: true,
    trigger: {
      ...common(p.data),
      kind: 'ci_failure',
      issue: { number: pr.number, title: `#${pr.number}`, state: 'open', isPullRequest: true },
      checkRun: {
        id: run.id,
        name: run.name,
        headSha: run.head_sha,
        conclusion: run.conclusion,
        appSlug: run.app?.slug ?? null,
      },
    },
  };
}

/** A failed workflow run on one of the agent's branches of this repository (the Action's). */
function parseWorkflowRun(payload: unknown, common: Common): TriggerParse {
  const p = workflowRunPayload.safeParse(payload);
  if (!p.success) return { ok: false, reason: describe('workflow_run', payload, p.error) };
  const run = p.data.workflow_run;
  if (run.conclusion === null || !FAILED_CONCLUSIONS.has(run.conclusion))
    return { ok: false, reason: `a workflow run that did not fail (${run.conclusion ?? 'no conclusion'})` };
  // GitHub lists only pull requests of this repository (none for a fork's), and only the agent's
  // own branches get rounds: anything else is dropped before it costs a request.
  if (run.head_repository != null && run.head_repository.id !== p.data.repository.id)
    return { ok: false, reason: 'a failed workflow run of another repository’s branch' };
  const pr = run.pull_requests[0];
  if (pr === undefined) return { ok: false, reason: 'a failed workflow run on no pull request' };
  if (run.head_branch === null || !run.head_branch.startsWith('issue-agent/issue-'))
    return { ok: false, reason: 'a failed workflow run on a branch that is not the agent’s' };
  return {
    ok: true,
    trigger: {
      ...common(p.data),
      kind: 'ci_failure',
      issue: { number: pr.number, title: `#${pr.number}`, state: 'open', isPullRequest: true },
      workflowRun: {
        id: run.id,
        name: run.name ?? 'workflow',
        headSha: run.head_sha,
        conclusion: run.conclusion,
        runAttempt: run.run_attempt ?? 1,
      },
    },
  };
}

function createdAt(at: string | null | undefined): { createdAt?: string } {
  return at === null || at === undefined ? {} : { createdAt: at };
}

function pullOf(p: z.infer<typeof pullRequest>): Trigger['issue'] {
  return { number: p.number, title: p.title, state: p.state, isPullRequest: true };
}

function repoOf(r: z.infer<typeof repository>): Trigger['repo'] {
  return { id: r.id, owner: r.owner.login, name: r.name, private: r.private };
}

function issueOf(i: z.infer<typeof issue>): Trigger['issue'] {
  const isPullRequest = i.pull_request != null;
  return {
    number: i.number,
    title: i.title,
    state: i.state,
    isPullRequest,
    ...(isPullRequest ? {} : { body: capIssueBody(i.body) }),
    ...(i.user == null ? {} : { authorId: i.user.id }),
  };
}

function describe(event: string, payload: unknown, error: z.ZodError): string {
  const action =
    typeof payload === 'object' && payload !== null && 'action' in payload
      ? String(payload.action)
      : '(none)';
  const first = error.issues[0];
  if (first?.path[0] === 'action') return `${event}.${action} is not handled`;
  return `${event}.${action} payload is missing or has a wrong field: ${first === undefined ? '?' : first.path.join('.')}`;
}

/**
 * Finds `handle` used as a mention and returns the request that follows it. A mention counts only as
 * a whole word outside quoted replies (`> …`), fenced code blocks and inline code, so quoting or
 * discussing the bot does not start it. Hidden text is removed first: an HTML comment cannot hold a
 * mention no reader sees.
 */
export function extractMention(body: string, handle: string): { instruction: string } | null {
  const visible = stripHiddenText(body);
  const lines = visible.split(/\r?\n/);
  let inFence = false;
  const escaped = handle.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const re = new RegExp(`(^|[^\\w@/.-])${escaped}(?![\\w-])`, 'i');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (/^\s{0,3}(```|~~~)/.test(line)) {
      inFence = !inFence;
      continue;
    }
    if (inFence || /^\s{0,3}>/.test(line)) continue;
    const withoutCode = line.replace(/`[^`]*`/g, (m) => ' '.repeat(m.length));
    const m = re.exec(withoutCode);
    if (m === null) continue;
    const start = m.index + (m[1]?.length ?? 0) + handle.length;
    const rest = [line.slice(start), ...lines.slice(i + 1)].join('\n');
    return { instruction: rest.replace(/^[\s,:;-]+/, '').trim() };
  }
  return null;
}
