import { z } from 'zod';
import { repositoryMcpConfig } from './mcp-config.js';
import { repoPolicySchema } from './repo-policy.js';
import { HostAllowlist } from '../sandbox/egress/host-allowlist.js';
import { SHELL_OWN } from '../sandbox/shell-names.js';
import { deepFreeze } from './agent-env.js';

/** Where a repository keeps its settings (read through Probot's config API, `_extends` supported). */
export const REPO_CONFIG_PATH = '.github/issue-agent.yml';

const permission = z.enum(['admin', 'maintain', 'write', 'triage', 'read']);

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Variables a repository may not set: they steer the shell, the dynamic loader, the egress proxy
 * wiring or the harness itself (its own git runs in the sandbox), not the project. PATH is allowed.
 */
const RESERVED_ENV_NAMES = new Set([
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'BASH_ENV',
  'ENV',
  'PROMPT_COMMAND',
  'SHELLOPTS',
  'BASHOPTS',
  'IFS',
]);
/** Compared without regard to case (curl and pip read both spellings; npm's config is case-blind). */
const RESERVED_ANY_CASE = new Set([
  'HTTPS_PROXY',
  'HTTP_PROXY',
  'NO_PROXY',
  'ALL_PROXY',
  'FTP_PROXY',
  'NPM_CONFIG_PROXY',
  'NPM_CONFIG_HTTPS_PROXY',
  'NPM_CONFIG_NOPROXY',
  'PIP_PROXY',
  'YARN_HTTP_PROXY',
  'YARN_HTTPS_PROXY',
]);

/** Why `name` cannot be a repository-set variable, or null when it can. */
export function envNameProblem(name: string): string | null {
  if (!ENV_NAME.test(name)) return `"${name.slice(0, 60)}" is not a variable name (letters, digits, _)`;
  const upper = name.toUpperCase();
  if (RESERVED_ENV_NAMES.has(name) || RESERVED_ANY_CASE.has(upper)) {
    return `${name} is set by the harness and cannot be changed`;
  }
  if (upper.startsWith('ISSUE_AGENT_')) return `${name}: ISSUE_AGENT_* names belong to the harness`;
  if (SHELL_OWN.test(name)) return `${name} steers the harness's shells and cannot be set`;
  if (name.startsWith('LD_')) return `${name}: the dynamic loader's variables cannot be set`;
  if (upper.startsWith('GIT_') && !/^GIT_(AUTHOR|COMMITTER)_(NAME|EMAIL|DATE)$/.test(name)) {
    return `${name}: the harness runs git in the sandbox; only GIT_AUTHOR_* and GIT_COMMITTER_* may be set`;
  }
  return null;
}

const envName = z.string().superRefine((name, ctx) => {
  const problem = envNameProblem(name);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
});

/** A host pattern as the egress proxy's allowlist reads it (`registry.example.org`, `*.example.org`, an IP). */
const hostPattern = z
  .string()
  .max(255)
  .superRefine((pattern, ctx) => {
    if (pattern !== pattern.trim()) {
      ctx.addIssue({ code: 'custom', message: `"${pattern}" has surrounding spaces` });
      return;
    }
    try {
      new HostAllowlist([pattern]);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      ctx.addIssue({ code: 'custom', message: message.replace(/^allowHosts: /, '') });
    }
  });

const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const DOMAIN_COMPONENT = '(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])';
/**
 * A Docker image reference (`[registry[:port]/]path[:tag][@digest]`), after the grammar of
 * distribution/reference: lowercase path components, a tag of up to 128 word characters.
 */
export const IMAGE_REFERENCE = new RegExp(
  `^(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*(?::\\d{1,5})?/)?` +
    `${PATH_COMPONENT}(?:/${PATH_COMPONENT})*` +
    '(?::\\w[\\w.-]{0,127})?' +
    '(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$',
);

/** Attempts a job may make (`attempts:` in the config, or `(try N)` in a request). */
export const MAX_ATTEMPTS = 5;

const VERSION = /^\d{1,3}(?:\.\d{1,4}){0,2}$/;

/**
 * `.github/issue-agent.yml`. Strict at every level (the top, `budgets`, and `policy` in
 * repoPolicySchema): an unknown key is almost always a typo that would otherwise silently keep a
 * default (a misspelt `blockedPaths` must not quietly allow everything).
 */
export const repoConfigSchema = z
  .object({
    label: z.string().min(1).max(50).optional(),
    handle: z
      .string()
      .regex(/^@[A-Za-z0-9][A-Za-z0-9-]*(\[bot\])?$/, 'a handle looks like @agent')
      .optional(),
    /** Repository roles whose members may start the agent. */
    allowedPermissions: z.array(permission).min(1).default(['admin', 'maintain', 'write']),
    /** Numeric user ids of bots allowed to trigger (a login proves nothing: anyone can name an app). */
    trustedBots: z.array(z.number().int().positive()).default([]),
    testCommand: z.string().min(1).max(1000).optional(),
    /**
     * A new request while a job runs for the same issue or PR: `queue` runs it after the running one,
     * `replace` cancels the running one and runs the new request next.
     */
    onBusy: z.enum(['queue', 'replace']).default('queue'),
    /** Open the PR as a draft unless the outcome is `resolved` (default), or always. */
    draft: z.enum(['unless-resolved', 'always']).default('unless-resolved'),
    budgets: z
      .object({
        maxSteps: z.number().int().positive().max(500).optional(),
        maxUsd: z.number().positive().max(100).optional(),
        maxMinutes: z.number().positive().max(240).optional(),
        /**
         * The most this repository's runs may spend on the model in a calendar month (UTC), across
         * every worker; under the owner's ISSUE_AGENT_MONTHLY_USD, which it can only lower.
         */
        monthlyUsd: z.number().positive().max(1_000_000).optional(),
      })
      .strict()
      .default({}),
    policy: repoPolicySchema.default(repoPolicySchema.parse({})),
    /**
     * Independent attempts per job (best-of-N), each in its own sandbox and workspace; the harness
     * opens the PR of the best one. `(try N)` in a request overrides it for that job.
     */
    attempts: z.number().int().min(1).max(MAX_ATTEMPTS).default(1),
    /**
     * Pre-flight triage on issues: the agent may ask up to three questions instead of guessing, and
     * the job waits for an answer (`needs_info`). Never on follow-up rounds on the App's PRs.
     */
    triage: z.enum(['on', 'off']).default('on'),
    /**
     * Automatic rounds on the App's own PR when a check on its head fails (the failing jobs' names and
     * log tails are the task); 0 turns them off.
     */
    ciFixRounds: z.number().int().min(0).max(10).default(2),
    /** How long an outsider's request waits for a maintainer's `@agent approve` (days). */
    approvalDays: z.number().int().min(1).max(30).default(7),
    /** End the other attempts as soon as one resolves the issue (default: all run to their end). */
    stopOnFirstResolved: z.boolean().default(false),
    /**
     * Commands run in the sandbox before the baseline test run, in order, instead of the detected
     * install. Absent: detected from the lockfile or Python manifest. `[]`: no setup at all.
     */
    setup: z
      .array(
        z
          .string({
            // `- echo "a: b"` is a one-key mapping to YAML, not a string; say how to write it.
            error: (issue) =>
              typeof issue.input === 'object' && issue.input !== null && !Array.isArray(issue.input)
                ? 'a setup command must be a string; YAML read this one as a mapping because it contains ": " (quote the whole command)'
                : 'a setup command must be a string',
          })
          .max(2000)
          .refine((c) => c.trim() !== '', 'a setup command cannot be empty')
          .refine((c) => !c.includes('\0'), 'a setup command cannot contain a NUL character'),
      )
      .max(50)
      .optional(),
    /** Plain variables for the setup commands and the agent's shell (no secrets: they are shown). */
    env: z
      .record(
        // Keys are checked below, so that the message names the problem rather than "invalid key".
        z.string(),
        z
          .string({ error: 'a value must be a string (quote numbers and booleans)' })
          .max(4096)
          .refine((v) => !v.includes('\0'), 'a value cannot contain a NUL character'),
      )
      .superRefine(
        (env, ctx) => {
          const names = Object.keys(env);
          if (names.length > 100) ctx.addIssue({ code: 'custom', message: 'at most 100 variables' });
          for (const name of names) {
            const problem = envNameProblem(name);
            if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
          }
          // Also when a value is wrong, so that one pass lists every problem.
        },
        { when: (payload) => typeof payload.value === 'object' && payload.value !== null },
      )
      .default({}),
    /** Names of deployment-provided secrets the setup commands get as variables (never the agent). */
    setupSecrets: z
      .array(envName)
      .max(20)
      .refine((names) => new Set(names).size === names.length, 'a secret is named twice')
      .default([]),
    /** Language versions for the sandbox image: `node: 22` or `"22.11"`, `python: "3.12"` (quoted). */
    runtime: z
      .object({
        node: z
          .union([z.number().int().positive().max(999), z.string().regex(VERSION)], {
            error: 'a Node.js version: a major (22) or a quoted "22.11" / "22.11.0"',
          })
          .optional(),
        python: z
          .string({ error: 'quote the Python version (python: "3.12"): in YAML 3.10 is the number 3.1' })
          .regex(/^3\.\d{1,2}(?:\.\d{1,3})?$/, 'a Python version looks like "3.12" or "3.12.7"')
          .optional(),
      })
      .strict()
      .default({}),
    /**
     * A sandbox image to use instead of the deployment's, e.g. one built FROM issue-agent/base with
     * an extra toolchain. It must keep the `agent` user (uid 1000) and the base image's tools.
     */
    image: z
      .string()
      .max(255)
      .regex(IMAGE_REFERENCE, 'an image reference looks like registry.example.org/team/image:tag')
      .optional(),
    /**
     * Extra hosts, beside the ecosystem's registries, that setup may reach, and hosts the agent's
     * shell may reach (none by default). Exact names, `*.example.org`, or IP literals.
     */
    network: z
      .object({
        setup: z.array(hostPattern).max(50).optional(),
        agent: z.array(hostPattern).max(50).optional(),
      })
      .strict()
      .default({}),
    /** Keep the prepared environment (node_modules, .venv) between jobs, keyed by its inputs. */
    cache: z.boolean().default(true),
    /**
     * Commits of history in the agent's workspace (Docker sandbox): a number, or `full`. Unset: the
     * deployment's ISSUE_AGENT_WORKSPACE_HISTORY (default 50).
     */
    history: z.union([z.literal('full'), z.number().int().min(1).max(1_000_000)]).optional(),
    /** MCP servers whose tools the agent gets (stdio servers run in the job's sandbox). */
    mcp: repositoryMcpConfig.optional(),
  })
  .strict()
  .superRefine((config, ctx) => {
    for (const name of new Set(config.setupSecrets)) {
      if (Object.hasOwn(config.env, name)) {
        ctx.addIssue({
          code: 'custom',
          path: ['setupSecrets'],
          message: `${name} is both a secret and a plain variable under env`,
        });
      }
    }
  });

export type RepoConfig = z.infer<typeof repoConfigSchema> & {
  readonly label: string;
  readonly handle: string;
};

export class RepoConfigError extends Error {
  override readonly name = 'RepoConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`${REPO_CONFIG_PATH} is invalid: ${problems.join('; ')}`);
  }
}

/** Validates what the config API returned (null when the file is absent) and fills App defaults. */
export function parseRepoConfig(
  raw: unknown,
  defaults: { readonly label: string; readonly handle: string },
): RepoConfig {
  const input = raw === null || raw === undefined ? {} : raw;
  if (typeof input !== 'object' || Array.isArray(input)) {
    throw new RepoConfigError(['the file must be a YAML mapping (key: value lines)']);
  }
  const parsed = repoConfigSchema.safeParse(input);
  if (!parsed.success) {
    throw new RepoConfigError(
      parsed.error.issues.map((i) => `${i.path.length > 0 ? i.path.join('.') : '(top level)'}: ${i.message}`),
    );
  }
  return deepFreeze({
    ...parsed.data,
    label: parsed.data.label ?? defaults.label,
    handle: parsed.data.handle ?? defaults.handle,
  });
}
