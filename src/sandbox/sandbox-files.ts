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
 * harness shell, as the sandbox user. The host never opens, stats, creates or removes a path in the
 * workspace by name: a process the agent left running can swap any component for a link at any
 * moment, and on the host that would reach host files. Inside the sandbox the same swap reaches
 * only what the sandbox user can reach anyway, so the checks below (a path must resolve inside the
 * workspace) are for the model's benefit, not the boundary.
 *
 * Untrusted values never become shell text: each operation is a constant script (only integers the
 * host computed are spliced in), and the path and the content travel on the script's stdin — the
 * path NUL-terminated (paths with NUL are refused here), the content as exactly N raw bytes that the
 * script always consumes, even when it refuses the operation.
 *
 * Whatever comes back is data from an untrusted process: it is parsed defensively and only ever
 * shown to the model or recorded.
 */
export class SandboxFiles {
  private readonly resolve: string;

  constructor(private readonly sandbox: Sandbox) {
    this.resolve = resolveScript(sandbox.workdir);
  }

  /** Where a path lands and what it is; refuses paths that resolve outside the workspace. */
  async stat(path: string): Promise<FileStat> {
    const r = await this.run(`${this.resolve}\nstat_line\n`, this.pathPayload(path));
    return this.parseStat(path, firstLine(r.output).line);
  }

  /** The bytes of a regular file, at most MAX_FILE_BYTES; refuses other kinds. */
  async read(path: string): Promise<{ readonly stat: FileStat; readonly data: Buffer }> {
    const r = await this.run(readScript(this.resolve, MAX_FILE_BYTES), this.pathPayload(path));
    const { line, rest } = firstLine(r.output);
    const stat = this.parseStat(path, line);
    if (stat.kind !== 'file') return { stat, data: Buffer.alloc(0) };
    if (stat.size > MAX_FILE_BYTES)
      throw new FileOpFailed(
        `${stat.rel} is ${stat.size} bytes, more than the editor handles (${MAX_FILE_BYTES}); use bash (head, sed -n) to read parts of it.`,
      );
    return { stat, data: Buffer.from(rest, 'utf8') };
  }

  /** Writes a regular file (creating parent directories), replacing its content. */
  async write(path: string, content: string): Promise<FileStat> {
    const data = Buffer.from(content, 'utf8');
    const payload = Buffer.concat([this.pathPayload(path), data]);
    const r = await this.run(writeScript(this.resolve, data.length), payload);
    const { line } = firstLine(r.output);
    if (line.startsWith('error ')) throw new FileOpFailed(line.slice(6));
    return this.parseStat(path, line);
  }

  /** Removes a regular file or a link (never a link's target). */
  async remove(path: string): Promise<void> {
    const r = await this.run(removeScript(this.resolve), this.pathPayload(path));
    const { line } = firstLine(r.output);
    if (line.startsWith('error ')) throw new FileOpFailed(line.slice(6));
    this.parseStat(path, line);
  }

  /** Up to `limit` entries below a directory, two levels deep, skipping VCS and dependency folders. */
  async list(path: string, limit = 400): Promise<{ readonly stat: FileStat; readonly entries: string[] }> {
    const r = await this.run(listScript(this.resolve, limit), this.pathPayload(path));
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

  private async run(script: string, stdin: Buffer): Promise<ExecResult> {
    const r = await this.sandbox.harnessExec(script, { timeoutMs: OP_TIMEOUT_MS, stdin });
    if (r.killed !== null) throw new FileOpFailed(`the file operation was stopped (${r.killed})`);
    return r;
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

function firstLine(output: string): { line: string; rest: string } {
  const nl = output.indexOf('\n');
  return nl < 0 ? { line: output, rest: '' } : { line: output.slice(0, nl), rest: output.slice(nl + 1) };
}

/**
 * Shared prologue: reads the NUL-terminated path from stdin into `p`, resolves it (links included)
 * inside the sandbox, and sets `r` (absolute), `rel` (relative to the workspace) and `kind`. The
 * scripts run in the harness shell itself (no subshell, to keep an operation to one round trip), so
 * they never `exit` or `cd`.
 */
function resolveScript(workdir: string): string {
  return (
    `
IFS= read -r -d '' p
W=${shellQuote(workdir)}
` +
    String.raw`case "$p" in /*) ;; *) p="$W/$p" ;; esac
r=$(realpath -m -- "$p" 2>/dev/null) || r=
case "$r" in "$W") rel= ;; "$W"/*) rel=${'$'}{r#"$W"/} ;; *) rel='//outside' ;; esac
if [ "$rel" = //outside ]; then kind=outside
elif [ -L "$r" ]; then kind=other
elif [ -f "$r" ]; then kind=file
elif [ -d "$r" ]; then kind=directory
elif [ -e "$r" ]; then kind=other
else kind=missing; fi
stat_line() {
  if [ "$kind" = outside ]; then echo outside; return; fi
  size=0; [ "$kind" = file ] && size=$(stat -c %s -- "$r" 2>/dev/null || echo 0)
  printf '%s %s %s\n' "$kind" "$size" "$rel"
}
`
  );
}

function readScript(resolve: string, max: number): string {
  return `${resolve}\nstat_line\nif [ "$kind" = file ]; then head -c ${max + 1} -- "$r"; fi\n`;
}

/**
 * The content is always consumed: `head` reads exactly N bytes into the pipe, and the reader either
 * writes them to the file or, when anything fails (refused path, a directory in the way, a full
 * disk), drains them to /dev/null so no content byte is ever read as shell input.
 */
function writeScript(resolve: string, n: number): string {
  return `${resolve}
head -c ${n} | {
  if [ "$kind" = outside ]; then cat >/dev/null; echo outside
  elif [ "$kind" != file ] && [ "$kind" != missing ]; then cat >/dev/null; echo "error $rel exists and is not a regular file."
  elif ! mkdir -p -- "\${r%/*}" 2>/dev/null; then cat >/dev/null; echo "error could not create the directory of $rel (a file is in the way?)"
  elif err=$(cat 2>&1 >"$r"); then kind=file; stat_line
  else cat >/dev/null; echo "error could not write $rel: $err"
  fi
}
`;
}

function removeScript(resolve: string): string {
  return `${resolve}
if [ "$kind" = outside ]; then echo outside
elif [ -L "$r" ] || [ "$kind" = file ]; then
  if err=$(rm -f -- "$r" 2>&1); then kind=missing; stat_line; else echo "error could not remove $rel: $err"; fi
else echo "error $rel is not a file."
fi
`;
}

function listScript(resolve: string, limit: number): string {
  return (
    resolve +
    String.raw`
stat_line
if [ "$kind" = directory ]; then
  find "$r" -mindepth 1 -maxdepth 2 \( -type d \( -name .git -o -name node_modules -o -name __pycache__ -o -name .venv -o -name target -o -name dist \) -prune -printf '%P/\n' \) -o \( -type d -printf '%P/\n' \) -o -printf '%P\n' 2>/dev/null | LC_ALL=C sort | head -n ${String(limit)} | while IFS= read -r e; do
    if [ -n "$rel" ]; then printf '%s/%s\n' "$rel" "$e"; else printf '%s\n' "$e"; fi
  done
fi
`
  );
}
