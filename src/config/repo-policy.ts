import { z } from 'zod';

/**
 * What a repository allows the App to push (`policy` in `.github/issue-agent.yml`), checked at push
 * time by src/publish/policy.ts, which says why the defaults are strict. Strict, like the rest of the
 * repo config: a misspelt key must not silently keep a permissive value.
 */
export const repoPolicySchema = z
  .object({
    /** Globs of paths the App may not push changes to, on top of the rules below. Default: none. */
    blockedPaths: z.array(z.string().regex(/[^/\s]/, 'a pattern needs a name, not only slashes')).default([]),
    /** Whether the App may change `.github/workflows/**`. Default: false. */
    allowWorkflowChanges: z.boolean().default(false),
    /** Whether the App may change the rest of `.github/**` and CODEOWNERS. Default: false. */
    allowGithubChanges: z.boolean().default(false),
    /** Whether the App may add, move or retarget a gitlink (submodule). Default: false. */
    allowGitlinks: z.boolean().default(false),
    /** Most lines added + deleted in one push. Default: 2000. */
    maxChangedLines: z.number().int().nonnegative().default(2000),
    /** Most files changed (added, deleted, modified, renamed) in one push. Default: 50. */
    maxChangedFiles: z.number().int().nonnegative().default(50),
  })
  .strict();
export type RepoPolicy = z.output<typeof repoPolicySchema>;
/** What a repository writes (every field optional); parse with repoPolicySchema to get a RepoPolicy. */
export type RepoPolicyInput = z.input<typeof repoPolicySchema>;
