import { z } from 'zod';
import { MIN_THINKING_BUDGET } from '../model/capabilities.js';

/**
 * The action's inputs (action.yml) and the runner's own variables, read once from the environment.
 * The runner passes input `foo-bar` as `INPUT_FOO-BAR` (upper-cased, hyphens kept); an input left
 * out of the workflow arrives as its action.yml default or as an empty string.
 */
export interface ActionInputs {
  readonly anthropicApiKey: string;
  readonly anthropicBaseUrl: string | null;
  readonly githubToken: string;
  /** The App whose installation token `github-token` is, or null for the workflow's GITHUB_TOKEN. */
  readonly appSlug: string | null;
  readonly label: string;
  readonly handle: string;
  readonly model: string | null;
  readonly budgets: {
    readonly maxSteps?: number;
    readonly maxUsd?: number;
    readonly maxMinutes?: number;
  };
  /** local: a shell in namespaces on the runner; docker: a container; unconfined: a plain child process. */
  readonly sandbox: 'local' | 'docker' | 'unconfined';
  readonly baseBranch: string | null;
  readonly draft: 'unless-resolved' | 'always' | null;
  readonly testCommand: string | null;
  readonly workDir: string | null;
  readonly logLevel: string;
  /**
   * `setup` (on/off): whether the repository's setup commands run before the agent (see
   * docs/github-action.md). Null when not given: ISSUE_AGENT_SETUP decides, default on.
   */
  readonly setup: 'on' | 'off' | null;
  /**
   * `tools` (native/schema) and `thinking-budget` (tokens, 0: off): ISSUE_AGENT_TOOLS and
   * ISSUE_AGENT_THINKING_BUDGET for the run (docs/model-requests.md). Null when not given: the
   * model's default (native tools and thinking for the Claude models that have them).
   */
  readonly tools: 'native' | 'schema' | null;
  readonly thinkingBudget: number | null;
}

export interface RunnerContext {
  readonly eventName: string;
  readonly eventPath: string;
  /** owner/name of the repository the workflow runs in. */
  readonly repository: string;
  readonly apiUrl: string;
  readonly serverUrl: string;
  readonly runId: string;
  readonly runAttempt: string;
  readonly runnerTemp: string;
  readonly outputFile: string | null;
  readonly summaryFile: string | null;
}

/** A problem with the workflow's configuration: the message says which input and what is wrong. */
export class ActionInputError extends Error {
  override readonly name = 'ActionInputError';
  constructor(readonly problems: readonly string[]) {
    super(`the action's inputs are invalid: ${problems.join('; ')}`);
  }
}

function input(env: NodeJS.ProcessEnv, name: string): string | null {
  const raw = env[`INPUT_${name.replace(/ /g, '_').toUpperCase()}`];
  return raw === undefined || raw.trim() === '' ? null : raw.trim();
}

const positive = (max: number) => z.coerce.number().positive().max(max);

export function readInputs(env: NodeJS.ProcessEnv): ActionInputs {
  const problems: string[] = [];
  const pick = <T>(name: string, schema: z.ZodType<T>, raw: string | null): T | undefined => {
    if (raw === null) return undefined;
    const r = schema.safeParse(raw);
    if (!r.success) problems.push(`${name}: ${r.error.issues[0]?.message ?? 'invalid'} (got "${raw}")`);
    return r.success ? r.data : undefined;
  };
  // A key in the environment (a repository secret exported by the workflow) works as well as the input.
  const apiKey = input(env, 'anthropic-api-key') ?? nonEmpty(env.ANTHROPIC_API_KEY);
  if (apiKey === null) problems.push('anthropic-api-key: required (pass `${{ secrets.ANTHROPIC_API_KEY }}`)');
  const token = input(env, 'github-token') ?? nonEmpty(env.GITHUB_TOKEN);
  if (token === null) problems.push('github-token: required (the default is `${{ github.token }}`)');
  const handle = pick(
    'handle',
    z.string().regex(/^@[A-Za-z0-9][A-Za-z0-9-]*(\[bot\])?$/, 'a handle looks like @agent'),
    input(env, 'handle'),
  );
  const maxSteps = pick('max-steps', positive(500).int(), input(env, 'max-steps'));
  const maxUsd = pick('max-usd', positive(100), input(env, 'max-usd'));
  const maxMinutes = pick('max-minutes', positive(360), input(env, 'max-minutes'));
  const sandbox =
    pick('sandbox', z.enum(['local', 'docker', 'unconfined']), input(env, 'sandbox')) ?? 'local';
  const draft = pick('draft', z.enum(['unless-resolved', 'always']), input(env, 'draft')) ?? null;
  const appSlug = pick(
    'app-slug',
    z.string().regex(/^[a-z0-9][a-z0-9-]*$/, 'an App slug is lower-case letters, digits and -'),
    input(env, 'app-slug'),
  );
  const baseBranch = pick(
    'base-branch',
    z.string().regex(/^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]+$/, 'not a branch name'),
    input(env, 'base-branch'),
  );
  const setup = pick(
    'setup',
    z.preprocess((v) => (typeof v === 'string' ? v.toLowerCase() : v), z.enum(['on', 'off'])),
    input(env, 'setup'),
  );
  const tools = pick(
    'tools',
    z.preprocess(
      (v) => (typeof v === 'string' ? v.toLowerCase() : v),
      z.enum(['native', 'schema'], { error: 'must be native or schema' }),
    ),
    input(env, 'tools'),
  );
  const thinkingBudget = pick(
    'thinking-budget',
    z
      .string()
      .regex(/^[0-9]{1,7}$/, 'must be a whole number of tokens (0: off)')
      .transform(Number)
      .refine(
        (n) => n === 0 || n >= MIN_THINKING_BUDGET,
        `must be 0 (off) or at least ${MIN_THINKING_BUDGET}`,
      ),
    input(env, 'thinking-budget'),
  );
  if (problems.length > 0 || apiKey === null || token === null) throw new ActionInputError(problems);
  return {
    anthropicApiKey: apiKey,
    anthropicBaseUrl: input(env, 'anthropic-base-url') ?? nonEmpty(env.ANTHROPIC_BASE_URL),
    githubToken: token,
    appSlug: appSlug ?? null,
    label: input(env, 'label') ?? 'issue-agent',
    handle: handle ?? '@issue-agent',
    model: input(env, 'model'),
    budgets: {
      ...(maxSteps === undefined ? {} : { maxSteps }),
      ...(maxUsd === undefined ? {} : { maxUsd }),
      ...(maxMinutes === undefined ? {} : { maxMinutes }),
    },
    sandbox,
    baseBranch: baseBranch ?? null,
    draft,
    testCommand: input(env, 'test-command'),
    workDir: input(env, 'work-dir'),
    logLevel: input(env, 'log-level') ?? 'info',
    setup: setup ?? null,
    tools: tools ?? null,
    thinkingBudget: thinkingBudget ?? null,
  };
}

export function readRunner(env: NodeJS.ProcessEnv): RunnerContext {
  const need = (name: string): string => {
    const v = nonEmpty(env[name]);
    if (v === null)
      throw new ActionInputError([`${name} is not set: the action runs only inside a GitHub Actions job`]);
    return v;
  };
  return {
    eventName: need('GITHUB_EVENT_NAME'),
    eventPath: need('GITHUB_EVENT_PATH'),
    repository: need('GITHUB_REPOSITORY'),
    apiUrl: nonEmpty(env.GITHUB_API_URL) ?? 'https://api.github.com',
    serverUrl: nonEmpty(env.GITHUB_SERVER_URL) ?? 'https://github.com',
    runId: nonEmpty(env.GITHUB_RUN_ID) ?? '0',
    runAttempt: nonEmpty(env.GITHUB_RUN_ATTEMPT) ?? '1',
    runnerTemp: nonEmpty(env.RUNNER_TEMP) ?? nonEmpty(env.TMPDIR) ?? '/tmp',
    outputFile: nonEmpty(env.GITHUB_OUTPUT),
    summaryFile: nonEmpty(env.GITHUB_STEP_SUMMARY),
  };
}

function nonEmpty(v: string | undefined): string | null {
  return v === undefined || v.trim() === '' ? null : v;
}
