import type { EventOf, OutcomeKind } from '../events/schema.js';
import { codeSpan } from './markdown.js';

export type BudgetLimit = NonNullable<EventOf<'outcome'>['limit']>;

/** The part of an outcome event that decides its wording. */
export interface OutcomeLike {
  readonly outcome: OutcomeKind;
  readonly limit?: BudgetLimit | undefined;
  readonly cause?: string | undefined;
}

const LIMIT_WORDS: { readonly [K in BudgetLimit]: string } = {
  steps: 'step limit (the most model turns a run may take)',
  tokens: 'token limit (the most tokens a run may use)',
  usd: 'cost limit (the most US dollars a run may spend)',
  wall_time: 'time limit (the longest a run may take)',
  monthly_usd:
    'monthly spending limit (the most US dollars all runs of a repository or its owner may spend in a calendar month, UTC)',
};

/** Failure causes the agent core produces (`model_<ModelErrorCause>`, `sandbox_<SandboxErrorCode>`, `workspace`, `ResumeCause`). */
const CAUSE_WORDS: Readonly<Record<string, string>> = {
  model_auth: 'the model API rejected its credentials',
  model_permission: 'the model API denied access',
  model_bad_request: 'the model API rejected a request',
  model_not_found: 'the configured model does not exist',
  model_context_too_long: "the conversation no longer fit in the model's context window",
  model_rate_limited: 'the model API kept rate-limiting it',
  model_overloaded: 'the model API stayed overloaded',
  model_server: 'the model API kept failing',
  model_connection: 'it could not reach the model API',
  model_timeout: 'the model API did not answer in time',
  model_cancelled: 'a model call was cancelled',
  sandbox_start_failed: 'the sandbox could not be started',
  sandbox_shell_died: 'the shell inside the sandbox died',
  sandbox_container_died: 'the sandbox container died',
  sandbox_oom_killed: 'the sandbox ran out of memory',
  sandbox_pids_exhausted: 'the sandbox ran out of processes',
  sandbox_closed: 'the sandbox was closed under it',
  sandbox_engine_unavailable: 'the container engine was unavailable',
  workspace: 'the repository checkout could not be read or restored',
  resume_unrecorded_change: 'its event log records a change to the files that no checkpoint holds',
  resume_unrestorable: 'the workspace could not be rebuilt from its last checkpoint',
};

/**
 * The cause of a `failed` job that ended on purpose (worker/permanent-job-error.ts: refused by
 * policy, the pull request no longer the one asked about…), not by an error of the service.
 */
export const REFUSED = 'refused';

/** The cause of an `unverified` outcome whose tests could not run at all (see testing/verdict.ts). */
export const ENVIRONMENT = 'environment';

/** What a maintainer can do when the tests could not run (Markdown). */
export const ENVIRONMENT_HINT =
  'To let the tests run, list the commands that install what they need under `setup`, or set `testCommand`, in `.github/issue-agent.yml`.';

/**
 * One sentence per outcome, for a maintainer who has not read the design. A mapped type over the
 * schema's enum: a new outcome in the schema fails the type check here until it has words.
 */
const OUTCOME_WORDS: { readonly [K in OutcomeKind]: (o: OutcomeLike) => string } = {
  resolved: () =>
    "Resolved: the repository's tests pass with this change, and they show that it fixes the issue.",
  unverified: (o) =>
    o.cause === ENVIRONMENT
      ? "Not verified: the test environment is broken. The repository's tests could not run (a command, script or dependency is missing), so nothing shows whether the change fixes the issue. Review it with care."
      : 'Not verified: the agent changed the code, but the tests do not prove that the change fixes the issue. Review it with care.',
  no_change: () => 'No change: the agent finished without changing any file.',
  stuck: () => 'Stuck: the agent stopped because it kept repeating the same actions without making progress.',
  budget_exhausted: (o) =>
    `Out of budget: the agent reached its ${o.limit === undefined ? 'budget' : LIMIT_WORDS[o.limit]} before it finished.`,
  cancelled: () => 'Cancelled: the run was stopped before it finished.',
  needs_info: () =>
    'Waiting for an answer: the agent found the issue unclear and asked before changing anything. A reply from the issue’s author or a maintainer continues the same conversation.',
  failed: (o) => {
    if (o.cause === undefined) return 'Failed: the run could not complete because of an unexpected error.';
    if (o.cause === REFUSED)
      return 'Not done: this request cannot be carried out as things stand (why is below); asking again will not change that until the reason does.';
    const words = CAUSE_WORDS[o.cause] ?? 'of an error';
    return `Failed: the run could not complete because ${words} (${codeSpan(o.cause)}). This is a problem of the service, not of the issue.`;
  },
};

/** A sentence saying what the outcome means (Markdown: a failure cause is shown as inline code). */
export function describeOutcome(o: OutcomeLike): string {
  return OUTCOME_WORDS[o.outcome](o);
}

const OUTCOME_ICON: { readonly [K in OutcomeKind]: string } = {
  resolved: '✅',
  unverified: '⚠️',
  no_change: '➖',
  stuck: '🔁',
  budget_exhausted: '⏱️',
  cancelled: '⏹️',
  failed: '❌',
  needs_info: '❓',
};

export function outcomeIcon(outcome: OutcomeKind): string {
  return OUTCOME_ICON[outcome];
}
