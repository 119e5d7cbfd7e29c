import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { shellQuote } from '../sandbox/shell-session.js';
import type { Sandbox } from '../sandbox/sandbox.js';

/**
 * A fast syntax check of one file's new content, where the language has one: JSON and YAML parsed
 * here (text is data), Python (`ast.parse`), JavaScript (`node --check`) and TypeScript/JSX (the
 * repository's own `typescript`, syntax only) inside the sandbox, with the content on stdin — the
 * check never opens a workspace path. `unchecked` when there is no checker for the file or none in
 * the sandbox.
 */
export type SyntaxResult =
  | { readonly kind: 'ok'; readonly checker: string }
  | { readonly kind: 'error'; readonly checker: string; readonly message: string }
  | { readonly kind: 'unchecked' }
  /** The checker for this kind of file is not in the sandbox (no node, no python, no typescript). */
  | { readonly kind: 'unavailable' };

/** Files larger than this are not checked (a generated bundle, a data file). */
const MAX_CHECK_BYTES = 1024 * 1024;
const CHECK_TIMEOUT_MS = 15_000;

/** JSON files that are commonly JSON-with-comments: not checked as strict JSON. */
const JSONC =
  /(^|\/)(tsconfig[^/]*|jsconfig[^/]*|\.eslintrc|\.babelrc|devcontainer|settings|launch|tasks|extensions)\.json$/;

const PYTHON = [
  'import ast, sys',
  'try:',
  '    ast.parse(sys.stdin.buffer.read(), sys.argv[1])',
  'except (SyntaxError, ValueError) as e:',
  '    print("line %s: %s" % (getattr(e, "lineno", None) or 0, getattr(e, "msg", None) or e))',
  '    sys.exit(1)',
].join('\n');

const TYPESCRIPT = [
  "let ts; try { ts = require(require.resolve('typescript', { paths: [process.cwd()] })); } catch { process.exit(127); }",
  "const src = require('fs').readFileSync(0, 'utf8');",
  'const name = process.argv[1];',
  'const r = ts.transpileModule(src, { fileName: name, reportDiagnostics: true, compilerOptions: { jsx: ts.JsxEmit ? ts.JsxEmit.Preserve : 1, allowJs: true } });',
  'const d = (r.diagnostics || [])[0];',
  'if (d) {',
  '  const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0;',
  "  console.log('line ' + at + ': ' + ts.flattenDiagnosticMessageText(d.messageText, ' '));",
  '  process.exit(1);',
  '}',
].join('\n');

/**
 * checkSyntax with a memo of results by path and content (the end-of-run check of a file the editor
 * already checked, unchanged since, costs nothing), and of checkers the sandbox lacks (a repository
 * without TypeScript pays for finding out once per run, not once per edit).
 */
export async function checkSyntaxCached(
  cache: Map<string, SyntaxResult>,
  sandbox: Sandbox,
  rel: string,
  text: string,
  signal?: AbortSignal,
): Promise<SyntaxResult> {
  const key = `${rel}\0${createHash('sha256').update(text).digest('hex')}`;
  const missing = `\0missing:${posix.extname(rel).toLowerCase()}`;
  const known = cache.get(key) ?? cache.get(missing);
  if (known !== undefined) return known;
  const r = await checkSyntax(sandbox, rel, text, signal);
  if (cache.size > 2000) cache.clear();
  cache.set(r.kind === 'unavailable' ? missing : key, r.kind === 'unavailable' ? { kind: 'unchecked' } : r);
  return r.kind === 'unavailable' ? { kind: 'unchecked' } : r;
}

export async function checkSyntax(
  sandbox: Sandbox,
  rel: string,
  text: string,
  signal?: AbortSignal,
): Promise<SyntaxResult> {
  if (Buffer.byteLength(text) > MAX_CHECK_BYTES) return { kind: 'unchecked' };
  const ext = posix.extname(rel).toLowerCase();
  if (ext === '.json' && !JSONC.test(rel)) {
    try {
      JSON.parse(text);
      return { kind: 'ok', checker: 'JSON' };
    } catch (error) {
      return { kind: 'error', checker: 'JSON', message: jsonMessage(text, error) };
    }
  }
  if (ext === '.yml' || ext === '.yaml') {
    const problem = parseAllDocuments(text, { prettyErrors: true })
      .flatMap((d) => ('errors' in d ? d.errors : []))
      .at(0);
    if (problem === undefined) return { kind: 'ok', checker: 'YAML' };
    const line = problem.linePos?.[0].line;
    return {
      kind: 'error',
      checker: 'YAML',
      message: `${line === undefined ? '' : `line ${line}: `}${problem.message.split('\n')[0] ?? ''}`,
    };
  }
  const name = shellQuote(posix.basename(rel));
  let body: string;
  let checker: string;
  if (ext === '.py') {
    checker = 'python ast';
    body = `command -v python3 >/dev/null 2>&1 || return 127; python3 -c ${shellQuote(PYTHON)} ${name} < "$f"`;
  } else if (ext === '.js' || ext === '.cjs' || ext === '.mjs') {
    checker = 'node --check';
    // A .js file is CommonJS or an ES module depending on package.json: it parses if either does.
    // The likelier one goes first, so a file that parses costs one node start.
    const esm = /^\s*(import|export)\b/m.test(text);
    const types =
      ext === '.mjs'
        ? ['module']
        : ext === '.cjs'
          ? ['commonjs']
          : esm
            ? ['module', 'commonjs']
            : ['commonjs', 'module'];
    body = [
      'command -v node >/dev/null 2>&1 || return 127',
      `for t in ${types.join(' ')}; do node --check --input-type=$t < "$f" 2>"$f.err" && return 0; done`,
      'cat "$f.err"; return 1',
    ].join('; ');
  } else if (['.ts', '.tsx', '.mts', '.cts', '.jsx'].includes(ext)) {
    checker = 'typescript (syntax)';
    // No node start at all where the repository has no TypeScript of its own (the usual case).
    body = `[ -d node_modules/typescript ] && command -v node >/dev/null 2>&1 || return 127; node -e ${shellQuote(TYPESCRIPT)} ${name} < "$f"`;
  } else {
    return { kind: 'unchecked' };
  }
  const bytes = Buffer.from(text);
  // The content is on the harness shell's own input: it is read off whole before anything else
  // runs (bash would parse whatever is left as commands), into a file of the sandbox's /tmp.
  const command = [
    '(',
    'f=$(mktemp 2>/dev/null) || f=/dev/null',
    `head -c ${bytes.length} > "$f"`,
    // 126, not 127: a full /tmp is not a missing checker.
    '[ "$f" != /dev/null ] || exit 126',
    `cd ${shellQuote(sandbox.workdir)} || { rm -f "$f"; exit 126; }`,
    `__ia_check() { ${body}; }`,
    '__ia_check; s=$?; rm -f "$f" "$f.err"; exit $s',
    ')',
  ].join('\n');
  const r = await sandbox.harnessExec(command, {
    timeoutMs: CHECK_TIMEOUT_MS,
    stdin: bytes,
    ...(signal === undefined ? {} : { signal }),
  });
  if (r.exitCode === 0) return { kind: 'ok', checker };
  if (r.exitCode === 127) return { kind: 'unavailable' };
  if (r.exitCode !== 1) return { kind: 'unchecked' };
  return { kind: 'error', checker, message: checkerMessage(r.output) };
}

/** `line N: message` from a checker's output (node's `[stdin]:N … SyntaxError: …`, or ours). */
function checkerMessage(output: string): string {
  const ours = /^line \d+: .*$/m.exec(output);
  if (ours !== null) return ours[0].slice(0, 300);
  const line = /\[stdin\]:(\d+)/.exec(output)?.[1];
  const error = /^(SyntaxError: .*)$/m.exec(output)?.[1] ?? output.trim().split('\n')[0] ?? 'does not parse';
  return `${line === undefined ? '' : `line ${line}: `}${error}`.slice(0, 300);
}

function jsonMessage(text: string, error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const pos = /position (\d+)/.exec(message)?.[1];
  if (pos === undefined) return message.slice(0, 300);
  const line = text.slice(0, Number(pos)).split('\n').length;
  return `line ${line}: ${message}`.slice(0, 300);
}

/** The sentence an observation or a report gives for a result; null when there is nothing to say. */
export function describeSyntax(rel: string, r: SyntaxResult): string | null {
  if (r.kind !== 'error') return null;
  return `Syntax check (${r.checker}): ${rel} does not parse: ${r.message}`;
}
