import type { Sandbox } from '../sandbox/sandbox.js';
import { GENERATED_PATTERNS, type GeneratedPattern, type LeftOut } from '../sandbox/generated-files.js';
import { shellQuote } from '../sandbox/shell-session.js';
import type { RunnerConfigEntry, TreeChange, TreeEntry } from '../testing/runner-config.js';

/** Git with every repo-controlled hook that could run code switched off. */
const GIT = 'git -c core.fsmonitor=false -c core.hooksPath=/dev/null -c core.quotepath=off -c color.ui=never';

export class WorkspaceGitError extends Error {
  override readonly name = 'WorkspaceGitError';
}

export interface Snapshot {
  readonly tree: string;
}

/**
 * Checkpoints of the workspace as git trees, taken inside the sandbox by the harness shell (so
 * repository content, and the repository's own git config, is only ever interpreted where
 * untrusted code already runs; what comes out is data). A private index file keeps `git add -A` cheap:
 * only files whose stat data changed are hashed again. Ignored files (build output, node_modules)
 * are not part of a checkpoint.
 */
export class WorkspaceGit {
  private constructor(
    private readonly sandbox: Sandbox,
    private readonly indexFile: string,
    private readonly gitDir: string,
    /** The generated-file patterns this repository tracks nothing under (generated-files.ts). */
    private readonly generated: readonly GeneratedPattern[],
  ) {}

  static async open(sandbox: Sandbox): Promise<WorkspaceGit> {
    const r = await run(sandbox, `${GIT} rev-parse --absolute-git-dir`);
    const gitDir = r.trim();
    const indexFile = `${gitDir}/issue-agent-index`;
    await run(
      sandbox,
      `[ -f ${shellQuote(indexFile)} ] || { [ -f ${shellQuote(`${gitDir}/index`)} ] && cp ${shellQuote(`${gitDir}/index`)} ${shellQuote(indexFile)}; } || true`,
    );
    return new WorkspaceGit(sandbox, indexFile, gitDir, await generatedPatterns(sandbox, gitDir));
  }

  /**
   * `git add -A` into the private index, leaving out what test runs generate. The ignore file sits in
   * the workspace's git directory, where the agent's commands can write: it is written again from the
   * harness's patterns in the same command, so what a checkpoint leaves out is never the agent's choice
   * (an ignore file of `*` would otherwise keep every new file out of the change and out of the
   * fresh sandbox that proves it).
   */
  private addAll(): string {
    const file = shellQuote(`${this.gitDir}/${GENERATED_FILE}`);
    const lines = this.generated.map((p) => shellQuote(p.ignore)).join(' ');
    return `printf '%s\\n' ${lines} > ${file} && GIT_INDEX_FILE=${shellQuote(this.indexFile)} ${GIT} -c core.excludesFile=${file} add -A`;
  }

  /**
   * What the checkpoints leave out now: for each generated-file pattern, the untracked files it
   * matches that the repository's own ignore rules would have let in. Counts only, no paths.
   */
  async leftOut(): Promise<LeftOut[]> {
    if (this.generated.length === 0) return [];
    const idx = `GIT_INDEX_FILE=${shellQuote(this.indexFile)}`;
    // The patterns are the harness's constants, so they may be written into the command.
    // Each file counts once, under the first pattern that matches it. One listing of all the
    // patterns first (pathspecs are or-ed): nothing there, the usual case, is every count 0 without
    // a git process per pattern (this runs at every checkpoint).
    const all = this.generated.map((p) => ` ${shellQuote(`:(glob)${p.pathspec}`)}`).join('');
    const any = `[ -n "$(${idx} ${GIT} ls-files -o --exclude-standard --${all} | head -c 1)" ]`;
    const script = this.generated
      .map((p, i) => {
        const earlier = this.generated
          .slice(0, i)
          .map((q) => ` ${shellQuote(`:(exclude,glob)${q.pathspec}`)}`)
          .join('');
        return `printf '%s %s\\n' ${String(i)} "$(${idx} ${GIT} ls-files -o --exclude-standard -- ${shellQuote(`:(glob)${p.pathspec}`)}${earlier} | wc -l)"`;
      })
      .join(' && ');
    const out = await run(this.sandbox, `if ${any}; then ${script}; fi`);
    const counts: LeftOut[] = [];
    for (const line of out.split('\n')) {
      const m = /^(\d+) (\d+)$/.exec(line.trim());
      const pattern = m === null ? undefined : this.generated[Number(m[1])];
      if (m !== null && pattern !== undefined && Number(m[2]) > 0)
        counts.push({ pattern: pattern.ignore, files: Number(m[2]) });
    }
    return counts;
  }

  async head(): Promise<{ commit: string; tree: string }> {
    const out = (await run(this.sandbox, `${GIT} rev-parse HEAD 'HEAD^{tree}'`)).trim().split('\n');
    const [commit, tree] = out;
    if (commit === undefined || tree === undefined)
      throw new WorkspaceGitError('the repository has no commit yet');
    return { commit, tree };
  }

  /** The working tree (tracked and untracked, minus ignored files) as a tree object. */
  async snapshot(): Promise<string> {
    const idx = `GIT_INDEX_FILE=${shellQuote(this.indexFile)}`;
    const out = await run(this.sandbox, `${this.addAll()} && ${idx} ${GIT} write-tree`);
    // The tree id is write-tree's one line of output; `add` may warn (line endings, a nested
    // repository) on the same stream before it.
    const tree = out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(l))
      .at(-1);
    if (tree === undefined)
      throw new WorkspaceGitError(`git write-tree gave no tree id: ${out.slice(0, 500)}`);
    return tree;
  }

  async diff(fromTree: string, toTree: string): Promise<{ diff: string; truncated: boolean; files: number }> {
    const r = await this.sandbox.harnessExec(
      `(cd ${shellQuote(this.sandbox.workdir)} && ${GIT} diff --no-ext-diff --no-textconv --binary ${fromTree} ${toTree})`,
      { timeoutMs: 60_000 },
    );
    if (r.exitCode !== 0) throw new WorkspaceGitError(`git diff failed: ${r.output.slice(0, 500)}`);
    const files = (
      await run(this.sandbox, `${GIT} diff --no-ext-diff --name-only ${fromTree} ${toTree} | wc -l`)
    ).trim();
    return { diff: r.output, truncated: r.truncated, files: Number(files) };
  }

  /** Paths added or changed (not deleted) between two trees. */
  async changedFiles(fromTree: string, toTree: string): Promise<string[]> {
    if (fromTree === toTree) return [];
    const out = await run(
      this.sandbox,
      `${GIT} diff --no-ext-diff --name-only --diff-filter=d -z ${fromTree} ${toTree}`,
    );
    return out.split('\0').filter((p) => p !== '');
  }

  async diffStat(fromTree: string, toTree: string): Promise<string> {
    if (fromTree === toTree) return '';
    return (await run(this.sandbox, `${GIT} diff --no-ext-diff --stat=100 ${fromTree} ${toTree}`)).trimEnd();
  }

  /**
   * Makes the working tree equal to a checkpoint: from the tree object when the repository still has
   * it (same machine), else from the base commit plus the recorded diff (a fresh clone elsewhere,
   * another worker host). Either way the result is checked: the working tree's snapshot must be the
   * checkpoint's tree, file for file, or the run stops rather than continue on other files.
   */
  async restore(baseTree: string, tree: string, diff: string | null): Promise<'object' | 'diff'> {
    const idx = `GIT_INDEX_FILE=${shellQuote(this.indexFile)}`;
    // A fresh copy of the same base (another host, the CLI's new copy) has the base's files but not
    // its tree object when the base held uncommitted changes: a snapshot writes it.
    await this.snapshot();
    const has = await this.sandbox.harnessExec(
      `(cd ${shellQuote(this.sandbox.workdir)} && ${GIT} cat-file -e ${tree}^{tree})`,
      {
        timeoutMs: 30_000,
      },
    );
    if (has.exitCode === 0) {
      await run(this.sandbox, `${this.addAll()} && ${idx} ${GIT} read-tree --reset -u ${tree}`);
      await this.expectTree(tree, 'from its tree object');
      return 'object';
    }
    if (diff === null)
      throw new WorkspaceGitError(
        `checkpoint ${tree} is not in this repository and its diff was too large to record`,
      );
    await run(this.sandbox, `${this.addAll()} && ${idx} ${GIT} read-tree --reset -u ${baseTree}`);
    // The diff is data from the event log: it travels on stdin, never inside the command text.
    const patch = Buffer.from(diff.endsWith('\n') ? diff : `${diff}\n`, 'utf8');
    const r = await this.sandbox.harnessExec(
      // `cat` drains what git apply left unread, so no patch byte is ever read as shell input.
      `head -c ${patch.length} | { (cd ${shellQuote(this.sandbox.workdir)} && ${GIT} apply --binary --whitespace=nowarn -); __ia_s=$?; cat >/dev/null; exit $__ia_s; }`,
      { timeoutMs: 60_000, stdin: patch },
    );
    if (r.exitCode !== 0)
      throw new WorkspaceGitError(`could not re-apply the checkpoint diff: ${r.output.slice(0, 500)}`);
    await this.expectTree(tree, 'from the checkpoint diff');
    return 'diff';
  }

  /**
   * Makes the working tree the base tree with only `paths` taken from `tree` (the change's test files
   * on the code before it). The paths are data from a diff in the sandbox: they travel on stdin as
   * NUL-separated literal pathspecs, never in the command text. Undo with `restore`.
   */
  async checkoutOnly(baseTree: string, tree: string, paths: readonly string[]): Promise<void> {
    const idx = `GIT_INDEX_FILE=${shellQuote(this.indexFile)}`;
    await run(this.sandbox, `${this.addAll()} && ${idx} ${GIT} read-tree --reset -u ${baseTree}`);
    if (paths.length === 0) return;
    const list = Buffer.from(paths.map((p) => `${p}\0`).join(''), 'utf8');
    const r = await this.sandbox.harnessExec(
      // `cat` drains what git left unread, so no byte of the list is ever read as shell input.
      `head -c ${list.length} | { (cd ${shellQuote(this.sandbox.workdir)} && ${idx} GIT_LITERAL_PATHSPECS=1 ${GIT} checkout ${tree} --pathspec-from-file=- --pathspec-file-nul); __ia_s=$?; cat >/dev/null; exit $__ia_s; }`,
      { timeoutMs: 60_000, stdin: list },
    );
    if (r.exitCode !== 0)
      throw new WorkspaceGitError(`could not check out the change's test files: ${r.output.slice(0, 500)}`);
  }

  /**
   * Every path that differs between two trees, with each side's entry (none: absent), without
   * rename detection. Paths come back byte for byte (base64 on the way out): a path whose name is
   * not UTF-8 cannot be named again exactly, so it is refused rather than misread.
   */
  async treeChanges(fromTree: string, toTree: string): Promise<TreeChange[]> {
    if (fromTree === toTree) return [];
    const out = await this.binary(
      `${GIT} diff-tree -r --no-renames --no-abbrev -z ${hex(fromTree)} ${hex(toTree)}`,
    );
    return parseRaw(out).map(({ path, src, dst }) => ({ path, base: src, change: dst }));
  }

  /** The blobs of `tree` whose paths match git glob patterns (the harness's constants, not data). */
  async listTree(tree: string, globs: readonly string[]): Promise<TreeEntry[]> {
    if (globs.length === 0) return [];
    const specs = globs.map((g) => shellQuote(`:(glob)${g}`)).join(' ');
    const out = await this.binary(
      `__ia_e=$(${GIT} hash-object -t tree --stdin </dev/null) && ${GIT} diff-tree -r --no-renames --no-abbrev -z "$__ia_e" ${hex(tree)} -- ${specs}`,
    );
    return parseRaw(out).flatMap(({ dst }) => (dst === null ? [] : [dst]));
  }

  /** Which of `paths` are blobs (or links) of `tree`; the paths travel on stdin. Mode unknown: ''. */
  async findInTree(tree: string, paths: readonly string[]): Promise<TreeEntry[]> {
    const asked = paths.filter((p) => p !== '' && !p.includes('\n'));
    if (asked.length === 0) return [];
    const input = Buffer.from(asked.map((p) => `${hex(tree)}:${p}\n`).join(''), 'utf8');
    const lines = utf8(
      await this.binary(`${GIT} cat-file --batch-check='%(objectname) %(objecttype)'`, input),
    ).split('\n');
    return asked.flatMap((path, i) => {
      const m = /^([0-9a-f]{40}(?:[0-9a-f]{24})?) blob$/.exec(lines[i] ?? '');
      return m === null ? [] : [{ path, mode: '', blob: m[1] ?? '' }];
    });
  }

  /** Blobs' contents as UTF-8 text, by id; blobs larger than `maxBytes` are left out. */
  async readBlobs(blobs: readonly string[], maxBytes: number): Promise<Map<string, string>> {
    const ids = [...new Set(blobs)].filter((b) => /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(b));
    const texts = new Map<string, string>();
    if (ids.length === 0) return texts;
    const sizes = utf8(
      await this.binary(
        `${GIT} cat-file --batch-check='%(objectname) %(objecttype) %(objectsize)'`,
        Buffer.from(ids.map((b) => `${b}\n`).join('')),
      ),
    ).split('\n');
    const wanted: { id: string; size: number }[] = [];
    ids.forEach((id, i) => {
      const m = /^([0-9a-f]+) blob (\d+)$/.exec(sizes[i] ?? '');
      if (m?.[1] === id && Number(m[2]) <= maxBytes) wanted.push({ id, size: Number(m[2]) });
    });
    // A few hundred KiB per call, so the output is never cut by the capture.
    for (let start = 0; start < wanted.length;) {
      let end = start;
      let total = 0;
      while (end < wanted.length && (end === start || total + (wanted[end]?.size ?? 0) <= 192 * 1024)) {
        total += wanted[end]?.size ?? 0;
        end++;
      }
      const chunk = wanted.slice(start, end);
      const out = await this.binary(
        `${GIT} cat-file --batch`,
        Buffer.from(chunk.map((b) => `${b.id}\n`).join('')),
      );
      let at = 0;
      for (const b of chunk) {
        const nl = out.indexOf(0x0a, at);
        const header = nl < 0 ? '' : out.subarray(at, nl).toString('latin1');
        if (header !== `${b.id} blob ${b.size}`)
          throw new WorkspaceGitError(`git cat-file gave an unexpected header: ${header.slice(0, 100)}`);
        texts.set(b.id, out.subarray(nl + 1, nl + 1 + b.size).toString('utf8'));
        at = nl + 1 + b.size + 1;
      }
      start = end;
    }
    return texts;
  }

  /**
   * `tree` with `entries` put in place (a blob of the base, a path removed, or new content written
   * as a blob), built in an index of its own; the result is checked to differ from `tree` in those
   * paths alone, exactly as asked. Paths and contents travel on stdin.
   */
  async treeWith(tree: string, entries: readonly RunnerConfigEntry[]): Promise<string> {
    if (entries.length === 0) return tree;
    const zero = '0'.repeat(hex(tree).length);
    const want = new Map<string, { mode: string; blob: string } | null>();
    for (const e of entries) {
      if ('remove' in e) want.set(e.path, null);
      else if ('content' in e) want.set(e.path, { mode: '100644', blob: await this.writeBlob(e.content) });
      else want.set(e.path, { mode: e.mode, blob: e.blob });
    }
    const info = Buffer.concat(
      [...want].map(([path, v]) =>
        Buffer.from(v === null ? `0 ${zero}\t${path}\0` : `${v.mode} ${hex(v.blob)}\t${path}\0`, 'utf8'),
      ),
    );
    const idx = `GIT_INDEX_FILE=${shellQuote(`${this.gitDir}/issue-agent-guard-index`)}`;
    const r = await this.sandbox.harnessExec(
      `head -c ${info.length} | (cd ${shellQuote(this.sandbox.workdir)} && rm -f ${shellQuote(`${this.gitDir}/issue-agent-guard-index`)} && ${idx} ${GIT} read-tree ${hex(tree)} && ${idx} ${GIT} update-index -z --index-info && ${idx} ${GIT} write-tree; __ia_s=$?; cat >/dev/null; exit $__ia_s)`,
      { timeoutMs: 60_000, stdin: info },
    );
    const made = lastTreeId(r.output);
    if (r.exitCode !== 0 || made === undefined)
      throw new WorkspaceGitError(`could not build the tree to test: ${r.output.slice(0, 500)}`);
    // Nothing but the asked-for paths differ, each as asked.
    const diff = await this.treeChanges(tree, made);
    const ok = diff.every((d) => {
      const w = want.get(d.path);
      if (w === undefined) return false;
      return w === null ? d.change === null : d.change?.blob === w.blob && d.change.mode === w.mode;
    });
    if (!ok) throw new WorkspaceGitError(`the tree built to test (${made}) is not the one asked for`);
    return made;
  }

  /**
   * The working tree's `entries` made as in `tree` (checked out from it) or removed, leaving every
   * other file as it is: for a sandbox whose working tree holds a change applied over the base and
   * files a setup made, which a whole-tree checkout would remove. Paths travel on stdin.
   */
  async writePaths(tree: string, entries: readonly RunnerConfigEntry[]): Promise<void> {
    const removed = entries.filter((e) => 'remove' in e).map((e) => e.path);
    const written = entries.filter((e) => !('remove' in e)).map((e) => e.path);
    if (removed.length > 0) {
      const list = Buffer.from(removed.map((p) => `${p}\0`).join(''), 'utf8');
      const r = await this.sandbox.harnessExec(
        `head -c ${list.length} | (cd ${shellQuote(this.sandbox.workdir)} && xargs -0 rm -f --; __ia_s=$?; cat >/dev/null; exit $__ia_s)`,
        { timeoutMs: 60_000, stdin: list },
      );
      if (r.exitCode !== 0) throw new WorkspaceGitError(`could not remove files: ${r.output.slice(0, 500)}`);
    }
    if (written.length > 0) {
      const list = Buffer.from(written.map((p) => `${p}\0`).join(''), 'utf8');
      const index = `${this.gitDir}/issue-agent-guard-index`;
      const idx = `GIT_INDEX_FILE=${shellQuote(index)}`;
      const r = await this.sandbox.harnessExec(
        `head -c ${list.length} | (cd ${shellQuote(this.sandbox.workdir)} && rm -f ${shellQuote(index)} && ${idx} ${GIT} read-tree ${hex(tree)} && ${idx} ${GIT} checkout-index -f -z --stdin; __ia_s=$?; cat >/dev/null; exit $__ia_s)`,
        { timeoutMs: 60_000, stdin: list },
      );
      if (r.exitCode !== 0) throw new WorkspaceGitError(`could not write files: ${r.output.slice(0, 500)}`);
    }
  }

  /**
   * The tree a patch gives when applied to `baseTree`, made in an index of its own (`apply
   * --cached`), so the working tree and its ignore rules play no part: every path the patch
   * touches is in the result. Null, with git's words, when the patch does not apply.
   */
  async appliedTree(baseTree: string, patch: string): Promise<{ tree: string } | { error: string }> {
    const bytes = Buffer.from(patch.endsWith('\n') ? patch : `${patch}\n`, 'utf8');
    const index = `${this.gitDir}/issue-agent-guard-index`;
    const idx = `GIT_INDEX_FILE=${shellQuote(index)}`;
    const r = await this.sandbox.harnessExec(
      `head -c ${bytes.length} | (cd ${shellQuote(this.sandbox.workdir)} && rm -f ${shellQuote(index)} && ${idx} ${GIT} read-tree ${hex(baseTree)} && ${idx} ${GIT} apply --cached --binary --whitespace=nowarn - && ${idx} ${GIT} write-tree; __ia_s=$?; cat >/dev/null; exit $__ia_s)`,
      { timeoutMs: 60_000, stdin: bytes },
    );
    const tree = lastTreeId(r.output);
    return r.exitCode === 0 && tree !== undefined ? { tree } : { error: r.output.trim().slice(0, 1000) };
  }

  /** Writes `content` as a blob of the repository; its id. The content travels on stdin. */
  private async writeBlob(content: string): Promise<string> {
    const bytes = Buffer.from(content, 'utf8');
    const r = await this.sandbox.harnessExec(
      `head -c ${bytes.length} | (cd ${shellQuote(this.sandbox.workdir)} && ${GIT} hash-object -w --stdin; __ia_s=$?; cat >/dev/null; exit $__ia_s)`,
      { timeoutMs: 60_000, stdin: bytes },
    );
    const id = lastTreeId(r.output);
    if (r.exitCode !== 0 || id === undefined)
      throw new WorkspaceGitError(`could not write a blob: ${r.output.slice(0, 500)}`);
    return id;
  }

  /**
   * A git command's stdout, byte for byte: base64 on the way out (the harness reads output as
   * text), stderr dropped, the exit status kept through the pipe.
   */
  private async binary(command: string, stdin?: Buffer): Promise<Buffer> {
    const body = `(set -o pipefail; cd ${shellQuote(this.sandbox.workdir)} && ${command} 2>/dev/null | base64 -w0)`;
    const r = await this.sandbox.harnessExec(
      stdin === undefined
        ? body
        : `head -c ${stdin.length} | { ${body}; __ia_s=$?; cat >/dev/null; exit $__ia_s; }`,
      { timeoutMs: 60_000, ...(stdin === undefined ? {} : { stdin }) },
    );
    if (r.exitCode !== 0 || r.truncated)
      throw new WorkspaceGitError(
        `${command.split(' ').slice(0, 8).join(' ')} failed (exit ${String(r.exitCode)})${r.truncated ? ': its output was too large' : ''}`,
      );
    return Buffer.from(r.output.trim(), 'base64');
  }

  private async expectTree(tree: string, how: string): Promise<void> {
    const rebuilt = await this.snapshot();
    if (rebuilt !== tree)
      throw new WorkspaceGitError(
        `the workspace rebuilt ${how} is tree ${rebuilt}, not the checkpoint's ${tree}`,
      );
  }
}

/** An object id, checked: ids are interpolated into commands. */
function hex(id: string): string {
  if (!/^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(id))
    throw new WorkspaceGitError(`not an object id: ${id.slice(0, 80)}`);
  return id;
}

function lastTreeId(out: string): string | undefined {
  return out
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(l))
    .at(-1);
}

const strict = new TextDecoder('utf-8', { fatal: true });

function utf8(bytes: Buffer): string {
  try {
    return strict.decode(bytes);
  } catch {
    throw new WorkspaceGitError('git named a path that is not valid UTF-8');
  }
}

/** `diff-tree --raw -z` records: `:srcmode dstmode srcsha dstsha status` NUL path NUL. */
function parseRaw(out: Buffer): { path: string; src: TreeEntry | null; dst: TreeEntry | null }[] {
  const fields = utf8(out).split('\0');
  const records: { path: string; src: TreeEntry | null; dst: TreeEntry | null }[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const m = /^:(\d{6}) (\d{6}) ([0-9a-f]+) ([0-9a-f]+) [A-Z]\d*$/.exec(fields[i] ?? '');
    const path = fields[i + 1] ?? '';
    if (m === null || path === '') throw new WorkspaceGitError(`git diff-tree gave an unexpected record`);
    const [, srcMode = '', dstMode = '', srcId = '', dstId = ''] = m;
    records.push({
      path,
      src: /^0+$/.test(srcMode) ? null : { path, mode: srcMode, blob: srcId },
      dst: /^0+$/.test(dstMode) ? null : { path, mode: dstMode, blob: dstId },
    });
  }
  return records;
}

/** The ignore file of generated-file patterns, in the sandbox's git directory. */
const GENERATED_FILE = 'issue-agent-generated';

/**
 * The generated-file patterns under which the repository tracks nothing. Decided once per
 * workspace, on its first open (the base, before any edit; the same base gives the same answer on
 * every host), and kept as indices into the harness's constants: what is read back selects among
 * them and is never written into a command. The ignore file is written from the constants before
 * every `git add`.
 */
async function generatedPatterns(sandbox: Sandbox, gitDir: string): Promise<GeneratedPattern[]> {
  const file = `${gitDir}/${GENERATED_FILE}`;
  const list = shellQuote(`${file}.list`);
  // A repository that tracks no file under any pattern (the usual case) keeps them all: one git
  // process for that answer, one per pattern only otherwise.
  const all = GENERATED_PATTERNS.map((p) => ` ${shellQuote(`:(glob)${p.pathspec}`)}`).join('');
  const each = GENERATED_PATTERNS.map(
    (p, i) =>
      `if [ -z "$(${GIT} ls-files -- ${shellQuote(`:(glob)${p.pathspec}`)} | head -c 1)" ]; then echo ${String(i)}; fi`,
  ).join('; ');
  const checks = `if [ -z "$(${GIT} ls-files --${all} | head -c 1)" ]; then printf '%s\\n' ${GENERATED_PATTERNS.map((_, i) => String(i)).join(' ')}; else ${each}; fi`;
  const out = await run(
    sandbox,
    `{ [ -f ${list} ] || { { ${checks}; } > ${list}.tmp && mv ${list}.tmp ${list}; }; } && cat ${list}`,
  );
  const kept = new Set(out.split('\n').map((l) => l.trim()));
  const patterns = GENERATED_PATTERNS.filter((_, i) => kept.has(String(i)));
  // The ignore file itself is written before each `git add` (addAll).
  return patterns;
}

async function run(sandbox: Sandbox, command: string): Promise<string> {
  const r = await sandbox.harnessExec(`(cd ${shellQuote(sandbox.workdir)} && ${command})`, {
    timeoutMs: 60_000,
  });
  if (r.exitCode !== 0)
    throw new WorkspaceGitError(
      `${command.split(' ').slice(0, 8).join(' ')} failed: ${r.output.slice(0, 500)}`,
    );
  return r.output;
}
