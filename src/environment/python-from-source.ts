/**
 * Running a Python project from its source when pip cannot install it because a build requirement
 * (its build backend, e.g. hatchling) is not on the package index setup reaches.
 *
 * Only the editable install of the project needs the build backend; the tests need the project's
 * packages importable and its dependencies installed. So when that install fails for want of a
 * build requirement, and for nothing else, setup runs these in its place:
 *  - the dependencies pyproject.toml's `[project]` table names (with the test extras the install
 *    asked for), installed by pip as plain requirements, which builds nothing of the project;
 *  - a path file in the virtualenv that puts the project's import root (`src`, or the repository
 *    root) on the path of every process of the virtualenv's Python. That is what an editable install
 *    writes itself (hatchling's, and setuptools' path mode), so the agent and the harness import the
 *    project exactly where the install would have put it. A path file rather than PYTHONPATH: the
 *    sandboxes' variables are fixed before setup runs (a container's at its creation), and what
 *    setup makes must live in its outputs;
 *  - an import of the project's top-level packages in isolated mode (no current directory, no
 *    PYTHON* variables), so only the virtualenv's path can satisfy it: when it fails, running from
 *    source does not work and setup fails with both failures in its message.
 *
 * The plan half (planFromSource) is pure over a WorkspaceProbe and keeps detect-setup.ts's
 * invariant: a command is fixed text plus values that passed a strict pattern. The run half
 * (missingBuildRequirement, sourceFallback) reads pip's output, which is untrusted text: only a
 * name that passes a strict pattern leaves it.
 */
import type { EnvironmentRecord } from '../events/schema.js';
import type { WorkspaceProbe } from '../testing/detect-test-command.js';
import type { SetupCommandResult } from '../sandbox/docker/setup-phase.js';
import type { SetupFallback } from '../sandbox/setup-commands.js';

export interface FromSourcePlan {
  /** The setup command this stands in for: the project's editable install. */
  readonly replaces: string;
  /** Where the project's packages are, relative to the workspace: `src` or `.`. */
  readonly importRoot: string;
  /** The top-level packages (or the module) imported to check that the project runs from source. */
  readonly packages: readonly string[];
  /** The build backend pyproject.toml names (`hatchling.build`), or null. */
  readonly backend: string | null;
  /** Run in place of `replaces`, in order; the first failure ends setup. */
  readonly commands: readonly { readonly command: string; readonly reason: string }[];
}

/** What the environment record keeps of a setup that ran the project from source. */
export interface FromSourceRecord {
  /** The build requirement pip could not fetch. */
  readonly missing: string;
  /** Whether it is the build backend's own package (`hatchling` for `hatchling.build`). */
  readonly isBackend: boolean;
  readonly importRoot: string;
  readonly packages: readonly string[];
}

/** The path file the fallback writes in the virtualenv's site-packages. */
export const SOURCE_PATH_FILE = 'issue_agent_from_source.pth';

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Folders at an import root that hold no part of the project's importable code. */
const NOT_PACKAGES = new Set([
  'test',
  'tests',
  'testing',
  'doc',
  'docs',
  'example',
  'examples',
  'benchmark',
  'benchmarks',
  'script',
  'scripts',
  'build',
  'dist',
]);
const MAX_PACKAGES = 5;
const MAX_REQUIREMENTS = 200;
/**
 * A PEP 508 requirement by name, with optional extras, version specifiers and an environment
 * marker: what reaches pip single-quoted, so no `'`; no URL (`@`), no option (a leading `-`).
 */
const SAFE_REQUIREMENT =
  /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\s*\[[A-Za-z0-9._,\s-]*\])?(?:\s*(?:===|~=|==|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+(?:\s*,\s*(?:===|~=|==|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+)*)?(?:\s*;[A-Za-z0-9_.\s"<>=!~(),-]*)?$/;
/** A project, package or extra name as it may appear in a record. */
const SAFE_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$/;

/** PEP 503 / 685 name normalization. */
function normalize(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, '-');
}

/**
 * The fallback for a project whose editable install is `replaces`, or null when there is nothing
 * to import from source (no package found where the project's code would be).
 *
 * `extras` are the test extras the install names (canonical forms); `pyproject` is the text of
 * pyproject.toml, when there is one.
 */
export async function planFromSource(
  probe: WorkspaceProbe,
  input: {
    readonly replaces: string;
    readonly pyproject: string | null;
    /** Where the project declares its dependencies: only a `[project]` table's can be read. */
    readonly declaredIn: 'project' | 'setup.py' | 'poetry';
    readonly extras: readonly string[];
    /** The virtualenv's folder, relative to the workspace (`.venv`). */
    readonly venv: string;
  },
): Promise<FromSourcePlan | null> {
  const toml = input.pyproject === null ? new Map<string, TomlValue>() : readToml(input.pyproject);
  const name = stringAt(toml, 'project.name') ?? stringAt(toml, 'tool.poetry.name');
  const found = await findImportRoot(probe, name);
  if (found === null) return null;
  const { importRoot, packages } = found;
  const backend = stringAt(toml, 'build-system.build-backend');

  const commands: { command: string; reason: string }[] = [];
  const deps: Dependencies =
    input.declaredIn === 'project'
      ? dependencies(toml, name, input.extras)
      : { install: [], extras: [], notes: [] };
  if (deps.install.length > 0) {
    const extrasNote = deps.extras.length > 0 ? ` and those of its extras ${deps.extras.join(', ')}` : '';
    commands.push({
      command: `${input.venv}/bin/pip install ${deps.install.map((d) => `'${d}'`).join(' ')}`,
      reason: `the dependencies in pyproject.toml's [project]${extrasNote}, installed as plain requirements (nothing of the project is built)${notesText(deps.notes)}`,
    });
  } else {
    const why = {
      project: "pyproject.toml's [project] names no dependency pip can install as it is",
      'setup.py': 'setup.py declares its dependencies in code, which only running it can tell',
      poetry: "Poetry's dependency tables are not read",
    }[input.declaredIn];
    deps.notes.unshift(`${why}: only requirements files, if any, provide them`);
  }
  const where = importRoot === '.' ? 'the repository root' : importRoot;
  commands.push({
    command: `${input.venv}/bin/python -c 'import os, sysconfig; open(os.path.join(sysconfig.get_path("purelib"), "${SOURCE_PATH_FILE}"), "w").write(os.path.abspath("${importRoot}") + "\\n")'`,
    reason: `puts ${where} on the virtualenv's import path (a path file, as an editable install writes), since the project itself could not be installed${deps.install.length > 0 ? '' : notesText(deps.notes)}`,
  });
  commands.push({
    command: `${input.venv}/bin/python -I -c 'import ${packages.join(', ')}'`,
    reason: `checks that the project runs from source: ${packages.join(', ')} from ${where}, through the virtualenv's path alone`,
  });
  return {
    replaces: input.replaces,
    importRoot,
    packages,
    backend: backend !== null && /^[A-Za-z0-9_.:]+$/.test(backend) ? backend : null,
    commands,
  };
}

function notesText(notes: readonly string[]): string {
  return notes.length === 0 ? '' : `; ${notes.join('; ')}`;
}

/**
 * The import root and its top-level packages: `src` when it holds a package (the src layout), else
 * the repository root. The package named after the project (`my-tool` → `my_tool`) when there is
 * one, else the folders with an `__init__.py` and a plain name that is not tests or docs; with
 * none, the module named after the project (`my_tool.py`).
 */
async function findImportRoot(
  probe: WorkspaceProbe,
  projectName: string | null,
): Promise<{ importRoot: string; packages: string[] } | null> {
  const module = projectName === null ? null : projectName.replace(/[-.]+/g, '_');
  for (const root of ['src', '.']) {
    const entries = await probe.listDir(root);
    if (entries === null) continue;
    const packages: string[] = [];
    for (const entry of [...entries].sort()) {
      if (!IDENTIFIER.test(entry) || NOT_PACKAGES.has(entry.toLowerCase())) continue;
      const dir = root === '.' ? entry : `${root}/${entry}`;
      if (await probe.exists(`${dir}/__init__.py`)) packages.push(entry);
    }
    // Project names are case-insensitive (`My.Tool` is `my_tool`'s).
    const named = packages.find((p) => p.toLowerCase() === module?.toLowerCase());
    if (named !== undefined) return { importRoot: root, packages: [named] };
    if (packages.length > 0) return { importRoot: root, packages: packages.slice(0, MAX_PACKAGES) };
    const file = entries.find((e) => e.toLowerCase() === `${module?.toLowerCase() ?? ''}.py`);
    if (file !== undefined && IDENTIFIER.test(file.slice(0, -3))) {
      return { importRoot: root, packages: [file.slice(0, -3)] };
    }
  }
  return null;
}

interface Dependencies {
  /** Requirements for pip, each checked against SAFE_REQUIREMENT. */
  readonly install: string[];
  /** The extras whose requirements are among them. */
  readonly extras: string[];
  /** What was left out, and why, for the command's reason. */
  readonly notes: string[];
}

/**
 * What of the project's declared dependencies pip can install without building it: `[project]
 * dependencies` and the optional dependencies of `extras`, a self-reference (`proj[test]` in `dev`)
 * replaced by the extras it names, each checked against SAFE_REQUIREMENT.
 */
function dependencies(
  toml: ReadonlyMap<string, TomlValue>,
  projectName: string | null,
  extras: readonly string[],
): Dependencies {
  const notes: string[] = [];
  const dynamic = listAt(toml, 'project.dynamic') ?? [];
  if (dynamic.includes('dependencies') || dynamic.includes('optional-dependencies')) {
    notes.push('its dependencies are dynamic (the build backend computes them), so they are not installed');
  }
  const optional = new Map<string, readonly string[]>();
  for (const [key, value] of toml) {
    const extra = /^project\.optional-dependencies\.(.+)$/.exec(key)?.[1];
    if (extra !== undefined && Array.isArray(value)) optional.set(normalize(extra), value);
  }
  const self = projectName === null ? null : normalize(projectName);
  const install: string[] = [];
  const skipped: string[] = [];
  const used: string[] = [];
  const pending = [...extras.map(normalize)];
  const seen = new Set<string>();
  const add = (requirement: string): void => {
    const req = requirement.trim();
    const name = /^[A-Za-z0-9][A-Za-z0-9._-]*/.exec(req)?.[0];
    if (name !== undefined && self !== null && normalize(name) === self) {
      // `proj[test,lint]`: the project's own extras, whose requirements are installed instead.
      const inner = /^[^[]*\[([^\]]*)\]/.exec(req)?.[1] ?? '';
      for (const e of inner.split(',')) if (e.trim() !== '') pending.push(normalize(e.trim()));
      return;
    }
    if (req.length <= 200 && SAFE_REQUIREMENT.test(req)) {
      if (!install.includes(req)) install.push(req);
    } else {
      skipped.push(name ?? '');
    }
  };
  for (const r of listAt(toml, 'project.dependencies') ?? []) add(r);
  while (pending.length > 0 && install.length < MAX_REQUIREMENTS) {
    const extra = pending.shift() ?? '';
    if (seen.has(extra)) continue;
    seen.add(extra);
    const reqs = optional.get(extra);
    if (reqs === undefined) continue;
    if (SAFE_NAME.test(extra)) used.push(extra);
    for (const r of reqs) add(r);
  }
  if (skipped.length > 0) {
    const names = skipped.filter((s) => SAFE_NAME.test(s)).slice(0, 5);
    notes.push(
      `${skipped.length} requirement(s) not written plainly enough to pass to pip (a URL, a quote) were left out${names.length > 0 ? `: ${names.join(', ')}` : ''}`,
    );
  }
  return { install: install.slice(0, MAX_REQUIREMENTS), extras: used, notes };
}

// ---------------------------------------------------------------------------------------------------
// Run time

/**
 * The build requirement pip could not fetch, when that is why it failed; null for any other
 * failure. pip installs build requirements in a subprocess of its own ("pip subprocess to install
 * build dependencies" / "backend dependencies"; older pips say "Installing build dependencies ...
 * error"); the requirement it could not find there is named in "No matching distribution found for
 * <requirement>". A dependency of the project missing from the index fails outside that
 * subprocess, and is not this.
 */
export function missingBuildRequirement(output: string): string | null {
  const inBuildEnv =
    /pip subprocess to install (?:build|backend) dependencies did not run successfully/.test(output) ||
    /Installing (?:build|backend) dependencies(?:: finished with status 'error'| \.\.\. error)/.test(output);
  if (!inBuildEnv) return null;
  const m =
    /No matching distribution found for ([^\s;]+)/.exec(output) ??
    /Could not find a version that satisfies the requirement ([^\s;]+)/.exec(output);
  const name = m?.[1] === undefined ? undefined : /^[A-Za-z0-9][A-Za-z0-9._-]*/.exec(m[1])?.[0];
  if (name === undefined) return null;
  const trimmed = name.replace(/[._-]+$/, '');
  return SAFE_NAME.test(trimmed) ? trimmed : null;
}

/** One setup's fallback: what the setup phase runs in place of the failed install, and what it took. */
export interface SourceFallback {
  /** For the setup phase (DockerSetupSpec.fallback, LocalSetupSpec.fallback). */
  readonly decide: (failed: SetupCommandResult) => SetupFallback | null;
  /** Set once the fallback was taken. */
  taken(): FromSourceRecord | null;
  /** `commands` as the record lists them: the fallback's after the install, once taken. */
  withFallback<T extends { readonly command: string; readonly reason: string }>(
    commands: readonly T[],
  ): (T | { readonly command: string; readonly reason: string })[];
  /**
   * The clauses the record's reason gets: once the fallback was taken, one saying whether the
   * project runs from source (every command of the fallback succeeded in `results`) or not.
   */
  notes(results: readonly SetupCommandResult[]): string[];
  /** The record's `fromSource`: present once the project runs from source. */
  recordField(results: readonly SetupCommandResult[]): Pick<EnvironmentRecord['setup'], 'fromSource'>;
}

/**
 * The fallback of a setup (none when `plan` is undefined), for `asRun`, the commands setup runs
 * (`planned` with install scripts off on a tree that is not trusted, one for one). It is taken only
 * for the project's install, and only when pip could not fetch a build requirement.
 */
export function sourceFallback(
  plan: FromSourcePlan | undefined,
  planned: readonly { readonly command: string }[],
  asRun: readonly { readonly command: string }[],
): SourceFallback {
  const at = plan === undefined ? -1 : planned.findIndex((c) => c.command === plan.replaces);
  const replaces = at < 0 ? undefined : asRun[at]?.command;
  let taken: FromSourceRecord | null = null;
  const worked = (results: readonly SetupCommandResult[]): boolean =>
    plan !== undefined &&
    plan.commands.every((c) => results.some((r) => r.command === c.command && r.exitCode === 0));
  return {
    decide: (failed) => {
      if (plan === undefined || replaces === undefined || failed.command !== replaces || failed.timedOut)
        return null;
      const missing = missingBuildRequirement(failed.output);
      if (missing === null) return null;
      taken = {
        missing,
        isBackend: plan.backend !== null && providesBackend(missing, plan.backend),
        importRoot: plan.importRoot,
        packages: [...plan.packages],
      };
      return {
        why: `${whatMissing(taken)} could not be fetched: running the project from source instead`,
        commands: plan.commands.map((c) => c.command),
      };
    },
    taken: () => taken,
    recordField: (results) =>
      taken === null || !worked(results) ? {} : { fromSource: { ...taken, packages: [...taken.packages] } },
    withFallback: (commands) => {
      if (taken === null || plan === undefined) return [...commands];
      return commands.flatMap((c) => (c.command === replaces ? [c, ...plan.commands] : [c]));
    },
    notes: (results) => {
      if (taken === null) return [];
      if (!worked(results))
        return [`${whatMissing(taken)} could not be fetched, and running the project from source failed too`];
      const where = taken.importRoot === '.' ? 'the repository root' : taken.importRoot;
      return [
        `installed from source: ${whatMissing(taken)} could not be fetched; tests run with ${where} on the virtualenv's import path (as an editable install puts it; the project's packaging itself is not exercised)`,
      ];
    },
  };
}

function whatMissing(r: FromSourceRecord): string {
  return r.isBackend ? `the build backend ${r.missing}` : `the build requirement ${r.missing}`;
}

/** Whether the distribution `name` provides the backend module (`hatchling` → `hatchling.build`, `poetry-core` → `poetry.core.masonry.api`). */
function providesBackend(name: string, backend: string): boolean {
  const parts = backend.split(':')[0]?.split('.') ?? [];
  const n = normalize(name);
  return [1, 2].some((k) => parts.length >= k && normalize(parts.slice(0, k).join('.')) === n);
}

// ---------------------------------------------------------------------------------------------------
// TOML

type TomlValue = string | readonly string[];

function stringAt(toml: ReadonlyMap<string, TomlValue>, key: string): string | null {
  const v = toml.get(key);
  return typeof v === 'string' ? v : null;
}

function listAt(toml: ReadonlyMap<string, TomlValue>, key: string): readonly string[] | null {
  const v = toml.get(key);
  return Array.isArray(v) ? v : null;
}

/**
 * The string and string-array values of a TOML document, by dotted key (`project.dependencies`,
 * `project.optional-dependencies.test`), inline tables included. Other values (numbers, dates,
 * arrays of tables) are skipped. Tolerant: what it cannot read it leaves out, never throws.
 */
export function readToml(text: string): Map<string, TomlValue> {
  const out = new TomlReader(text).readDocument();
  for (const key of [...out.keys()]) if (key.startsWith('[[]]') || key.includes('[]')) out.delete(key);
  return out;
}

/** readToml's cursor over one document; every string value read lands in `out`. */
class TomlReader {
  private i = 0;
  readonly out = new Map<string, TomlValue>();

  constructor(private readonly text: string) {}

  readDocument(): Map<string, TomlValue> {
    const { text } = this;
    let table = '';
    while (this.i < text.length) {
      this.skipBlank(true);
      if (this.i >= text.length) break;
      if (text.startsWith('[[', this.i)) {
        // Keys below an array of tables belong to its elements: not read.
        table = '[[]]';
        this.toLineEnd();
        continue;
      }
      if (text[this.i] === '[') {
        this.i++;
        const k = this.readKey();
        table = k ?? '[[]]';
        this.toLineEnd();
        continue;
      }
      const k = this.readKey();
      if (k === null || text[this.i] !== '=') {
        this.toLineEnd();
        continue;
      }
      this.i++;
      this.skipBlank(false);
      const start = this.i;
      if (!this.readValue(table === '' ? k : `${table}.${k}`)) {
        // Unreadable value: resume at the line after where it started.
        this.i = start;
      }
      this.toLineEnd();
    }
    return this.out;
  }

  private skipBlank(newlines: boolean): void {
    const { text } = this;
    while (this.i < text.length) {
      const ch = text[this.i];
      if (ch === ' ' || ch === '\t' || ch === '\r' || (newlines && ch === '\n')) this.i++;
      else if (ch === '#') this.toLineEnd();
      else break;
    }
  }

  private toLineEnd(): void {
    while (this.i < this.text.length && this.text[this.i] !== '\n') this.i++;
  }

  private readKey(): string | null {
    const parts: string[] = [];
    for (;;) {
      this.skipBlank(false);
      const ch = this.text[this.i];
      if (ch === '"' || ch === "'") {
        const s = this.readString();
        if (s === null) return null;
        parts.push(s);
      } else {
        const m = /^[A-Za-z0-9_-]+/.exec(this.text.slice(this.i, this.i + 200));
        if (m === null) return null;
        parts.push(m[0]);
        this.i += m[0].length;
      }
      this.skipBlank(false);
      if (this.text[this.i] !== '.') return parts.join('.');
      this.i++;
    }
  }

  private readString(): string | null {
    const { text } = this;
    const quote = text[this.i];
    if (quote !== '"' && quote !== "'") return null;
    const triple = text.startsWith(quote.repeat(3), this.i);
    this.i += triple ? 3 : 1;
    if (triple && text[this.i] === '\n') this.i++;
    let s = '';
    while (this.i < text.length) {
      if (triple ? text.startsWith(quote.repeat(3), this.i) : text[this.i] === quote) {
        this.i += triple ? 3 : 1;
        return s;
      }
      const ch = text[this.i] ?? '';
      if (!triple && ch === '\n') return null;
      if (quote === '"' && ch === '\\') {
        const escaped = this.readEscape(triple);
        if (escaped === null) return null;
        s += escaped;
        continue;
      }
      s += ch;
      this.i++;
    }
    return null;
  }

  /** The escape at i (a backslash in a basic string), consumed; null when TOML has no such escape. */
  private readEscape(triple: boolean): string | null {
    const { text } = this;
    const next = text[this.i + 1] ?? '';
    const simple: Record<string, string> = { n: '\n', t: '\t', '"': '"', '\\': '\\', r: '\r' };
    if (next in simple) {
      this.i += 2;
      return simple[next] ?? '';
    }
    const hex = /^u([0-9A-Fa-f]{4})|^U([0-9A-Fa-f]{8})/.exec(text.slice(this.i + 1, this.i + 10));
    if (hex !== null) {
      this.i += 1 + hex[0].length;
      return String.fromCodePoint(parseInt(hex[1] ?? hex[2] ?? '0', 16));
    }
    if (triple && next === '\n') {
      // A line-ending backslash: the newline and the blanks after it vanish.
      this.i += 2;
      while (/\s/.test(text[this.i] ?? '')) this.i++;
      return '';
    }
    return null;
  }

  /** Reads a value at i; records strings and string arrays under `key`. False when unreadable. */
  private readValue(key: string): boolean {
    const ch = this.text[this.i];
    if (ch === '"' || ch === "'") {
      const s = this.readString();
      if (s === null) return false;
      this.out.set(key, s);
      return true;
    }
    if (ch === '[') return this.readArray(key);
    if (ch === '{') return this.readInlineTable(key);
    // A number, boolean or date: up to the next delimiter.
    const m = /^[^,\]}\n#]*/.exec(this.text.slice(this.i));
    this.i += m?.[0].length ?? 0;
    return true;
  }

  private readArray(key: string): boolean {
    const { text } = this;
    this.i++;
    const items: string[] = [];
    let plain = true;
    for (;;) {
      this.skipBlank(true);
      if (this.i >= text.length) return false;
      if (text[this.i] === ']') {
        this.i++;
        break;
      }
      const c = text[this.i];
      const at = this.i;
      if (c === '"' || c === "'") {
        const s = this.readString();
        if (s === null) return false;
        items.push(s);
      } else {
        plain = false;
        if (!this.readValue(`${key}[]`) || this.i === at) return false;
      }
      this.skipBlank(true);
      if (text[this.i] === ',') this.i++;
    }
    if (plain) this.out.set(key, items);
    return true;
  }

  private readInlineTable(key: string): boolean {
    this.i++;
    for (;;) {
      this.skipBlank(false);
      if (this.text[this.i] === '}') {
        this.i++;
        return true;
      }
      const k = this.readKey();
      if (k === null || this.text[this.i] !== '=') return false;
      this.i++;
      this.skipBlank(false);
      if (!this.readValue(`${key}.${k}`)) return false;
      this.skipBlank(false);
      if (this.text[this.i] === ',') this.i++;
    }
  }
}
