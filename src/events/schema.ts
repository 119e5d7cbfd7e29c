import { z } from 'zod';

/** Bumped when a persisted shape changes incompatibly; readers refuse versions they do not know. */
export const SCHEMA_VERSION = 1;

const usage = z.object({
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  cacheReadTokens: z.number().int().nonnegative(),
  cacheWriteTokens: z.number().int().nonnegative(),
});
export type Usage = z.infer<typeof usage>;

/** One edit the API applied to a turn's prompt (`context_management.applied_edits`). */
const contextEdit = z.object({
  type: z.string(),
  clearedInputTokens: z.number().int().nonnegative(),
  clearedToolUses: z.number().int().nonnegative().optional(),
  clearedThinkingTurns: z.number().int().nonnegative().optional(),
});
export type ContextEdit = z.infer<typeof contextEdit>;

const textBlock = z.object({ type: z.literal('text'), text: z.string() });
const toolUseBlock = z.object({
  type: z.literal('tool_use'),
  id: z.string(),
  name: z.string(),
  input: z.unknown(),
});
/**
 * The model's thinking (extended thinking, docs/model-requests.md): kept as the API returned it,
 * signature included, because a turn that continues with tool results, and a resumed run, must send
 * it back unchanged. Shown to signed-in readers of the run view; never in a PR or a comment.
 */
const thinkingBlock = z.object({ type: z.literal('thinking'), thinking: z.string(), signature: z.string() });
/** Thinking the API returned encrypted: opaque `data`, sent back as it came. */
const redactedThinkingBlock = z.object({ type: z.literal('redacted_thinking'), data: z.string() });
export const contentBlock = z.discriminatedUnion('type', [
  textBlock,
  toolUseBlock,
  thinkingBlock,
  redactedThinkingBlock,
]);
export type ContentBlock = z.infer<typeof contentBlock>;
export type ToolUseBlock = z.infer<typeof toolUseBlock>;
export type ThinkingBlock = z.infer<typeof thinkingBlock>;
export type RedactedThinkingBlock = z.infer<typeof redactedThinkingBlock>;

/**
 * What the run asks of the model, fixed when it starts (a resumed run sends the same): the tool set
 * (`native`: Anthropic's text editor and bash tools; `schema`: the harness's own JSON-schema tools)
 * and the thinking budget in tokens (0: off). See model/capabilities.ts.
 */
export const modelSetup = z.object({
  tools: z.enum(['native', 'schema']),
  thinkingBudget: z.number().int().nonnegative(),
});
export type ModelSetup = z.infer<typeof modelSetup>;

/** One test's result in a run (testing/test-run.ts): its id, status and where the fact came from. */
export const testFact = z.object({
  id: z.string(),
  file: z.string().nullable(),
  status: z.enum(['passed', 'failed', 'skipped', 'errored', 'crashed-file']),
  source: z.enum(['report', 'output', 'harness']),
  detail: z.string().optional(),
  /** The line of the test's definition in `file` (1-based), where the runner's report says it. */
  line: z.number().int().positive().optional(),
});

/**
 * A test run as the test-results engine read it (testing/run-tests.ts). The fields after
 * `passedNames` are optional: runs recorded before them stay readable, and their names (without
 * files) are compared only with runs of the same kind (`idScheme` absent).
 */
export const testSummary = z.object({
  runner: z.string(),
  passed: z.number().int().nullable(),
  /** Every failing test: failed, errored, and files that could not run. */
  failed: z.number().int().nullable(),
  skipped: z.number().int().nullable(),
  /** Failing ids, capped at 500. */
  failedNames: z.array(z.string()),
  /** Passing ids, capped at 500. */
  passedNames: z.array(z.string()),
  /** Of `failed`, the tests that errored and the files that could not run. */
  errored: z.number().int().nullable().optional(),
  /** Every test's result, in report order (capped at 5000). */
  tests: z.array(testFact).optional(),
  /** The list accounts for every test the run ran. */
  complete: z.boolean().optional(),
  /** What the results were read from: the runner's report, its console output. */
  sources: z.array(z.string()).optional(),
  /** Test files that hung: still running when they, or the run, were stopped. */
  hung: z.array(z.string()).optional(),
  /** Milliseconds per test file, where a report gave them (they bound the runs that follow). */
  fileMs: z.record(z.string(), z.number()).optional(),
  /** 2: ids are `file::name` (testing/test-run.ts); absent: names as the runner printed them. */
  idScheme: z.literal(2).optional(),
});
export type TestSummarySnapshot = z.infer<typeof testSummary>;

export const limits = z.object({
  maxSteps: z.number().int().positive(),
  maxTokens: z.number().int().positive(),
  maxUsd: z.number().positive(),
  maxWallMs: z.number().int().positive(),
  contextTokens: z.number().int().positive(),
  commandTimeoutMs: z.number().int().positive(),
  testTimeoutMs: z.number().int().positive(),
  testMemoryBytes: z.number().int().positive(),
  observationChars: z.number().int().positive(),
  maxOutputTokens: z.number().int().positive(),
  /**
   * How older turns leave the prompt once it would pass its budget (agent/prepare-request.ts):
   * `summary` (the model writes a structured summary; the default), `lines` (one line per action,
   * no model call) or `server` (the API clears old tool results itself, `context_management`; the
   * harness condenses with lines only as a last resort). Absent: `summary`.
   */
  condenser: z.enum(['summary', 'lines', 'server']).optional(),
});
export type Limits = z.infer<typeof limits>;

export const task = z.object({
  title: z.string(),
  body: z.string(),
  /** Extra instructions from the person who triggered the run (e.g. the text after `@agent`). */
  instructions: z.array(z.string()).default([]),
  /** Where the task came from, for people reading the trajectory (e.g. owner/repo#12, or "cli"). */
  source: z.string(),
  /**
   * The issue's and the request's images, in the order the text links them: each one's bytes are an
   * attached file of the run (`file`, as attachFile named it), so a resumed run sends the same ones
   * without fetching them again. They follow the task text in the first message as image blocks.
   */
  images: z
    .array(
      z.object({
        url: z.string(),
        mediaType: z.enum(['image/png', 'image/jpeg', 'image/gif', 'image/webp']),
        file: z.string(),
        bytes: z.number().int().nonnegative(),
      }),
    )
    .optional(),
  /** Images the text links that could not be had, each with why: named to the model and in the PR. */
  unavailableImages: z.array(z.object({ url: z.string(), reason: z.string() })).optional(),
});
export type Task = z.infer<typeof task>;

/** One instruction file of the repository, as read from its base branch (see agent/instructions.ts). */
export const repoInstruction = z.object({
  path: z.string(),
  kind: z.enum(['agents', 'claude', 'copilot', 'copilot-scoped']),
  /** The folder it applies to (`.` for the root) when `applyTo` is null. */
  scope: z.string(),
  /** Copilot's `applyTo` globs, or null. */
  applyTo: z.array(z.string()).nullable(),
  /** Size of the file (after front matter), and whether what is kept was cut or left out. */
  bytes: z.number().int().nonnegative(),
  included: z.boolean(),
  truncated: z.boolean(),
  text: z.string(),
});
export type RepoInstruction = z.infer<typeof repoInstruction>;

const egressRequest = z.object({
  time: z.string(),
  method: z.string(),
  host: z.string(),
  port: z.number().int(),
  allowed: z.boolean(),
  reason: z.string().optional(),
  status: z.number().int().optional(),
  bytesUp: z.number().int(),
  bytesDown: z.number().int(),
  durationMs: z.number(),
});

const egressPhase = z.object({
  /** The host patterns the proxy admitted in this phase (empty: nothing could leave). */
  allowHosts: z.array(z.string()),
  /** Every request, in the order they ended, up to a cap; `dropped` counts the rest. */
  requests: z.array(egressRequest),
  dropped: z.number().int().default(0),
  denied: z.array(
    z.object({
      host: z.string(),
      ports: z.array(z.number().int()),
      count: z.number().int(),
      reason: z.string(),
    }),
  ),
  totals: z.object({
    requests: z.number().int(),
    allowed: z.number().int(),
    denied: z.number().int(),
    bytesUp: z.number().int(),
    bytesDown: z.number().int(),
  }),
});
export type EgressPhaseRecord = z.infer<typeof egressPhase>;

/**
 * How the job's environment was made, before the run: the image and runtime versions (with where
 * each came from), what setup ran and why (or that a cached environment was reused), and what the
 * setup tried to reach. Output is scrubbed of the job's secrets before it is recorded.
 */
export const environmentRecord = z.object({
  image: z.string(),
  runtimes: z.array(
    z.object({
      language: z.string(),
      version: z.string(),
      requested: z.string().nullable(),
      source: z.string(),
      note: z.string().optional(),
    }),
  ),
  setup: z.object({
    /** `configured` (setup: in the repo config), `detected`, or `none`. */
    source: z.enum(['configured', 'detected', 'none']),
    /** Why these commands (or none). */
    reason: z.string(),
    commands: z.array(
      z.object({
        command: z.string(),
        reason: z.string(),
        exitCode: z.number().int().nullable(),
        timedOut: z.boolean(),
        durationMs: z.number(),
        attempts: z.number().int(),
        output: z.string(),
      }),
    ),
    /** Variables the tests run with because of setup (a virtualenv's PATH). */
    testEnv: z.record(z.string(), z.string()),
    /** Names of setup secrets provided (never their values). */
    secrets: z.array(z.string()),
    /**
     * Whether setup ran as the maintainers committed it (environment/setup-trust.ts): with the
     * setup secrets and install scripts, or without them and why. Absent in runs recorded before.
     */
    trust: z
      .object({
        trusted: z.boolean(),
        reason: z.string(),
        /** Setup secrets the repository names that this setup was not given. */
        withheld: z.array(z.string()),
        /** Install scripts were turned off (flags and variables). */
        scriptsOff: z.boolean(),
      })
      .optional(),
    /**
     * The project could not be installed for want of a build requirement its package index lacks,
     * and runs from its source instead (environment/python-from-source.ts); `reason` says so too.
     * Absent: installed as planned, and in runs recorded before.
     */
    fromSource: z
      .object({
        /** The build requirement pip could not fetch (`hatchling`). */
        missing: z.string(),
        /** Whether it is the build backend's own package. */
        isBackend: z.boolean(),
        /** The folder on the virtualenv's import path, relative to the workspace (`src`, `.`). */
        importRoot: z.string(),
        /** The packages imported from it to check that the project runs. */
        packages: z.array(z.string()),
      })
      .optional(),
    cache: z.object({
      status: z.enum(['hit', 'stored', 'miss', 'disabled', 'not-stored']),
      key: z.string().nullable(),
      note: z.string().optional(),
    }),
    durationMs: z.number(),
  }),
  egress: z.object({ setup: egressPhase.nullable(), agentAllowHosts: z.array(z.string()) }),
});
export type EnvironmentRecord = z.infer<typeof environmentRecord>;

export const baseState = z.object({
  schemaVersion: z.literal(SCHEMA_VERSION),
  conversationId: z.string(),
  createdAt: z.string(),
  task,
  workspace: z.object({
    /** Where the repository was on the host when the run started (resume uses it unless told otherwise). */
    path: z.string(),
    baseCommit: z.string(),
    baseTree: z.string(),
  }),
  model: z.string(),
  sandbox: z.string(),
  testCommand: z.string().nullable(),
  testCommandSource: z.string().nullable(),
  limits,
  /** Absent in runs made before environments existed, and where no environment step ran. */
  environment: environmentRecord.optional(),
  /**
   * The repository's instruction files, read from the base branch (`ref` at `commit`), never from the
   * workspace. Absent in runs made before instructions existed and where none were read (the CLI).
   */
  instructions: z.object({ ref: z.string(), commit: z.string(), files: z.array(repoInstruction) }).optional(),
  /**
   * Pre-flight triage is on: the agent may ask for clarification (ask_for_clarification) before it
   * changes any file, and the run then ends `needs_info`. Absent: off.
   */
  triage: z.boolean().optional(),
  /** Attempt `number` of `of` independent attempts of one job (best-of-N); absent for a single one. */
  attempt: z
    .object({ number: z.number().int().positive(), of: z.number().int().positive(), jobId: z.string() })
    .optional(),
  /** Tools and thinking (see ModelSetup). Absent in runs made before they existed: schema tools, no thinking. */
  modelSetup: modelSetup.optional(),
});
export type BaseState = z.infer<typeof baseState>;

/** What the agent asks when the issue is not actionable: what is missing, and at most three questions. */
export const clarification = z.object({
  missing: z.string().min(1).max(2000),
  questions: z.array(z.string().min(1).max(1000)).min(1).max(3),
});
export type Clarification = z.infer<typeof clarification>;

const common = {
  id: z.number().int().positive(),
  ts: z.string(),
};

/**
 * Set on the model turns, actions and observations of a sub-agent (the `delegate` tool): the
 * tool_use id of the delegate call they belong to. They count toward the job's tokens and cost, and
 * are not part of the main conversation.
 */
const parent = { parent: z.string().optional() };

/** How a run ended (the `outcome` event's `outcome`). */
export const outcomeKind = z.enum([
  'resolved',
  'unverified',
  'no_change',
  'stuck',
  'budget_exhausted',
  'cancelled',
  'failed',
  'needs_info',
]);

export const eventSchemas = {
  run_resumed: z.object({ ...common, kind: z.literal('run_resumed'), pid: z.number().int() }),
  test_run: z.object({
    ...common,
    kind: z.literal('test_run'),
    /**
     * `without_fix`: after a final run that would resolve the change, the code before it again, with
     * the change's test files (none when it changed none: then a second run of the base, so a test
     * that failed once by chance is not taken for fixed), in the same sandbox as the final run;
     * tests that pass there are not proof (testing/verdict.ts).
     */
    phase: z.enum(['baseline', 'agent', 'final', 'without_fix']),
    command: z.string(),
    exitCode: z.number().int().nullable(),
    killed: z.enum(['timeout', 'memory', 'cancelled']).nullable(),
    durationMs: z.number(),
    summary: testSummary,
    output: z.string(),
    outputBytes: z.number().int(),
    /**
     * A baseline not run again: the result of an earlier run on the same base tree, environment and
     * test command (see agent/baseline-cache.ts), and which run it came from.
     */
    reusedFrom: z.object({ conversationId: z.string(), ts: z.string() }).optional(),
    /**
     * `fresh`: a final run made in a sandbox no agent process ever ran in, on the base commit plus
     * the recorded change (what is published), with the run's environment. Absent: the run was in
     * the agent's own sandbox, where what the agent left outside the change (its home, running
     * processes, installed packages) can shape the result.
     */
    sandbox: z.literal('fresh').optional(),
    /**
     * The change's files that decide how tests run (testing/runner-config.ts), which this run took
     * from the base commit instead, with why (the first 50; `total` counts all): the change did
     * not decide how its own proof ran. Absent: the change touches none.
     */
    runnerConfig: z
      .object({
        files: z.array(z.object({ path: z.string(), why: z.string() })),
        total: z.number().int().nonnegative(),
      })
      .optional(),
    /**
     * A `without_fix` run: the change's files it ran at the change's version (the first 50; `total`
     * counts all), everything else at the base's. Absent in logs from before it was recorded.
     */
    changeFiles: z.object({ paths: z.array(z.string()), total: z.number().int().nonnegative() }).optional(),
    /**
     * The workspace's own top-level Python packages and modules (`pkg` for `pkg/*.py`, `mod` for
     * `mod.py`, at the root and under `src/`), listed after a harness run whose output has
     * `No module named 'A.B'`: the verdict then knows `A` is the repository's, and the failure one of
     * its code (a submodule the fix adds), not of the environment. Absent otherwise.
     */
    ownModules: z.array(z.string()).max(200).optional(),
  }),
  model_response: z.object({
    ...common,
    kind: z.literal('model_response'),
    model: z.string(),
    requestId: z.string().nullable(),
    content: z.array(contentBlock),
    stopReason: z.string().nullable(),
    usage,
    usd: z.number(),
    latencyMs: z.number(),
    attempts: z.number().int().positive(),
    /** Estimated prompt size the harness sent, for checking the context budget. */
    promptTokensEstimate: z.number().int().nonnegative(),
    /** Of `usage.outputTokens`, those the model spent thinking (as the API reported, else estimated). */
    thinkingTokens: z.number().int().nonnegative().optional(),
    /**
     * The context edits the API applied to this turn's prompt (`condenser: server`): what the model
     * read had these tool results replaced by a placeholder. The log keeps them whole; `usage` is
     * what the API billed for the cleared prompt.
     */
    contextEdits: z.array(contextEdit).optional(),
    ...parent,
  }),
  model_retry: z.object({
    ...common,
    kind: z.literal('model_retry'),
    attempt: z.number().int().positive(),
    status: z.number().int().nullable(),
    reason: z.string(),
    waitMs: z.number().nonnegative(),
  }),
  action: z.object({
    ...common,
    kind: z.literal('action'),
    toolUseId: z.string(),
    /** The harness's tool (`editor`, `bash`, ...), whichever name the model called it by. */
    tool: z.string(),
    /** The input in the harness tool's shape. */
    input: z.unknown(),
    /** The name the model called, when it is not `tool` (an Anthropic-defined tool). */
    calledAs: z.string().optional(),
    ...parent,
  }),
  observation: z.object({
    ...common,
    kind: z.literal('observation'),
    ...parent,
    toolUseId: z.string(),
    tool: z.string(),
    isError: z.boolean(),
    /** The text the model sees (truncated head + tail past the observation limit). */
    content: z.string(),
    /** The complete text when it differs from content and fits in the event. */
    fullContent: z.string().optional(),
    /** File (relative to the conversation folder) with the complete output when it was too large. */
    fullContentFile: z.string().optional(),
    exitCode: z.number().int().nullable().optional(),
    killed: z.enum(['timeout', 'memory', 'cancelled']).nullable().optional(),
    durationMs: z.number(),
    testSummary: testSummary.optional(),
    finishSummary: z.string().optional(),
    /** Pre-flight triage: the agent found the issue unclear and asks (ask_for_clarification). */
    question: clarification.optional(),
    /**
     * For a call that may change files: the workspace tree after it, which is the tree of the last
     * checkpoint before this event (the call's own, when it changed files: a file-changing step is
     * recorded checkpoint first, see agent/step.ts). Resume checks that the workspace it
     * restores is this tree (agent/resume-check.ts). Absent for calls that change nothing, and in
     * logs written before it was kept.
     */
    tree: z.string().optional(),
  }),
  checkpoint: z.object({
    ...common,
    kind: z.literal('checkpoint'),
    tree: z.string(),
    /** `git diff --binary` from the base commit; null when it was too large to keep in an event. */
    diff: z.string().nullable(),
    filesChanged: z.number().int().nonnegative(),
    /**
     * Files the checkpoint left out as generated by test runs (src/sandbox/generated-files.ts), by
     * pattern: what the PR says it did not take. Absent in logs written before it was kept.
     */
    leftOut: z.array(z.object({ pattern: z.string(), files: z.number().int().positive() })).optional(),
    /**
     * The tool call whose change this checkpoint holds. It is written before that call's
     * observation, so the log never says a change was made that no checkpoint holds; a run killed
     * in between records the observation on resume without running the call again. Absent: a
     * checkpoint the harness took for itself (the end of a run), or a log from before it was kept.
     */
    toolUseId: z.string().optional(),
  }),
  warning: z.object({
    ...common,
    kind: z.literal('warning'),
    code: z.enum([
      'stuck_repeat',
      'stuck_alternating',
      'lazy_edit',
      'no_tool_call',
      'shell_restarted',
      'mcp_unavailable',
    ]),
    message: z.string(),
  }),
  /** The syntax of the changed files as the run ends (see agent/syntax-check.ts). */
  syntax_check: z.object({
    ...common,
    kind: z.literal('syntax_check'),
    /** Changed files a checker read, and those with no checker (or too large). */
    checked: z.number().int().nonnegative(),
    unchecked: z.number().int().nonnegative(),
    failures: z.array(z.object({ path: z.string(), checker: z.string(), message: z.string() })),
  }),
  /** Instruction files that apply from here on: the agent first worked on a path they cover. */
  guidance_added: z.object({
    ...common,
    kind: z.literal('guidance_added'),
    paths: z.array(z.string()).min(1),
    /** The workspace path whose use added them. */
    touched: z.string(),
  }),
  /**
   * A new round of a conversation that ended waiting for an answer (`needs_info`): the answer, as a
   * user message, from the issue's author or a writer. It reopens the run: the outcome before it no
   * longer holds.
   */
  round_started: z.object({
    ...common,
    kind: z.literal('round_started'),
    /** Who answered (a login), and the answer's text as it was when the job was asked for. */
    by: z.string(),
    text: z.string(),
  }),
  condensation: z.object({
    ...common,
    kind: z.literal('condensation'),
    /** Every event with an id up to and including this one is represented by the summary. */
    throughEventId: z.number().int().nonnegative(),
    summary: z.string(),
    condensedTurns: z.number().int().nonnegative(),
    /**
     * Who wrote the summary: `model` (a structured summary the model wrote in a call of its own,
     * agent/condense-summary.ts) or `lines` (the harness's one line per action). Absent in logs
     * written before there was a choice: `lines`.
     */
    method: z.enum(['model', 'lines']).optional(),
    /** Why a summary the model was asked for was not used (the call failed, or its answer was unusable). */
    fallback: z.string().optional(),
    /**
     * The summary call, when one was made (used or not): what it cost counts in the run's tokens and
     * dollars like a model turn's, but it is not a step.
     */
    call: z
      .object({
        model: z.string(),
        requestId: z.string().nullable(),
        usage,
        usd: z.number(),
        latencyMs: z.number(),
      })
      .optional(),
  }),
  /**
   * What the API cleared from the prompt of the model turn just before, as a separate event.
   * Turns carry their edits in `model_response.contextEdits` (one append, so a crash between two
   * cannot record the turn without them); this kind stays readable in logs that hold it.
   */
  context_edited: z.object({
    ...common,
    kind: z.literal('context_edited'),
    /** The model_response event whose request was edited. */
    responseEventId: z.number().int().nonnegative(),
    edits: z.array(contextEdit),
    ...parent,
  }),
  /**
   * A step the harness took that is neither a model call nor a tool's: a review's (review-job.ts)
   * clone, its sandboxes, and the review posted or why not. The text is for people; no model reads it.
   */
  note: z.object({
    ...common,
    kind: z.literal('note'),
    topic: z.enum(['fetched', 'sandbox', 'review_posted', 'review_not_posted']),
    text: z.string(),
  }),
  outcome: z.object({
    ...common,
    kind: z.literal('outcome'),
    outcome: outcomeKind,
    reason: z.string(),
    /** Which budget a `budget_exhausted` run reached; `monthly_usd`: the owner's or repository's month (agent/spend-budget.ts). */
    limit: z.enum(['steps', 'tokens', 'usd', 'wall_time', 'monthly_usd']).optional(),
    cause: z.string().optional(),
    summary: z.string().nullable(),
    diffStat: z.string(),
  }),
} as const;

export const agentEvent = z.discriminatedUnion('kind', [
  eventSchemas.run_resumed,
  eventSchemas.test_run,
  eventSchemas.model_response,
  eventSchemas.model_retry,
  eventSchemas.action,
  eventSchemas.observation,
  eventSchemas.checkpoint,
  eventSchemas.warning,
  eventSchemas.guidance_added,
  eventSchemas.syntax_check,
  eventSchemas.context_edited,
  eventSchemas.condensation,
  eventSchemas.round_started,
  eventSchemas.note,
  eventSchemas.outcome,
]);
export type AgentEvent = z.infer<typeof agentEvent>;
export type EventKind = AgentEvent['kind'];
export type EventOf<K extends EventKind> = Extract<AgentEvent, { kind: K }>;
/** An event before the store gives it an id and a timestamp. */
export type NewEvent = AgentEvent extends infer E
  ? E extends AgentEvent
    ? Omit<E, 'id' | 'ts'>
    : never
  : never;
export type OutcomeKind = EventOf<'outcome'>['outcome'];
