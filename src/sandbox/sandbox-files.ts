import type { ExecResult, Sandbox } from './sandbox.js';
import { shellQuote } from './shell-session.js';

/** A path the file tools refused, with a message written for the model. */
export class PathRefused extends Error {
  override readonly name = 'PathRefused';
}

/** A file operation inside the sandbox that could not be carried out, with a message for the model. */
export class FileOpFailed extends Error {
  override readonly name = 'FileOpFailed';
}

export type FileKind = 'file' | 'directory' | 'other' | 'missing';

export interface FileStat {
  readonly kind: FileKind;
  /** Path relative to the workspace root after resolving links inside the sandbox ('.' for the root). */
  readonly rel: string;
  readonly size: number;
}

/** Files the editor reads whole; larger ones are refused (bash with head/sed can still page them). */
export const MAX_FILE_BYTES = 4 * 1024 * 1024;
const MAX_PATH_BYTES = 4096;
const OP_TIMEOUT_MS = 60_000;

/**
 * File access for the tools and the harness, carried out INSIDE the sandbox by the sandbox's own
 * harness shell (Sandbox.harnessExec), as a sandbox user. The host never opens, stats, creates or
 * removes a path in the workspace by name: a process the agent left running can swap any component
 * for a link at any moment, and on the host that would reach host files. Inside the sandbox the
 * same swap reaches only what the sandbox's users can reach anyway, so the checks below (a path
 * must resolve inside the workspace) are for the model's benefit, not the boundary.
 *
 * Untrusted values never become shell text: each operation calls a constant shell function (only
 * integers the host computed are passed), and the path and the content travel on stdin — the path
 * NUL-terminated (paths with NUL are refused here), the content as exactly N raw bytes that the
 * function always consumes, even when it refuses the operation; where it cannot (a write failing
 * midway) it ends the harness shell, and the unread bytes go with it.
 *
 * The functions are defined once per harness shell (see PRELUDE); every call first checks they
 * exist and otherwise ends the shell (exit 97) before reading anything, after which the prelude is
 * sent again and the call retried. Paths are resolved with shell builtins (`cd -P`) where possible:
 * one operation is one round trip and at most one process (`head`).
 *
 * Whatever comes back is data from an untrusted process: it is parsed defensively and only ever
 * shown to the model or recorded.
 */
export class SandboxFiles {
  private readonly prelude: string;
  private installed = false;

  constructor(private readonly sandbox: Sandbox) {
    this.prelude = prelude(sandbox.workdir);
  }

  /** Where a path lands and what it is; refuses paths that resolve outside the workspace. */
  async stat(path: string): Promise<FileStat> {
    const r = await this.call('__ia_stat', [], this.pathPayload(path));
    return this.parseStat(path, firstLine(r.output).line);
  }

  /** The bytes of a regular file, at most MAX_FILE_BYTES; refuses other kinds. */
  async read(path: string): Promise<{ readonly stat: FileStat; readonly data: Buffer }> {
    const r = await this.call('__ia_read', [MAX_FILE_BYTES + 1], this.pathPayload(path));
    const { line, rest } = firstLine(r.output);
    const stat = this.parseStat(path, line);
    if (stat.kind !== 'file') return { stat, data: Buffer.alloc(0) };
    const data = Buffer.from(rest, 'utf8');
    if (data.length > MAX_FILE_BYTES)
      throw new FileOpFailed(
        `${stat.rel} is larger than the editor handles (${MAX_FILE_BYTES} bytes); use bash (head, sed -n) to read parts of it.`,
      );
    return { stat: { ...stat, size: data.length }, data };
  }

  /** Writes a regular file (creating parent directories), replacing its content. */
  async write(path: string, content: string): Promise<FileStat> {
    const data = Buffer.from(content, 'utf8');
    const payload = Buffer.concat([this.pathPayload(path), data]);
    const r = await this.call('__ia_write', [data.length], payload);
    const { line } = firstLine(r.output);
    if (line.startsWith('error ')) throw new FileOpFailed(line.slice(6));
    if (r.exitCode === WRITE_FAILED)
      throw new FileOpFailed(`could not write ${path}: ${r.output.slice(0, 300)}`);
    return this.parseStat(path, line);
  }

  /** Removes a regular file or a link (never a link's target). */
  async remove(path: string): Promise<void> {
    const r = await this.call('__ia_rm', [], this.pathPayload(path));
    const { line } = firstLine(r.output);
    if (line.startsWith('error ')) throw new FileOpFailed(line.slice(6));
    this.parseStat(path, line);
  }

  /** Up to `limit` entries below a directory, two levels deep, skipping VCS and dependency folders. */
  async list(path: string, limit = 400): Promise<{ readonly stat: FileStat; readonly entries: string[] }> {
    const r = await this.call('__ia_list', [limit], this.pathPayload(path));
    const { line, rest } = firstLine(r.output);
    const stat = this.parseStat(path, line);
    const entries = rest.split('\n').filter((l) => l !== '');
    return { stat, entries: entries.slice(0, limit) };
  }

  private pathPayload(path: string): Buffer {
    if (path.includes('\0')) throw new PathRefused('the path contains a NUL byte');
    const bytes = Buffer.from(path, 'utf8');
    if (bytes.length === 0) throw new PathRefused('the path is empty');
    if (bytes.length > MAX_PATH_BYTES) throw new PathRefused('the path is too long');
    return Buffer.concat([bytes, Buffer.from([0])]);
  }

  /**
   * Calls one function of the prelude. When the harness shell lacks it (a new or replaced shell),
   * the call ends that shell before reading its input; the prelude is installed and the call
   * retried once.
   */
  private async call(fn: string, args: readonly number[], stdin: Buffer): Promise<ExecResult> {
    const command = `declare -F ${fn} >/dev/null || exit ${MISSING_PRELUDE}; ${fn} ${args.map(String).join(' ')}`;
    for (let attempt = 0; ; attempt++) {
      if (!this.installed) {
        const p = await this.sandbox.harnessExec(this.prelude, { timeoutMs: OP_TIMEOUT_MS });
        if (p.exitCode !== 0)
          throw new FileOpFailed(`the sandbox's file helper did not start: ${p.output.slice(0, 300)}`);
        this.installed = true;
      }
      const r = await this.sandbox.harnessExec(command, { timeoutMs: OP_TIMEOUT_MS, stdin });
      if (r.killed !== null) throw new FileOpFailed(`the file operation was stopped (${r.killed})`);
      if (r.exitCode === MISSING_PRELUDE && r.shellRestarted && attempt === 0) {
        this.installed = false;
        continue;
      }
      return r;
    }
  }

  /** `<kind> <size> <rel>`, or `outside` when the path resolves out of the workspace. */
  private parseStat(path: string, line: string): FileStat {
    if (line === 'outside')
      throw new PathRefused(
        `${path} is outside the workspace (or a link that leads out of it); use a path inside ${this.sandbox.workdir}`,
      );
    const m = /^(file|directory|other|missing) (\d+) (.*)$/.exec(line);
    if (m === null) throw new FileOpFailed(`unexpected answer from the sandbox: ${line.slice(0, 200)}`);
    const rel = m[3] === '' ? '.' : (m[3] ?? '.');
    return { kind: m[1] as FileKind, size: Number(m[2]), rel };
  }
}

/** Exit status of a call whose function is not defined in this harness shell (it then exits). */
const MISSING_PRELUDE = 97;
/** Exit status of a write that failed midway: the shell exits so the unread content goes with it. */
const WRITE_FAILED = 98;

function firstLine(output: string): { line: string; rest: string } {
  const nl = output.indexOf('\n');
  return nl < 0 ? { line: output, rest: '' } : { line: output.slice(0, nl), rest: output.slice(nl + 1) };
}

/**
 * The functions every operation calls. `__ia_resolve` reads the NUL-terminated path from stdin and
 * sets `r` (absolute, links resolved), `rel` (relative to the workspace) and `kind`; it resolves the
 * parent with `cd -P` (a builtin) and falls back to `realpath -m` only for a missing parent or a link
 * at the end. The shell's cwd is put back to the workspace root after every use of `cd`.
 */
function prelude(workdir: string): string {
  return (
    `__IA_W=${shellQuote(workdir)}\nCDPATH=\n` +
    String.raw`
__ia_line() {
  if [ "$kind" = outside ]; then echo outside; else printf '%s 0 %s
' "$kind" "$rel"; fi
}
__ia_resolve() {
  local p d b
  IFS= read -r -d '' p
  case "$p" in /*) ;; *) p="$__IA_W/$p" ;; esac
  while [ "${'$'}{#p}" -gt 1 ] && [ "${'$'}{p%/}" != "$p" ]; do p=${'$'}{p%/}; done
  d=${'$'}{p%/*}; b=${'$'}{p##*/}; [ -n "$d" ] || d=/
  if [ "$b" = . ] || [ "$b" = .. ]; then d=$p; b=; fi
  r=
  if cd -P -- "$d" 2>/dev/null; then
    d=$PWD
    cd -- "$__IA_W" 2>/dev/null || cd /
    if [ "$d" = / ]; then r=/$b; else r=$d${'$'}{b:+/$b}; fi
    if [ -n "$b" ] && [ -L "$r" ]; then r=$(realpath -m -- "$r" 2>/dev/null) || r=; fi
  else
    r=$(realpath -m -- "$p" 2>/dev/null) || r=
  fi
  case "$r" in "$__IA_W") rel= ;; "$__IA_W"/*) rel=${'$'}{r#"$__IA_W"/} ;; *) rel=//outside ;; esac
  if [ "$rel" = //outside ]; then kind=outside
  elif [ -L "$r" ]; then kind=other
  elif [ -f "$r" ]; then kind=file
  elif [ -d "$r" ]; then kind=directory
  elif [ -e "$r" ]; then kind=other
  else kind=missing; fi
}
__ia_stat() { __ia_resolve; __ia_line; }
__ia_read() {
  __ia_resolve; __ia_line
  if [ "$kind" = file ]; then head -c "$1" -- "$r"; fi
  return 0
}
__ia_write() {
  local n=$1
  __ia_resolve
  if [ "$kind" = outside ]; then head -c "$n" >/dev/null; echo outside; return 0; fi
  if [ "$kind" != file ] && [ "$kind" != missing ]; then
    head -c "$n" >/dev/null; echo "error $rel exists and is not a regular file."; return 0
  fi
  if [ ! -d "${'$'}{r%/*}" ] && ! mkdir -p -- "${'$'}{r%/*}" 2>/dev/null; then
    head -c "$n" >/dev/null; echo "error could not create the directory of $rel (a file is in the way?)"; return 0
  fi
  if ! { exec 3>"$r"; } 2>/dev/null; then
    head -c "$n" >/dev/null; echo "error could not open $rel for writing"; return 0
  fi
  if head -c "$n" >&3; then
    exec 3>&-; kind=file; __ia_line
  else
    exec 3>&-; echo "error could not write $rel (is the disk full?)"; exit 98
  fi
}
__ia_rm() {
  __ia_resolve
  if [ "$kind" = outside ]; then echo outside
  elif [ -L "$r" ] || [ "$kind" = file ]; then
    if rm -f -- "$r" 2>/dev/null; then kind=missing; __ia_line; else echo "error could not remove $rel"; fi
  else echo "error $rel is not a file."; fi
}
__ia_list() {
  __ia_resolve; __ia_line
  [ "$kind" = directory ] || return 0
  find "$r" -mindepth 1 -maxdepth 2 \( -type d \( -name .git -o -name node_modules -o -name __pycache__ -o -name .venv -o -name target -o -name dist \) -prune -printf '%P/
' \) -o \( -type d -printf '%P/
' \) -o -printf '%P
' 2>/dev/null | LC_ALL=C sort | head -n "$1" | while IFS= read -r e; do
    if [ -n "$rel" ]; then printf '%s/%s
' "$rel" "$e"; else printf '%s
' "$e"; fi
  done
  return 0
}
`
  );
}
