/**
 * The App's commits made through GitHub's git database API instead of a push: blobs for the new
 * contents, one tree on the base commit's tree, one commit with the base as its parent. A commit the
 * API makes for an installation token with no author, committer or signature in the request is
 * signed by GitHub, so branch protection's "Require signed commits" accepts it and GitHub shows it as
 * Verified; its author is the App's bot account.
 *
 * Invariants:
 * - The change is read from the pristine clone's index after the agent's diff was applied and judged
 *   by the push policy (`git diff --cached --raw -z --no-renames`), never from anything the sandbox
 *   says: what is sent is what was judged, and the tree GitHub makes must have the id of the index's
 *   own tree (`git write-tree`), or nothing is committed.
 * - Every blob GitHub stores must have the id git gave it here; a mismatch stops the commit. Text
 *   files travel inline in the tree request, binary ones as base64 blobs (one write each).
 * - What the API cannot carry as this code sends it goes the git-push way (planApiCommit says why,
 *   in one line for the PR): a path that becomes a symlink or a submodule, a file over
 *   API_LIMITS.maxBlobBytes, more than API_LIMITS.maxPaths paths.
 */
import type { GitHubClient } from './app-client.js';

/** Beyond these the change is pushed with git (see planApiCommit). */
export const API_LIMITS = {
  /**
   * Largest file sent as a blob: 10 MiB (about 13.4 MiB of base64 in one request), well under
   * GitHub's 100 MB file limit and the API's request size; larger files go by git push.
   */
  maxBlobBytes: 10 * 1024 * 1024,
  /** Most paths in one change: past that, one push is cheaper than the requests. */
  maxPaths: 1000,
} as const;

const ZERO = /^0+$/;

/** Text sent inline in the tree request, in all; past it, text files are sent as blobs too. */
const MAX_INLINE_BYTES = 4 * 1024 * 1024;

/** One record of `git diff --raw -z --no-renames`: a path's mode and object before and after. */
export interface RawEntry {
  readonly path: string;
  readonly oldMode: string;
  readonly newMode: string;
  readonly oldSha: string;
  readonly newSha: string;
}

/** One path of the new tree as git/create-tree takes it (`sha: null` deletes the path). */
export interface TreeEntry {
  readonly path: string;
  readonly mode: '100644' | '100755' | '120000' | '160000';
  readonly type: 'blob' | 'commit';
  readonly sha: string | null;
}

export type ApiPlan =
  | {
      readonly kind: 'api';
      /** Deletions first (a file replaced by a folder of the same name needs its path free). */
      readonly entries: readonly TreeEntry[];
      /** The blobs GitHub does not have yet (not on the base side of the change), each once. */
      readonly upload: readonly string[];
    }
  | { readonly kind: 'push'; readonly why: string };

/** Parses `git diff --raw -z --no-renames` output (`:old new oldsha newsha S\0path\0` records). */
export function parseRawEntries(raw: string): RawEntry[] {
  const parts = raw.split('\0');
  const out: RawEntry[] = [];
  for (let i = 0; i < parts.length; i++) {
    const head = parts[i] ?? '';
    const m = /^:(\d{6}) (\d{6}) ([0-9a-f]+) ([0-9a-f]+) [A-Z]\d*$/.exec(head);
    if (m === null) continue;
    const path = parts[i + 1] ?? '';
    i += 1;
    out.push({ oldMode: m[1] ?? '', newMode: m[2] ?? '', oldSha: m[3] ?? '', newSha: m[4] ?? '', path });
  }
  return out;
}

function modeName(mode: string): string {
  return mode === '120000' ? 'a symlink' : mode === '160000' ? 'a submodule' : `mode ${mode}`;
}

/**
 * How the change is committed: through the API (its tree entries and the blobs to upload), or by
 * git push with the one-line reason. `sizes`: the size in bytes of every new blob.
 */
export function planApiCommit(
  entries: readonly RawEntry[],
  sizes: ReadonlyMap<string, number>,
  limits: { readonly maxBlobBytes: number; readonly maxPaths: number } = API_LIMITS,
): ApiPlan {
  if (entries.length > limits.maxPaths)
    return {
      kind: 'push',
      why: `the change touches ${entries.length} paths, more than the ${limits.maxPaths} sent through the API`,
    };
  const known = new Set(entries.filter((e) => !ZERO.test(e.oldSha)).map((e) => e.oldSha));
  const deletions: TreeEntry[] = [];
  const writes: TreeEntry[] = [];
  const upload: string[] = [];
  for (const e of entries) {
    if (ZERO.test(e.newMode)) {
      const gitlink = e.oldMode === '160000';
      deletions.push({
        path: e.path,
        mode: gitlink ? '160000' : '100644',
        type: gitlink ? 'commit' : 'blob',
        sha: null,
      });
      continue;
    }
    if (e.newMode !== '100644' && e.newMode !== '100755')
      return {
        kind: 'push',
        why: `\`${e.path}\` becomes ${modeName(e.newMode)}, which this App commits with git`,
      };
    const size = sizes.get(e.newSha);
    if (size === undefined) throw new Error(`no size for the blob ${e.newSha} of ${e.path}`);
    if (size > limits.maxBlobBytes)
      return {
        kind: 'push',
        why: `\`${e.path}\` is ${mib(size)}, over the ${mib(limits.maxBlobBytes)} sent through the API`,
      };
    writes.push({ path: e.path, mode: e.newMode, type: 'blob', sha: e.newSha });
    if (!known.has(e.newSha) && !upload.includes(e.newSha)) upload.push(e.newSha);
  }
  return { kind: 'api', entries: [...deletions, ...writes], upload };
}

function mib(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

export class ApiCommitError extends Error {
  override readonly name = 'ApiCommitError';
}

/**
 * Makes the commit through the API and returns its id; no ref moves. `tree`: the id git gives the
 * judged index's tree, which GitHub's must equal. `readBlob`: a new blob's content by its id.
 */
export async function createApiCommit(
  gh: GitHubClient,
  where: { readonly owner: string; readonly repo: string },
  input: {
    readonly plan: Extract<ApiPlan, { kind: 'api' }>;
    readonly readBlob: (sha: string) => Promise<Buffer>;
    readonly parent: string;
    readonly tree: string;
    readonly message: string;
  },
): Promise<string> {
  // Text goes inline in the tree request (`content`): one request for any number of files, where each
  // blob is a write of its own (GitHub asks a second between writes). Binary content, and text past
  // MAX_INLINE_BYTES in all, is sent as base64 blobs.
  const inline = new Map<string, string>();
  let inlined = 0;
  for (const sha of input.plan.upload) {
    const bytes = await input.readBlob(sha);
    const text = bytes.toString('utf8');
    if (inlined + bytes.length <= MAX_INLINE_BYTES && Buffer.from(text, 'utf8').equals(bytes)) {
      inline.set(sha, text);
      inlined += bytes.length;
      continue;
    }
    const { data } = await gh.rest.git.createBlob({
      ...where,
      content: bytes.toString('base64'),
      encoding: 'base64',
    });
    if (data.sha !== sha)
      throw new ApiCommitError(`GitHub stored the blob ${sha} as ${data.sha}; nothing was committed`);
  }
  const parent = await gh.rest.git.getCommit({ ...where, commit_sha: input.parent });
  const { data: tree } = await gh.rest.git.createTree({
    ...where,
    base_tree: parent.data.tree.sha,
    tree: input.plan.entries.map((e) => {
      const content = e.sha === null ? undefined : inline.get(e.sha);
      return content === undefined ? { ...e } : { path: e.path, mode: e.mode, type: e.type, content };
    }),
  });
  if (tree.sha !== input.tree)
    throw new ApiCommitError(
      `GitHub made the tree ${tree.sha}, not the judged change's ${input.tree}; nothing was committed`,
    );
  // No author, committer or signature: GitHub signs only a commit it attributes to the App itself.
  const { data: commit } = await gh.rest.git.createCommit({
    ...where,
    message: input.message,
    tree: tree.sha,
    parents: [input.parent],
  });
  return commit.sha;
}

/**
 * Whether `tip` is the commit this job already made (a retry after a crash between moving the ref
 * and the end of publishing): its parent is `parent`, its tree is `tree` and it carries `jobTrailer`.
 */
export async function isOwnCommit(
  gh: GitHubClient,
  where: { readonly owner: string; readonly repo: string },
  tip: string,
  expect: { readonly parent: string; readonly tree: string; readonly jobTrailer: string },
): Promise<boolean> {
  const { data } = await gh.rest.git.getCommit({ ...where, commit_sha: tip });
  return (
    data.parents.length === 1 &&
    data.parents[0]?.sha === expect.parent &&
    data.tree.sha === expect.tree &&
    data.message.split('\n').includes(expect.jobTrailer)
  );
}
