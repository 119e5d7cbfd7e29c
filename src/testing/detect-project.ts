/**
 * Which languages a repository uses and which kind of sandbox image it needs, decided together with
 * its test command so the two cannot disagree: a pytest command runs where pytest is (the python
 * image), a `node --test` command where node is.
 *
 * Project files first: package.json means node; a Python project file (pyproject.toml, setup.py,
 * setup.cfg, Pipfile, requirements*.txt, pytest.ini, tox.ini, conftest.py) python; go.mod or
 * Cargo.toml the base image. Where none is there, the code and the tests decide (read-code.ts): the
 * language of the test command, else node for JavaScript code (the base image has no node), else
 * python for Python code, else base.
 *
 * Pure, like detect-test-command.ts: every question goes through the WorkspaceProbe.
 */
import { detectTestCommand, type TestCommand, type WorkspaceProbe } from './detect-test-command.js';
import { codeReader, type CodeFacts, type LanguageCode } from './read-code.js';

/** The sandbox images there are (sandbox/docker/choose-image.ts names them). */
export type ProjectKind = 'base' | 'node' | 'python';

export interface ProjectDetection {
  readonly kind: ProjectKind;
  /**
   * Why `kind`, for people: "package.json", "python: pyproject.toml", "python: tests/test_calc.py
   * has module-level test functions; no project files".
   */
  readonly reason: string;
  /** The kind came from the code and tests rather than from a project file. */
  readonly fromCode: boolean;
  /** Why each language is used, or null when it is not (a project file, the code, the tests). */
  readonly languages: { readonly node: string | null; readonly python: string | null };
  /** What detectTestCommand answers for the repository. */
  readonly testCommand: TestCommand | null;
}

/** Files at a root that say the project is Python's (a bare pytest setup counts: its tests need pytest). */
const PYTHON_MARKERS = [
  'pyproject.toml',
  'setup.py',
  'setup.cfg',
  'Pipfile',
  'pytest.ini',
  'tox.ini',
  'conftest.py',
] as const;

/** Projects of a language without an image of its own: they get the base image, whatever code sits beside. */
const OTHER_MARKERS = ['go.mod', 'Cargo.toml'] as const;

const JS_LOCKFILES = ['package-lock.json', 'npm-shrinkwrap.json', 'pnpm-lock.yaml', 'yarn.lock'] as const;

/** The first Python project file among a root's entries, or null. */
export function pythonMarker(rootFiles: readonly string[]): string | null {
  return (
    PYTHON_MARKERS.find((m) => rootFiles.includes(m)) ??
    rootFiles.filter((f) => /^requirements.*\.txt$/.test(f)).sort()[0] ??
    null
  );
}

/** The kind the project files at a root ask for, or null when none does. */
export function markerKind(rootFiles: readonly string[]): { kind: ProjectKind; reason: string } | null {
  if (rootFiles.includes('package.json')) return { kind: 'node', reason: 'package.json' };
  const python = pythonMarker(rootFiles);
  if (python !== null) return { kind: 'python', reason: `python: ${python}` };
  const other = OTHER_MARKERS.find((m) => rootFiles.includes(m));
  if (other !== undefined) return { kind: 'base', reason: `${other} (no image of its own)` };
  return null;
}

export async function detectProject(probe: WorkspaceProbe): Promise<ProjectDetection> {
  const root = (await probe.listDir('.')) ?? [];
  const code = codeReader(probe);
  const testCommand = await detectTestCommand(probe, code);
  const marked = markerKind(root);
  // The code is read for the kind only where no project file decides it (detectTestCommand may
  // have read it already; the reader reads once).
  const facts: CodeFacts = marked === null ? await code() : { python: null, javascript: null };
  const runnerLanguage = languageOf(testCommand);

  let kind: ProjectKind;
  let reason: string;
  if (marked !== null) {
    ({ kind, reason } = marked);
  } else if (runnerLanguage !== null && testCommand !== null) {
    kind = runnerLanguage;
    reason = `${runnerLanguage}: ${testCommand.source}`;
  } else if (facts.javascript !== null) {
    kind = 'node';
    reason = `node: ${describeCode(facts.javascript)}; no package.json`;
  } else if (facts.python !== null) {
    kind = 'python';
    reason = `python: ${describeCode(facts.python)}; no project files`;
  } else {
    kind = 'base';
    reason = 'no project files and no Python or JavaScript code';
  }

  // The runner needs its image. A JavaScript install (a lockfile) needs node's, so there the pytest
  // tests go without (detect-setup.ts plans that install; the python image has no npm).
  if (testCommand?.runner === 'pytest' && kind !== 'python') {
    const locked = JS_LOCKFILES.some((f) => root.includes(f));
    if (!(kind === 'node' && locked)) {
      kind = 'python';
      reason = `python: the tests run with pytest (${testCommand.source}), which the ${marked?.kind ?? 'base'} image lacks`;
    }
  } else if (testCommand?.runner === 'node-test' && kind !== 'node') {
    kind = 'node';
    reason = `node: the tests run with node --test (${testCommand.source})`;
  }

  const commandReason = (language: 'node' | 'python'): string | null =>
    runnerLanguage === language && testCommand !== null ? testCommand.source : null;
  const codeReason = (found: LanguageCode<string> | null): string | null =>
    found === null ? null : describeCode(found);
  const python = pythonMarker(root) ?? commandReason('python') ?? codeReason(facts.python);
  const node = root.includes('package.json')
    ? 'package.json'
    : (commandReason('node') ?? codeReason(facts.javascript));
  return {
    kind,
    reason,
    fromCode: marked === null ? kind !== 'base' : marked.kind !== kind,
    languages: { node, python },
    testCommand,
  };
}

/** The image language a test command needs, when it is one with an image. */
function languageOf(command: TestCommand | null): 'node' | 'python' | null {
  switch (command?.runner) {
    case 'pytest':
    case 'unittest':
      return 'python';
    case 'node-test':
      return command.source === 'package.json scripts.test' ? null : 'node';
    default:
      return null;
  }
}

function describeCode(code: LanguageCode<string>): string {
  if (code.evidence !== null) return code.evidence;
  const files = [...code.code, ...code.tests];
  const named = files.slice(0, 3).join(', ') + (files.length > 3 ? `, … (${files.length} files)` : '');
  return code.tests.length === 0 ? `${named}, no tests` : named;
}
