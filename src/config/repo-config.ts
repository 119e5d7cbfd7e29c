import { z } from 'zod';
import { repoPolicySchema } from '../publish/policy.js';
import { deepFreeze } from './agent-env.js';

/** Where a repository keeps its settings (read through Probot's config API, `_extends` supported). */
export const REPO_CONFIG_PATH = '.github/issue-agent.yml';

const permission = z.enum(['admin', 'maintain', 'write', 'triage', 'read']);

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
      })
      .strict()
      .default({}),
    policy: repoPolicySchema.default(repoPolicySchema.parse({})),
  })
  .strict();

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
