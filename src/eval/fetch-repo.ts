import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { HostGit } from '../github/host-git.js';
import { Redactor } from '../publish/redact.js';

/**
 * A task set's repositories fetched from GitHub into bare clones of ours (under the eval's output
 * folder), for tasks that name `repo` and have no local copy, and for `--from-repo`. Host git with
 * the pins of host-git.ts; the token, when there is one, travels as an HTTP header of one git process
 * (never in a URL, the clone's config or FETCH_HEAD's remote name). Incremental when the clone exists.
 */

export class FetchError extends Error {
  override readonly name = 'FetchError';
}

export interface FetchOptions {
  readonly url: string;
  readonly token: string | null;
  readonly clone: string;
  /** What to fetch, e.g. `+refs/heads/main:refs/heads/main`. */
  readonly refspecs: readonly string[];
  /** Commits that must be there afterwards; one missing is fetched by its id (GitHub serves reachable ones). */
  readonly commits?: readonly string[];
}

export async function fetchRepository(options: FetchOptions): Promise<void> {
  const redactor = new Redactor(options.token === null ? [] : [options.token]);
  const git = new HostGit(process.env.PATH ?? '/usr/bin:/bin', (text) => redactor.redact(text));
  const remote = {
    ...(options.token === null ? {} : { token: options.token }),
    remoteUrl: options.url,
    timeoutMs: 60 * 60_000,
  };
  const fetch = (refspecs: readonly string[]): Promise<unknown> =>
    git.run(
      ['-C', options.clone, 'fetch', '--quiet', '--no-tags', '--prune', '--', options.url, ...refspecs],
      remote,
    );
  const has = (sha: string): Promise<boolean> =>
    git.run(['-C', options.clone, 'cat-file', '-e', `${sha}^{commit}`]).then(
      () => true,
      () => false,
    );
  try {
    if (!existsSync(join(options.clone, 'HEAD'))) {
      await mkdir(options.clone, { recursive: true });
      await git.run(['init', '--quiet', '--bare', options.clone]);
    }
    await fetch(options.refspecs);
    const missing: string[] = [];
    for (const sha of options.commits ?? []) if (!(await has(sha))) missing.push(sha);
    if (missing.length > 0) await fetch(missing);
    for (const sha of missing) {
      if (!(await has(sha))) throw new FetchError(`${options.url} has no commit ${sha}`);
    }
  } catch (error) {
    if (error instanceof FetchError) throw error;
    throw new FetchError(
      `cannot fetch ${options.url}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}
