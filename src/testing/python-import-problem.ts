/**
 * Python import and collection failures: the environment's (a dependency that is not installed or
 * is broken) or the repository's own code (a circular import, a name the fix adds, a SyntaxError)?
 *
 * A run that stops at import or collection because of the repository's own code is an ordinary
 * failing run: the fix may be the very thing that repairs it (breaks the cycle, adds the name,
 * creates `pkg/newmod.py`). One that stops because a third-party module is missing or broken could
 * not run at all. Python's messages do not say which, so the traceback around them is read.
 *
 * The output is split into blocks: a pytest section (`___ ERROR collecting tests/x.py ___`,
 * `___ test_name ___`), a conftest failure (`ImportError while loading conftest`), a unittest
 * `ERROR: name (...)` entry, or a `Traceback (most recent call last):` after an exception. In each
 * block, every exception line (`E   ImportError: ...` or `ImportError: ...`) is an incident judged
 * by its message and the frames before it:
 *
 * - `No module named 'A'` (one name) is a dependency that is not installed (or a package that is
 *   not on `sys.path`): environment. `No module named 'A.B'` means `A` itself was imported, so it is
 *   the repository's when some frame of the output is a repository file under `A/` or named `A.py`
 *   (or the caller names `A` in `ownModules`); otherwise environment (`A` may be a dependency of
 *   the wrong version).
 * - `cannot import name 'N' from [partially initialized module] 'M' (PATH)`: the repository's when
 *   PATH is a repository file, environment when it is in a Python installation or
 *   `(unknown location)`.
 * - Any other import failure (a shared library, a relative import without a parent package):
 *   environment.
 * - Any other exception in a collection block (SyntaxError, NameError, AttributeError, ...): the
 *   repository's when its last frame (for a SyntaxError, the `File "...", line N` it points at) is a
 *   repository file, environment otherwise. Outside collection such exceptions are test failures and
 *   decide nothing.
 *
 * A repository file is a frame path that is not in a Python installation: not under
 * `site-packages`, `dist-packages`, `lib/pythonX.Y` (the standard library), `lib/pypy`, Windows
 * `\Lib\`, nor `<frozen ...>`. pytest prints rootdir-relative paths (`pkg/a.py:1: in <module>`)
 * for files under its rootdir and absolute ones for the rest (or `../`-relative when shorter:
 * `../venv/lib/python3.11/site-packages/x.py`); unittest prints absolute paths. So a relative path
 * not starting with `..` and an absolute path outside a Python installation are the repository's.
 *
 * The lines that `verdict.ts` took for an environment problem (the Python entries of its table)
 * are then attributed: an exception line to its incident (one that decides nothing stays the
 * environment's); pytest's and unittest's wrapper lines (`ERROR collecting`, `ImportError while
 * importing test module`, `ImportError: Failed to import test module`) to their block, which is the
 * repository's only when at least one of its incidents is and none is the environment's; summary
 * lines (`Interrupted: 1 error during collection`, `ERROR tests/x.py - ...`) to the whole output,
 * judged the same way over every incident (a summary naming a whole undotted missing module is the
 * environment's: pytest clips the others, "No module named 'pkg..."). The line after a frame is
 * that frame's source code (`    except ImportError:`) and is skipped. Any other such line is the
 * environment's, as before. One line attributed to the environment makes the run an environment
 * problem, quoted the way `verdict.ts` quotes it: the first line of the earliest table entry.
 *
 * Deliberately simple: any directory of an own frame's path counts as a repository name, so with
 * absolute (unittest) frames `/home/me/proj/pkg/a.py` makes `home`, `me`, `proj` and `pkg` the
 * repository's; `No module named 'proj.x'` is rare enough for that not to matter.
 *
 * Linear: each line is matched once against anchored regexes without nested quantifiers; lines
 * longer than 4096 characters are skipped (output-lines.ts), as in `verdict.ts`.
 */
import { clipLine, outputLines } from './output-lines.js';

export interface PythonImportProblem {
  /** What went wrong, in the words of `verdict.ts`'s table ("a Python module could not be imported"). */
  readonly words: string;
  /** The output line that shows it, trimmed and clipped. */
  readonly line: string;
}

export interface PythonImportOptions {
  /**
   * Top-level packages and modules of the repository (`pkg` for `pkg/__init__.py` or `pkg.py`),
   * when the caller knows them: `No module named 'pkg.newmod'` is then the repository's even when
   * no frame of the output is under `pkg/`.
   */
  readonly ownModules?: readonly string[];
}

/** The Python entries of verdict.ts's table, in its order: the lowest rank found is quoted. */
const RANKS: readonly { readonly test: RegExp; readonly words: string }[] = [
  { test: /\bModuleNotFoundError\b|\bNo module named\b/, words: 'a Python module could not be imported' },
  { test: /\bImportError\b/, words: 'a Python import failed' },
  {
    test: /\berrors? during collection\b|^_* ?ERROR collecting\b/,
    words: 'pytest could not collect the tests',
  },
];

type Judgement = 'own' | 'environment' | 'neither';

interface Incident {
  /** `neither` for a test's failure outside collection: it decides nothing. */
  judgement: Judgement;
  /** An import failure's message, judged once every frame of the output is known; else null. */
  readonly importMessage: string | null;
}

interface Block {
  /** pytest `ERROR collecting`, a conftest, or unittest's `_FailedTest`: a module failed to load. */
  readonly collection: boolean;
  readonly incidents: Incident[];
  /** Whether the last frame seen since the block's last exception is a repository file. */
  lastFrameOwn: boolean | null;
}

interface ProblemLine {
  readonly rank: number;
  readonly line: string;
  readonly kind: 'exception' | 'wrapper' | 'summary' | 'other';
  readonly block: Block;
  /** The incident of an exception line. */
  readonly incident: Incident | null;
  /** A summary line whose own message names a missing top-level module. */
  readonly missingTopLevel: boolean;
}

interface Reading {
  readonly blocks: Block[];
  readonly problems: ProblemLine[];
  /** Directory and module names of the repository files seen in frames. */
  readonly ownNames: Set<string>;
}

/**
 * The environment problem a Python run's output shows (a missing or broken third-party module, or a
 * collection failure not attributable to the repository's code), or null when there is none: no
 * Python import or collection failure at all, or only ones of the repository's own code.
 */
export function pythonImportProblem(
  output: string,
  options: PythonImportOptions = {},
): PythonImportProblem | null {
  const reading = read(output);
  if (reading.problems.length === 0) return null;
  for (const name of options.ownModules ?? []) reading.ownNames.add(name);
  const incidents = reading.blocks.flatMap((b) => b.incidents);
  for (const i of incidents)
    if (i.importMessage !== null) i.judgement = judgeImport(i.importMessage, reading.ownNames);
  const judged = incidents.map((i) => i.judgement);
  const outputOwn = judged.includes('own') && !judged.includes('environment');

  let best: ProblemLine | null = null;
  for (const p of reading.problems) {
    if (attributedToRepository(p, outputOwn)) continue;
    if (best === null || p.rank < best.rank) best = p;
  }
  if (best === null) return null;
  return { words: RANKS[best.rank]?.words ?? '', line: clipLine(best.line) };
}

function attributedToRepository(p: ProblemLine, outputOwn: boolean): boolean {
  switch (p.kind) {
    case 'exception':
      return p.incident?.judgement === 'own';
    case 'wrapper':
      return blockOwn(p.block);
    case 'summary':
      return !p.missingTopLevel && outputOwn;
    case 'other':
      return false;
  }
}

/** A block is the repository's when at least one incident is and none is the environment's. */
function blockOwn(block: Block): boolean {
  const judged = block.incidents.map((i) => i.judgement);
  return judged.includes('own') && !judged.includes('environment');
}

const EXCEPTION = /^(?:E +)?([A-Za-z_][\w.]*(?:Error|Exception))(?:: (.*))?$/;
/** pytest frames: `pkg/a.py:1: in <module>`, `tests/t.py:7: AssertionError`, `/abs/x.py:3: in f`. */
const PYTEST_FRAME = /^([^\s:"<>][^:"<>]*\.py):\d+: \S/;
/** Traceback frames and a SyntaxError's location: `File "/w/pkg/a.py", line 1, in <module>`. */
const FILE_FRAME = /^(?:E +)?File "([^"]+)", line \d+/;
/** pytest's and unittest's closing lines, which repeat the blocks above them. */
const SUMMARY = /^(?:!+ Interrupted: |(?:FAILED|ERROR) \S+ - |\d+ (?:failed|errors?|passed)\b)/;
/** Lines that announce the exception below them. */
const WRAPPER = /^ImportError(?: while importing test module '|: Failed to import test module: )/;

function read(output: string): Reading {
  const reading: Reading = { blocks: [newBlock(false)], problems: [], ownNames: new Set() };
  let block = reading.blocks[0] ?? newBlock(false);
  let afterFrame = false;
  for (const line of outputLines(output)) {
    const sourceLine = afterFrame;
    afterFrame = false;
    const header = headerOf(line, block);
    if (header !== null) {
      block = newBlock(header);
      reading.blocks.push(block);
    }
    const frame = PYTEST_FRAME.exec(line)?.[1] ?? FILE_FRAME.exec(line)?.[1];
    if (frame !== undefined) {
      const own = ownPath(frame);
      block.lastFrameOwn = own;
      if (own) addNames(frame, reading.ownNames);
      afterFrame = true;
    }
    const rank = RANKS.findIndex((r) => r.test.test(line));
    const wrapper = header !== null || WRAPPER.test(line);
    const exception = frame === undefined && !wrapper ? EXCEPTION.exec(line) : null;
    if (exception !== null) {
      const incident = addIncident(block, exception[1] ?? '', exception[2] ?? '');
      if (rank !== -1) reading.problems.push(problem(rank, line, 'exception', block, incident));
      continue;
    }
    // A frame's source line (`    from pkg import x`, `    except ImportError:`) is code, not a failure.
    if (rank === -1 || (sourceLine && frame === undefined)) continue;
    const kind = wrapper ? 'wrapper' : SUMMARY.test(line) ? 'summary' : 'other';
    reading.problems.push(problem(rank, line, kind, block, null));
  }
  return reading;
}

function problem(
  rank: number,
  line: string,
  kind: ProblemLine['kind'],
  block: Block,
  incident: Incident | null,
): ProblemLine {
  // pytest clips a summary ("No module named 'pkg..."): only a whole, undotted name decides.
  const missingTopLevel = kind === 'summary' && / - \S*: No module named '[^'.]+'$/.test(line);
  return { rank, line, kind, block, incident, missingTopLevel };
}

/** The header that starts a new block on this line (true for a collection block), or null. */
function headerOf(line: string, current: Block): boolean | null {
  if (/^_* ?ERROR collecting\b/.test(line) || line.startsWith('ImportError while loading conftest '))
    return true;
  if (/^(?:ERROR|FAIL): \S/.test(line)) return line.includes('_FailedTest');
  if ((line.startsWith('___') && line.endsWith('___')) || line.startsWith('===')) return false;
  // A chained exception ("The above exception was the direct cause of...") stays in collection.
  if (line === 'Traceback (most recent call last):' && current.incidents.length > 0)
    return current.collection;
  return null;
}

function newBlock(collection: boolean): Block {
  return { collection, incidents: [], lastFrameOwn: null };
}

/**
 * Records an exception of `block`. An import failure is judged later (see `judgeImport`); another
 * exception in a collection block by its last frame; any other is a test's failure.
 */
function addIncident(block: Block, name: string, message: string): Incident {
  const importFailure =
    name === 'ImportError' ||
    name === 'ModuleNotFoundError' ||
    message.includes('No module named') ||
    message.includes('cannot import name');
  const judgement: Judgement = importFailure
    ? 'environment'
    : !block.collection
      ? 'neither'
      : block.lastFrameOwn === true
        ? 'own'
        : 'environment';
  const incident: Incident = { judgement, importMessage: importFailure ? message : null };
  block.incidents.push(incident);
  block.lastFrameOwn = null;
  return incident;
}

/** How an import failure's message is judged, once the repository's names are known. */
function judgeImport(message: string, ownNames: ReadonlySet<string>): Judgement {
  const missing = /No module named '([^']+)'/.exec(message);
  if (missing !== null) {
    const name = missing[1] ?? '';
    const dot = name.indexOf('.');
    return dot > 0 && ownNames.has(name.slice(0, dot)) ? 'own' : 'environment';
  }
  const from =
    /^cannot import name '[^']*' from (?:partially initialized module )?'[^']*' (?:\([^()]*\) )?\(([^()]*)\)$/.exec(
      message,
    );
  if (from !== null) return ownPath(from[1] ?? '') ? 'own' : 'environment';
  return 'environment';
}

const INSTALLED = /[\\/](?:site|dist)-packages[\\/]|[\\/]lib(?:64)?[\\/](?:python\d|pypy)|\\Lib\\/i;

/** A path of the repository: relative (not `..`) or absolute, outside any Python installation. */
function ownPath(path: string): boolean {
  if (path === '' || path.startsWith('<') || path === 'unknown location') return false;
  if (path.startsWith('..')) return false;
  return !INSTALLED.test(`/${path}`);
}

/** `pkg/sub/a.py` adds `pkg`, `sub` and `a`. */
function addNames(path: string, names: Set<string>): void {
  const parts = path.split(/[\\/]/);
  const file = parts.pop() ?? '';
  for (const part of parts) if (part !== '' && part !== '.') names.add(part);
  names.add(file.replace(/\.py$/, ''));
}
