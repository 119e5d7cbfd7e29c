import { execFile } from 'node:child_process';
import { lstat, mkdir, rename, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { WorkspaceProbe } from '../testing/detect-test-command.js';
import type { InstructionSource } from '../agent/instructions.js';
import {
  clearHistories,
  copyCachedHistory,
  historyCacheDir,
  historyBases,
  historyKey,
  storeHistory,
} from './history-cache.js';
import {
  alreadyChecked,
  fingerprintOf,
  forgetChecked,
  objectFiles,
  objectsFingerprint,
  onlyAdded,
  recordChecked,
} from './mirror-check.js';
import { withMirrorLock } from './mirror-lock.js';
import { checkSeal, sealClone, sealPath, type Seal } from './pristine-clone.js';

export class HostGitError extends Error {
  override readonly name: string = 'HostGitError';
  constructor(
    message: string,
    readonly transient: boolean,
  ) {
    super(message);
  }
}

/**
 * The pristine clone is not what the host wrote (its `.git/config` or another sealed file changed,
 * or its seal is gone): no git runs there again. Never transient: the job fails permanently.
 */
export class PristineTamperedError extends HostGitError {
  override readonly name = 'PristineTamperedError';
  constructor(
    readonly dir: string,
    readonly problem: string,
  ) {
    super(
      `the host's clone at ${dir} was changed by something other than the host (${problem}); ` +
        'refusing to run git there, so nothing from it is committed or pushed',
      false,
    );
  }
}

/**
 * Git on the host, for clone, commit and push: the only place a token meets git. Invariants:
 * - never a shell: argv only, so no repository or issue text is ever parsed by a shell;
 * - the token travels in the environment of one git process as an `http.extraHeader` (git's
 *   GIT_CONFIG_COUNT mechanism), so it is written to no file and shown in no process list;
 * - no system or global config and no system attributes (environment), and every key that names a
 *   program git would run, or a file it would read as config or attributes, is pinned on the command
 *   line (which git reads last, so it wins over the repository's config and anything it includes);
 * - git runs in the pristine clone only through `inPristine`, which first checks the clone against
 *   the seal taken when the host cloned it (see pristine-clone.ts); the only other repository it
 *   touches is the sandbox copy, in `copyForSandbox`, fresh and before any sandbox has seen it. Pins cannot cover everything the
 *   repository config can say (filter/diff/merge drivers named by attributes, `include.path`,
 *   `includeIf`, `url.*.insteadOf`, `http.*` settings that would send the token elsewhere), so the
 *   seal is what makes that config the host's own; the pins are the second line.
 * The agent's workspace is a separate copy whose changes come back as a diff (data), never as a .git.
 */
const PINNED: readonly (readonly [key: string, value: string])[] = [
  ['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'],
  ['core.sshCommand', '/bin/false'],
  ['core.gitProxy', '/bin/false'],
  ['core.pager', 'cat'],
  ['core.editor', '/bin/false'],
  ['core.askPass', '/bin/false'],
  ['core.attributesFile', '/dev/null'],
  ['core.excludesFile', '/dev/null'],
  // Fails closed: a diff that would print a patch without --no-ext-diff errors instead of running
  // anything (an empty value would not unset it; git would try to run "").
  ['diff.external', '/bin/false'],
  ['commit.gpgSign', 'false'],
  ['tag.gpgSign', 'false'],
  ['push.gpgSign', 'false'],
  ['gpg.program', '/bin/false'],
  ['gpg.openpgp.program', '/bin/false'],
  ['gpg.ssh.program', '/bin/false'],
  ['gpg.x509.program', '/bin/false'],
  // An empty value empties the list of helpers, whatever the repository or an include added before.
  ['credential.helper', ''],
  ['submodule.recurse', 'false'],
  ['fetch.recurseSubmodules', 'false'],
  ['push.recurseSubmodules', 'no'],
  // No background gc or maintenance started from a host command.
  ['gc.auto', '0'],
  ['maintenance.auto', 'false'],
  // Every transport is refused by name (a repository's `protocol.<name>.allow` would override the
  // general key) except https, and http only for a remote that is http (a GitHub on loopback).
  ['protocol.allow', 'never'],
  ['protocol.file.allow', 'never'],
  ['protocol.git.allow', 'never'],
  ['protocol.ssh.allow', 'never'],
  ['protocol.ext.allow', 'never'],
  ['protocol.https.allow', 'always'],
];

/** The `-c` arguments every host git gets; `remoteUrl` decides whether plain http is allowed. */
export function pinnedConfig(remoteUrl: string | null): string[] {
  const http = remoteUrl !== null && /^http:\/\//i.test(remoteUrl) ? 'always' : 'never';
  return [...PINNED, ['protocol.http.allow', http] as const].flatMap(([k, v]) => ['-c', `${k}=${v}`]);
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** The subcommand, for messages: the first argument that is not an option or an option's value. */
function verbOf(args: readonly string[]): string {
  for (let i = 0; i < args.length; i++) {
    const a = args[i] ?? '';
    if (a === '-C' || a === '-c') i++;
    else if (!a.startsWith('-')) return a;
  }
  return '';
}

export interface GitRun {
  readonly stdout: string;
  readonly stderr: string;
}

export function baseGitEnv(path: string): NodeJS.ProcessEnv {
  return {
    PATH: path,
    HOME: '/nonexistent',
    XDG_CONFIG_HOME: '/nonexistent',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ATTR_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    LC_ALL: 'C',
  };
}

function authEnv(token: string): NodeJS.ProcessEnv {
  const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
  return {
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: 'http.extraHeader',
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  };
}

export interface RunOptions {
  readonly cwd?: string;
  readonly token?: string;
  readonly input?: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly timeoutMs?: number;
  /** The remote this command talks to, if any (plain http is refused unless it is http). */
  readonly remoteUrl?: string;
}

export interface Identity {
  readonly name: string;
  readonly email: string;
}

/** How a pristine clone came from the mirror: what was fetched, and why the mirror was made again. */
export interface MirrorUse {
  /** `cloned`: the mirror was made now (the whole repository transferred); `updated`: only new commits. */
  readonly fetched: 'cloned' | 'updated';
  /** Why the mirror was moved aside and made again, or null. */
  readonly rebuilt: string | null;
}

/** Where the sandbox's `.git` came from: the repository's history cache, or made now (and why not kept). */
export interface HistoryUse {
  readonly cached: boolean;
  /**
   * The commit of the kept `.git` this one was fetched onto (only what is newer was packed), or
   * null: copied whole (`cached`) or made anew.
   */
  readonly onto: string | null;
  /** Why a history made now could not be kept in the cache, or null. */
  readonly notStored: string | null;
}

/** How many kept `.git`s of other commits are tried as the base of a new one (all of them: 4 are kept). */
const MAX_BASES_TRIED = 4;
/**
 * A kept `.git` with this many packs is not built on again (each fetch onto it adds one): the next
 * job's is made anew, so what a chain of jobs carries along stays bounded.
 */
const MAX_PACKS = 5;
/** The ref a fetch onto a kept `.git` offers its commit by (removed right after). */
const BASE_REF = 'refs/issue-agent-base';

/** Moves a mirror aside (a rename, atomic) and removes it; its seal goes with it. */
async function quarantine(mirror: string): Promise<void> {
  const aside = `${mirror}.broken-${process.pid}-${Date.now()}`;
  await rm(sealPath(mirror), { force: true });
  await forgetChecked(mirror);
  await clearHistories(historyCacheDir(mirror));
  try {
    await rename(mirror, aside);
  } catch {
    return;
  }
  await rm(aside, { recursive: true, force: true });
}

export class HostGit {
  constructor(
    private readonly path: string,
    private readonly redact: (text: string) => string,
  ) {}

  /**
   * One git process with the pins and the clean environment. In a repository, use `inPristine`:
   * this does not check any seal.
   */
  run(args: readonly string[], options: RunOptions = {}): Promise<GitRun> {
    const env = {
      ...baseGitEnv(this.path),
      ...(options.token === undefined ? {} : authEnv(options.token)),
      ...options.env,
    };
    return new Promise((resolve, reject) => {
      const child = execFile(
        'git',
        [...pinnedConfig(options.remoteUrl ?? null), ...args],
        {
          cwd: options.cwd,
          env,
          encoding: 'utf8',
          maxBuffer: 256 * 1024 * 1024,
          timeout: options.timeoutMs ?? 10 * 60_000,
          killSignal: 'SIGKILL',
        },
        (error, stdout, stderr) => {
          if (error === null) {
            resolve({ stdout, stderr });
            return;
          }
          const detail = this.redact(stderr.trim().split('\n').slice(-5).join(' | '));
          const transient =
            /Could not resolve host|Connection refused|timed out|HTTP 5\d\d|The requested URL returned error: 5\d\d|RPC failed|early EOF|Connection reset/i.test(
              stderr,
            );
          reject(new HostGitError(`git ${verbOf(args)} failed: ${detail || error.message}`, transient));
        },
      );
      // git may exit before reading all of its input (a refused diff): the broken pipe is not an
      // error of its own, the exit status and stderr above report what happened.
      child.stdin?.on('error', () => undefined);
      if (options.input !== undefined) child.stdin?.end(options.input);
    });
  }

  /**
   * The pristine clone at `dir`, found again (after a crash or in a later stage) or cloned now.
   * Found means sealed and unchanged; a clone with no seal (a crash between clone and seal) is
   * replaced; a changed one is refused with PristineTamperedError. The token is asked for only when
   * a clone is needed.
   */
  async ensurePristine(
    dir: string,
    source: {
      readonly url: string;
      readonly branch: string;
      readonly token: () => Promise<string>;
      /** The repository's mirror on this host (see pristineFromMirror); without it, a network clone. */
      readonly mirror?: string | undefined;
    },
  ): Promise<'found' | 'cloned' | MirrorUse> {
    if (await exists(sealPath(dir))) {
      await this.verifyPristine(dir);
      return 'found';
    }
    if (source.mirror !== undefined) return this.pristineFromMirror(source.mirror, dir, source);
    await this.clonePristine(dir, source.url, await source.token(), source.branch);
    return 'cloned';
  }

  /** Clones `url` into `dir` (replacing whatever is there) without writing the token anywhere, and seals it. */
  async clonePristine(dir: string, url: string, token: string, branch: string): Promise<void> {
    await rm(sealPath(dir), { force: true });
    await rm(dir, { recursive: true, force: true });
    await mkdir(dirname(dir), { recursive: true });
    // No checkout: the host never needs the files (publishing works on the index, the sandbox's copy
    // checks out its own), and writing tens of thousands of them is most of a large clone's time.
    await this.run(
      [
        'clone',
        '--quiet',
        '--no-checkout',
        '--no-tags',
        '--single-branch',
        '--branch',
        branch,
        '--',
        url,
        dir,
      ],
      {
        token,
        remoteUrl: url,
      },
    );
    await sealClone(dir, url);
  }

  /**
   * The pristine clone made from the repository's mirror on this host: the mirror (a bare repository
   * per installation and repository, see mirror.ts) is brought up to date with `branch` by an
   * incremental fetch, then cloned locally into `dir` with hardlinked objects (no second transfer,
   * no second copy of the history on disk), its origin set to `url`, and sealed like a network clone.
   * A mirror that fails its seal, was made from another URL, whose branch was rewritten upstream (a
   * force-push) or that fails while being used (corrupt objects) is moved aside and made again; the
   * result says which.
   */
  async pristineFromMirror(
    mirror: string,
    dir: string,
    source: { readonly url: string; readonly branch: string; readonly token: () => Promise<string> },
  ): Promise<MirrorUse> {
    return withMirrorLock(mirror, () => this.pristineFromMirrorLocked(mirror, dir, source));
  }

  private async pristineFromMirrorLocked(
    mirror: string,
    dir: string,
    source: { readonly url: string; readonly branch: string; readonly token: () => Promise<string> },
  ): Promise<MirrorUse> {
    let why: string | null = null;
    let fetched: 'cloned' | 'updated' = 'cloned';
    try {
      const updated = await this.updateMirror(mirror, source);
      why = updated.rebuild;
      fetched = updated.rebuild === null ? updated.fetched : 'cloned';
      await this.cloneFromMirror(mirror, dir, source.url, source.branch);
      return { fetched, rebuilt: why };
    } catch (error) {
      if (error instanceof PristineTamperedError && error.dir === dir) throw error;
      // The network, not the mirror: keep it, the job's retry will fetch again.
      if (error instanceof HostGitError && error.transient) throw error;
      // One fresh start: whatever was wrong with the mirror does not survive it.
      why = `the mirror failed while used (${error instanceof Error ? error.message.slice(0, 200) : String(error)})`;
      await quarantine(mirror);
      await this.freshMirror(mirror, source.url, source.branch, await source.token());
      await this.cloneFromMirror(mirror, dir, source.url, source.branch);
      return { fetched: 'cloned', rebuilt: why };
    }
  }

  private async updateMirror(
    mirror: string,
    source: { readonly url: string; readonly branch: string; readonly token: () => Promise<string> },
  ): Promise<{ readonly fetched: 'cloned' | 'updated'; readonly rebuild: string | null }> {
    let rebuild: string | null = null;
    if (await exists(sealPath(mirror))) {
      const r = await checkSeal(mirror, true);
      if (!r.ok) rebuild = `its seal failed (${r.problem})`;
      else if (r.seal.url !== source.url) rebuild = 'it was made from another URL';
    } else if (await exists(mirror)) {
      rebuild = 'it has no seal';
    } else {
      await this.freshMirror(mirror, source.url, source.branch, await source.token());
      return { fetched: 'cloned', rebuild: null };
    }
    if (rebuild === null) {
      const ref = `refs/heads/${source.branch}`;
      const before = await this.inMirror(mirror, ['rev-parse', '--verify', '--quiet', ref])
        .then((r) => r.stdout.trim())
        .catch(() => '');
      // Read in full before (mirror-check.ts): then what the fetch adds is all that is new, and git
      // verified it while receiving it (every object hashed as it is stored, and the new tip's
      // history connected to what was there), so the new tip needs no full read of its own.
      const filesBefore = before === '' ? null : await objectFiles(mirror).catch(() => null);
      const checkedBefore =
        filesBefore !== null && (await alreadyChecked(mirror, before, fingerprintOf(filesBefore)));
      await this.inMirror(mirror, ['fetch', '--quiet', '--no-tags', '--', source.url, `+${ref}:${ref}`], {
        token: await source.token(),
      });
      const after =
        before === '' ? '' : (await this.inMirror(mirror, ['rev-parse', '--verify', ref])).stdout.trim();
      if (before !== '' && after !== before) {
        const ancestor = await this.inMirror(mirror, ['merge-base', '--is-ancestor', before, after]).then(
          () => true,
          () => false,
        );
        if (!ancestor) rebuild = `\`${source.branch}\` was rewritten upstream (force-push)`;
      }
      if (rebuild === null) {
        if (checkedBefore && after !== before) {
          // Bookkeeping: failing to keep the record costs the next clone a full read, nothing else.
          await objectFiles(mirror)
            .then(async (filesAfter) => {
              // Only files added: anything else changed meanwhile is left to the next full read.
              if (onlyAdded(filesBefore, filesAfter))
                await recordChecked(mirror, after, fingerprintOf(filesAfter));
            })
            .catch(() => undefined);
        }
        return { fetched: 'updated', rebuild: null };
      }
    }
    await quarantine(mirror);
    await this.freshMirror(mirror, source.url, source.branch, await source.token());
    return { fetched: 'cloned', rebuild };
  }

  private async freshMirror(mirror: string, url: string, branch: string, token: string): Promise<void> {
    await rm(sealPath(mirror), { force: true });
    await forgetChecked(mirror);
    await clearHistories(historyCacheDir(mirror));
    await rm(mirror, { recursive: true, force: true });
    await mkdir(dirname(mirror), { recursive: true, mode: 0o700 });
    await this.run(
      ['clone', '--quiet', '--bare', '--no-tags', '--single-branch', '--branch', branch, '--', url, mirror],
      { token, remoteUrl: url },
    );
    await sealClone(mirror, url, true);
    // Received over the network, the clone needs no full read of its own (mirror-check.ts): git
    // hashed every object as index-pack stored it and checked that the branch's history is all
    // there, and the host wrote every file just now. (A local path would be copied, not received.)
    if (/^(https?|ssh):\/\//.test(url)) {
      await this.inMirror(mirror, ['rev-parse', '--verify', `refs/heads/${branch}`])
        .then(async (r) => {
          await recordChecked(mirror, r.stdout.trim(), await objectsFingerprint(mirror));
        })
        // Bookkeeping: without the record the first clone reads the mirror in full, nothing else.
        .catch(() => undefined);
    }
  }

  private async cloneFromMirror(mirror: string, dir: string, url: string, branch: string): Promise<void> {
    // A local clone reads the mirror's config and objects: check its seal first.
    await this.verifyMirror(mirror);
    await rm(sealPath(dir), { force: true });
    await rm(dir, { recursive: true, force: true });
    await mkdir(dirname(dir), { recursive: true });
    await this.run([
      '-c',
      'protocol.file.allow=always',
      'clone',
      '--quiet',
      '--local',
      '--no-checkout',
      '--no-tags',
      '--single-branch',
      '--branch',
      branch,
      '--',
      mirror,
      dir,
    ]);
    await this.run(['-C', dir, 'remote', 'set-url', 'origin', url]);
    const tip = (await this.run(['-C', dir, 'rev-parse', '--verify', 'HEAD'])).stdout.trim();
    // A corrupt mirror fails here, not later: every commit and tree of the history is read, and
    // every file of the tip is inflated (without being written anywhere). Once per tip and set of
    // object files (mirror-check.ts): a later clone from the same, untouched objects skips it.
    if (!(await alreadyChecked(mirror, tip))) {
      // The record is bookkeeping: failing to take or keep it costs the next clone a full read, never the mirror.
      const objects = await objectsFingerprint(mirror).catch(() => null);
      await this.run(['-C', dir, 'fsck', '--connectivity-only', '--no-dangling', '--no-progress']);
      await this.run(['-C', dir, 'archive', '--output=/dev/null', 'HEAD']);
      if (objects !== null) await recordChecked(mirror, tip, objects).catch(() => undefined);
    }
    await sealClone(dir, url);
  }

  private async verifyMirror(mirror: string): Promise<Seal> {
    const r = await checkSeal(mirror, true);
    if (!r.ok)
      throw new HostGitError(`the repository mirror at ${mirror} failed its seal (${r.problem})`, false);
    return r.seal;
  }

  /** Git in a mirror (bare), after checking its seal; GIT_DIR names it outright. */
  private async inMirror(mirror: string, args: readonly string[], options: RunOptions = {}): Promise<GitRun> {
    const seal = await this.verifyMirror(mirror);
    return this.run(args, {
      ...options,
      remoteUrl: seal.url,
      env: { ...options.env, GIT_DIR: resolve(mirror) },
    });
  }

  /** The seal of the clone at `dir`, if the clone is still exactly what the host wrote. */
  async verifyPristine(dir: string): Promise<Seal> {
    const r = await checkSeal(dir);
    if (!r.ok) throw new PristineTamperedError(dir, r.problem);
    return r.seal;
  }

  /**
   * Git in the pristine clone, after checking its seal. GIT_DIR and GIT_WORK_TREE name the clone
   * outright, so no `.git` file or `core.worktree` can point git at another folder.
   */
  async inPristine(dir: string, args: readonly string[], options: RunOptions = {}): Promise<GitRun> {
    const seal = await this.verifyPristine(dir);
    const abs = resolve(dir);
    return this.run(['-C', abs, ...args], {
      ...options,
      remoteUrl: seal.url,
      env: { ...options.env, GIT_DIR: join(abs, '.git'), GIT_WORK_TREE: abs },
    });
  }

  /** A copy for the sandbox: its own object store (no hardlinks into the pristine clone). */
  async copyForSandbox(pristine: string, dir: string, commit: string, publicUrl: string): Promise<void> {
    // The local clone runs upload-pack in the pristine clone, which reads its config: check it first.
    await this.verifyPristine(pristine);
    await rm(dir, { recursive: true, force: true });
    // The one clone from a local path: allowed for this command only (submodules stay refused).
    await this.run([
      '-c',
      'protocol.file.allow=always',
      'clone',
      '--quiet',
      '--no-hardlinks',
      '--',
      pristine,
      dir,
    ]);
    await this.run(['-C', dir, 'checkout', '--quiet', '--detach', commit]);
    await this.run(['-C', dir, 'remote', 'set-url', 'origin', publicUrl]);
  }

  /**
   * The sandbox's repository without its files: `dir/.git` only, HEAD detached at `commit`, with
   * `depth` commits of history (null: all of it), for a sandbox that checks the files out itself
   * (the Docker sandbox, on its tmpfs). The host writes no file of the repository: the job's host
   * disk holds the pristine clone's index, and this `.git` until the container has its copy.
   */
  async historyForSandbox(
    pristine: string,
    dir: string,
    commit: string,
    publicUrl: string,
    depth: number | null,
    /** The repository's cached histories (history-cache.ts): copied from when there, stored to when not. */
    cache?: string,
  ): Promise<HistoryUse> {
    // Only bounded histories are kept (see history-cache.ts).
    const key = cache === undefined || depth === null ? null : historyKey(commit, depth, publicUrl);
    if (cache !== undefined && key !== null && (await copyCachedHistory(cache, key, publicUrl, dir))) {
      return { cached: true, onto: null, notStored: null };
    }
    const onto =
      cache === undefined || key === null || depth === null
        ? null
        : await this.historyOnto(pristine, dir, commit, publicUrl, depth, cache, key);
    if (onto === null) await this.makeHistory(pristine, dir, commit, publicUrl, depth);
    if (cache === undefined || key === null) return { cached: false, onto, notStored: null };
    // The job does not depend on the cache: a failure to keep a copy is reported, not thrown.
    const notStored = await storeHistory(cache, key, publicUrl, dir).then(
      () => null,
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    );
    return { cached: false, onto, notStored };
  }

  /**
   * The `.git` for `commit` fetched onto a checked copy of a kept one of an ancestor (the base moved
   * on by a few commits since the last job): the fetch packs only the newer objects, instead of
   * every file of the tip. Null, with nothing left in `dir`, when no kept entry is an ancestor, or
   * the copy has been built on too often (MAX_PACKS: each fetch adds a pack), or anything fails.
   */
  private async historyOnto(
    pristine: string,
    dir: string,
    commit: string,
    publicUrl: string,
    depth: number,
    cache: string,
    key: string,
  ): Promise<string | null> {
    // The nearest kept ancestor: the fewest commits to fetch.
    let base: { readonly key: string; readonly commit: string; readonly behind: number } | null = null;
    const bases = await historyBases(cache, depth, publicUrl, key);
    for (const b of bases.filter((x) => x.packs < MAX_PACKS).slice(0, MAX_BASES_TRIED)) {
      const ancestor = await this.inPristine(pristine, [
        'merge-base',
        '--is-ancestor',
        b.commit,
        commit,
      ]).then(
        () => true,
        () => false,
      );
      if (!ancestor) continue;
      const range = await this.inPristine(pristine, ['rev-list', '--count', `${b.commit}..${commit}`]);
      const behind = Number(range.stdout.trim());
      if (base === null || behind < base.behind) base = { ...b, behind };
    }
    if (base === null) return null;
    try {
      if (!(await copyCachedHistory(cache, base.key, publicUrl, dir))) return null;
      // The copy was checked against its manifest (the host wrote all of it); the fetch runs
      // upload-pack in the pristine clone, which reads its config: check that first.
      await this.verifyPristine(pristine);
      // Fetch offers what the refs reach as what it has, not a detached HEAD: a ref for the
      // fetch's length, so only the newer objects are packed.
      await this.run(['-C', dir, 'update-ref', BASE_REF, base.commit]);
      await this.fetchShallow(pristine, dir, commit, depth);
      await this.run(['-C', dir, 'update-ref', '-d', BASE_REF]);
      await this.run(['-C', dir, 'update-ref', '--no-deref', 'HEAD', commit]);
      return base.commit;
    } catch {
      await rm(dir, { recursive: true, force: true });
      return null;
    }
  }

  /**
   * Fetches `commit` and `depth` commits of its history from the pristine clone into the `.git` at
   * `dir` (the host's own, not yet any sandbox's), as one pack however few objects: what MAX_PACKS
   * counts, and few files to copy. FETCH_HEAD goes afterwards: it names the host's pristine clone
   * (the job's id and the host's layout), which is not the sandbox's business.
   */
  private async fetchShallow(pristine: string, dir: string, commit: string, depth: number): Promise<void> {
    await this.run([
      '-C',
      dir,
      '-c',
      'protocol.file.allow=always',
      '-c',
      'fetch.unpackLimit=1',
      'fetch',
      '--quiet',
      '--no-tags',
      `--depth=${depth}`,
      pathToFileURL(resolve(pristine)).href,
      commit,
    ]);
    await rm(join(dir, '.git', 'FETCH_HEAD'), { force: true });
  }

  private async makeHistory(
    pristine: string,
    dir: string,
    commit: string,
    publicUrl: string,
    depth: number | null,
  ): Promise<void> {
    // Both ways run upload-pack in the pristine clone, which reads its config: check it first.
    await this.verifyPristine(pristine);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dirname(dir), { recursive: true });
    if (depth === null) {
      // The whole history: a local clone copies the pack files, much cheaper than packing anew.
      await this.run([
        '-c',
        'protocol.file.allow=always',
        'clone',
        '--quiet',
        '--no-checkout',
        '--no-hardlinks',
        '--',
        pristine,
        dir,
      ]);
    } else {
      // `--template=`: no sample hooks, nothing but what git needs.
      await this.run(['init', '--quiet', '--template=', '--', dir]);
      await this.fetchShallow(pristine, dir, commit, depth);
      await this.run(['-C', dir, 'remote', 'add', 'origin', publicUrl]);
    }
    await this.run(['-C', dir, 'update-ref', '--no-deref', 'HEAD', commit]);
    if (depth === null) await this.run(['-C', dir, 'remote', 'set-url', 'origin', publicUrl]);
  }

  /**
   * The tree of `commit` in the pristine clone as a WorkspaceProbe: what the environment planner
   * reads before a sandbox exists, without any file of the repository on the host's disk. A symlink
   * anywhere on a path reads as absent (as hostProbe does), a submodule as an empty folder, and a
   * file larger than `maxBytes` as absent.
   */
  treeProbe(pristine: string, commit: string, maxBytes = 8 * 1024 * 1024): WorkspaceProbe {
    type Entry = { readonly mode: string; readonly oid: string; readonly size: number };
    const dirs = new Map<string, Promise<Map<string, Entry> | null>>();
    const list = (rel: string): Promise<Map<string, Entry> | null> => {
      let found = dirs.get(rel);
      if (found === undefined) {
        found = this.listTree(pristine, commit, rel);
        dirs.set(rel, found);
      }
      return found;
    };
    // The entry at a path, every folder on the way being a real tree; null when absent.
    const entry = async (relPath: string): Promise<Entry | null> => {
      const parts = relPath.split('/').filter((p) => p !== '' && p !== '.');
      if (parts.some((p) => p === '..')) return null;
      if (parts.length === 0) return { mode: '040000', oid: '', size: 0 };
      let dir = '';
      for (let i = 0; i < parts.length; i++) {
        const at = (await list(dir))?.get(parts[i] ?? '');
        if (at === undefined || at.mode === '120000') return null;
        if (i === parts.length - 1) return at;
        if (at.mode !== '040000') return null;
        dir = dir === '' ? (parts[i] ?? '') : `${dir}/${parts[i] ?? ''}`;
      }
      return null;
    };
    return {
      exists: async (relPath) => (await entry(relPath)) !== null,
      readText: async (relPath) => {
        const e = await entry(relPath);
        if (e === null || !/^1006[0-7]{2}$/.test(e.mode) || e.size > maxBytes) return null;
        const r = await this.inPristine(pristine, ['cat-file', 'blob', e.oid]);
        return r.stdout;
      },
      listDir: async (relPath) => {
        const e = await entry(relPath);
        if (e === null) return null;
        if (e.mode === '160000') return [];
        if (e.mode !== '040000') return null;
        const parts = relPath.split('/').filter((p) => p !== '' && p !== '.');
        return [...((await list(parts.join('/'))) ?? new Map<string, Entry>()).keys()];
      },
    };
  }

  /**
   * The instruction files' source (agent/instructions.ts) over `commit` of the pristine clone:
   * regular files only (no symlink, no submodule), read from git, never from a checkout.
   */
  instructionSource(pristine: string, commit: string): InstructionSource {
    const probe = this.treeProbe(pristine, commit);
    return {
      listFiles: async () => {
        const r = await this.inPristine(pristine, ['ls-tree', '-r', '-z', '--full-tree', commit]);
        const out: string[] = [];
        for (const line of r.stdout.split('\0')) {
          const m = /^(100644|100755) blob [0-9a-f]+\t(.*)$/s.exec(line);
          if (m?.[2] !== undefined) out.push(m[2]);
        }
        return out;
      },
      readText: (path) => probe.readText(path),
    };
  }

  /**
   * Brings `branch` of the clone's remote (or of `from`: the base repository, when the clone is a
   * fork's) into `refs/remotes/origin/<branch>` and returns its tip: what a follow-up round reads
   * the base branch's instructions from (its clone follows the PR head).
   */
  async fetchBranch(dir: string, branch: string, token: string, from?: string): Promise<string> {
    const url = from ?? (await this.verifyPristine(dir)).url;
    const ref = `refs/remotes/origin/${branch}`;
    await this.inPristine(dir, ['fetch', '--quiet', '--no-tags', '--', url, `+refs/heads/${branch}:${ref}`], {
      token,
    });
    return this.revParse(dir, ref);
  }

  /** One folder of `commit`'s tree: name → mode, object and size (`ls-tree --long`). */
  private async listTree(
    pristine: string,
    commit: string,
    rel: string,
  ): Promise<Map<string, { readonly mode: string; readonly oid: string; readonly size: number }> | null> {
    const r = await this.inPristine(pristine, ['ls-tree', '-z', '--long', `${commit}:${rel}`]).catch(
      () => null,
    );
    if (r === null) return null;
    const out = new Map<string, { readonly mode: string; readonly oid: string; readonly size: number }>();
    for (const line of r.stdout.split('\0')) {
      // `<mode> <type> <oid> <size>\t<name>`; the size is `-` for trees and submodules.
      const m = /^(\d{6}) \w+ ([0-9a-f]+) +(\d+|-)\t(.*)$/s.exec(line);
      if (m === null) continue;
      out.set(m[4] ?? '', { mode: m[1] ?? '', oid: m[2] ?? '', size: m[3] === '-' ? 0 : Number(m[3]) });
    }
    return out;
  }

  /** Whether `commit` is `tip` or one of its ancestors (both must be in the clone). */
  async isAncestor(dir: string, commit: string, tip: string): Promise<boolean> {
    // The commits of `commit`'s history that `tip` lacks: none exactly when it is an ancestor.
    const r = await this.inPristine(dir, ['rev-list', '--count', `${tip}..${commit}`, '--']);
    return r.stdout.trim() === '0';
  }

  /**
   * The paths whose content, mode or presence differs between the trees of `from` and `to`, with
   * renames split into their two paths (both sides count as changed). Paths are data (NUL-split),
   * never parsed as anything else.
   */
  async changedPaths(dir: string, from: string, to: string): Promise<string[]> {
    const r = await this.inPristine(dir, [
      'diff',
      '--no-ext-diff',
      '--no-textconv',
      '--no-renames',
      '--name-only',
      '-z',
      from,
      to,
      '--',
    ]);
    return r.stdout.split('\0').filter((p) => p !== '');
  }

  async revParse(dir: string, rev: string): Promise<string> {
    return (await this.inPristine(dir, ['rev-parse', '--verify', `${rev}^{commit}`])).stdout.trim();
  }

  /** The tip of a branch of the clone's remote (the URL it was cloned from), or null if there is none. */
  async remoteBranch(dir: string, branch: string, token: string): Promise<string | null> {
    const { url } = await this.verifyPristine(dir);
    const r = await this.inPristine(dir, ['ls-remote', '--heads', '--', url, `refs/heads/${branch}`], {
      token,
    });
    const line = r.stdout.trim().split('\n')[0] ?? '';
    return line === '' ? null : (line.split('\t')[0] ?? null);
  }

  /**
   * `branch` at `commit`, and the index holding exactly `commit`'s tree. Only the index: publishing
   * never needs the files, so none is written (and no filter or checkout driver could run).
   */
  async resetTo(dir: string, branch: string, commit: string): Promise<void> {
    await this.inPristine(dir, ['update-ref', `refs/heads/${branch}`, commit]);
    await this.inPristine(dir, ['symbolic-ref', 'HEAD', `refs/heads/${branch}`]);
    await this.inPristine(dir, ['read-tree', '--reset', commit]);
  }

  /** Applies a diff (data from the event log) to the index only. */
  async applyDiff(dir: string, diff: string): Promise<void> {
    await this.inPristine(dir, ['apply', '--cached', '--binary', '--whitespace=nowarn', '-'], {
      input: diff,
    });
  }

  /**
   * `git diff --cached --raw --numstat -z -M` against `base`: what the staged change touches, with
   * modes (the index is what will be committed). No external diff or textconv driver runs.
   */
  async stagedChanges(dir: string, base: string): Promise<string> {
    const r = await this.inPristine(dir, [
      'diff',
      '--cached',
      '--no-ext-diff',
      '--no-textconv',
      '--raw',
      '--numstat',
      '-z',
      '-M',
      base,
    ]);
    return r.stdout;
  }

  /**
   * `git diff --cached --raw -z --no-renames` against `base`: each path the staged change touches with
   * its mode and object before and after (a rename is a deletion and an addition), for the API commit.
   */
  async stagedEntries(dir: string, base: string): Promise<string> {
    const r = await this.inPristine(dir, [
      'diff',
      '--cached',
      '--no-ext-diff',
      '--no-textconv',
      '--raw',
      '--no-renames',
      '--no-abbrev',
      '-z',
      base,
    ]);
    return r.stdout;
  }

  /** The id of the index's tree (`git write-tree`): what a commit of the index would hold. */
  async writeTree(dir: string): Promise<string> {
    return (await this.inPristine(dir, ['write-tree'])).stdout.trim();
  }

  /** The size in bytes of each blob (`cat-file --batch-check`). */
  async blobSizes(dir: string, shas: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (shas.length === 0) return out;
    const r = await this.inPristine(
      dir,
      ['cat-file', '--batch-check=%(objectname) %(objecttype) %(objectsize)'],
      {
        input: `${shas.join('\n')}\n`,
      },
    );
    for (const line of r.stdout.split('\n')) {
      const [sha, type, size] = line.split(' ');
      if (sha !== undefined && type === 'blob' && size !== undefined) out.set(sha, Number(size));
    }
    return out;
  }

  /** A blob's bytes, as they are (binary files included). */
  async readBlob(dir: string, sha: string): Promise<Buffer> {
    if (!/^[0-9a-f]{40,64}$/.test(sha)) throw new HostGitError(`not an object id: ${sha}`, false);
    const seal = await this.verifyPristine(dir);
    const abs = resolve(dir);
    const env = { ...baseGitEnv(this.path), GIT_DIR: join(abs, '.git'), GIT_WORK_TREE: abs };
    return new Promise((resolvePromise, reject) => {
      execFile(
        'git',
        [...pinnedConfig(seal.url), '-C', abs, 'cat-file', 'blob', sha],
        { env, encoding: 'buffer', maxBuffer: 256 * 1024 * 1024, timeout: 60_000, killSignal: 'SIGKILL' },
        (error, stdout) => {
          if (error === null) resolvePromise(stdout);
          else reject(new HostGitError(`git cat-file failed: ${this.redact(error.message)}`, false));
        },
      );
    });
  }

  /**
   * Commits the index with this author and committer at `at` (ISO time), returning the commit id.
   * Same inputs, same id: a retry after a crash makes the same commit.
   */
  async commit(dir: string, message: string, who: Identity, at: string): Promise<string> {
    await this.inPristine(
      dir,
      ['commit', '--quiet', '--no-verify', '--no-gpg-sign', '--allow-empty-message', '-F', '-'],
      {
        input: message,
        env: {
          GIT_AUTHOR_NAME: who.name,
          GIT_AUTHOR_EMAIL: who.email,
          GIT_COMMITTER_NAME: who.name,
          GIT_COMMITTER_EMAIL: who.email,
          GIT_AUTHOR_DATE: at,
          GIT_COMMITTER_DATE: at,
        },
      },
    );
    return this.revParse(dir, 'HEAD');
  }

  /**
   * Pushes HEAD to `branch` of the clone's remote. `expect`: the tip the remote branch must still
   * have (a lease), or undefined for a plain fast-forward push.
   */
  async push(dir: string, branch: string, token: string, expect?: string): Promise<void> {
    const { url } = await this.verifyPristine(dir);
    const lease = expect === undefined ? [] : [`--force-with-lease=refs/heads/${branch}:${expect}`];
    await this.inPristine(dir, ['push', '--quiet', ...lease, '--', url, `HEAD:refs/heads/${branch}`], {
      token,
    });
  }
}
