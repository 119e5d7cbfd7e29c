/**
 * Which Node and Python versions a repository asks for, mapped onto the versions this deployment
 * builds images for (scripts/build-images.sh), and the image that follows.
 *
 * Pure: every question about the repository goes through a WorkspaceProbe, so it runs over a host
 * copy, a sandbox or an in-memory map alike. A file that cannot be read or understood is skipped
 * (the next source is asked) and never throws.
 */
import { parse as parseYaml } from 'yaml';
import type { WorkspaceProbe } from '../testing/detect-test-command.js';
import { detectProject } from '../testing/detect-project.js';
import { imageReference, type ImageKind } from '../sandbox/docker/choose-image.js';

export type RuntimeLanguage = 'node' | 'python';

export type OfferedVersions = { readonly [L in RuntimeLanguage]: readonly string[] };

/**
 * The versions there is an image for: Node majors (`issue-agent/node:<major>`) and Python
 * major.minor (`issue-agent/python:<version>`). Keep in step with NODE_MAJORS in build-images.sh.
 */
export const OFFERED: OfferedVersions = { node: ['20', '22', '24'], python: ['3.11'] };

/** What runs when nothing asks for a version: `issue-agent/node:latest` is Node 22. */
export const DEFAULT_VERSIONS: { readonly [L in RuntimeLanguage]: string } = { node: '22', python: '3.11' };

export interface RuntimeVersion {
  readonly language: RuntimeLanguage;
  /** The request as written (e.g. ">=18", "lts/iron", "3.12"), or null when nothing asked. */
  readonly requested: string | null;
  /** What will run: the Node major or the Python major.minor; always one of the offered versions. */
  readonly version: string;
  /** Where the request came from: "configured", ".nvmrc", "package.json engines.node", …, "default". */
  readonly source: string;
  /** Why `version` differs from the request, or which sources were skipped as unreadable. */
  readonly note?: string;
}

export interface RuntimeChoice {
  /** One entry per language the repository uses, node first. */
  readonly runtimes: readonly RuntimeVersion[];
  /**
   * The kind of image, as detectProject (src/testing/detect-project.ts) decides it: project files
   * first, then the code and the test command; a repository that neither decides gets the image of a
   * language something asks a version for (only an .nvmrc, say), else base.
   */
  readonly imageKind: ImageKind;
  /** Why that kind: "package.json", "python: tests/test_calc.py imports pytest (…)", ".nvmrc asks for node". */
  readonly reason: string;
  /** The kind was read from the code and tests, not from a project file or a version request. */
  readonly fromCode: boolean;
  /** The image reference to run (a configured image, as given, wins). */
  readonly image: string;
}

/** The repo config's `runtime:` section. */
export interface RuntimeConfig {
  readonly node?: string | number | undefined;
  readonly python?: string | number | undefined;
}

export interface DetectRuntimeOptions {
  /** `runtime:` from the repo config; wins over every file. */
  readonly configured?: RuntimeConfig | undefined;
  /** `image:` from the repo config; returned as the image unchanged. */
  readonly image?: string | undefined;
  /** The versions with an image. Default: OFFERED. */
  readonly offered?: OfferedVersions | undefined;
}

/**
 * Sources, first match wins per language:
 *   node:   configured → .nvmrc → .node-version → .tool-versions (nodejs|node) → package.json volta.node
 *           → package.json engines.node → .github/workflows/*.yml node-version
 *   python: configured → .python-version → .tool-versions (python) → pyproject.toml requires-python
 *           → pyproject.toml tool.poetry.dependencies.python → .github/workflows/*.yml python-version
 * A language is listed when detectProject finds it used (its project files: package.json;
 * pyproject.toml, setup.py, setup.cfg, Pipfile, requirements*.txt, pytest.ini, tox.ini,
 * conftest.py; else its code, its tests or the test command) or something other than a workflow
 * names a version for it.
 */
export async function detectRuntime(
  probe: WorkspaceProbe,
  options: DetectRuntimeOptions = {},
): Promise<RuntimeChoice> {
  const offered = options.offered ?? OFFERED;
  const configured = options.configured ?? {};
  const project = await detectProject(probe);
  const workflows = await readWorkflows(probe);

  const runtimes: RuntimeVersion[] = [];
  const node = await detectLanguage('node', nodeSources(probe, configured.node), workflows, offered);
  if (node.version !== null && (project.languages.node !== null || node.explicit)) {
    runtimes.push(node.version);
  }
  const python = await detectLanguage('python', pythonSources(probe, configured.python), workflows, offered);
  if (python.version !== null && (project.languages.python !== null || python.explicit)) {
    runtimes.push(python.version);
  }

  // A repository that neither project files nor code place but with an explicit version (e.g. only
  // an .nvmrc) gets that language's image rather than the base.
  const asked = project.kind === 'base' ? runtimes[0] : undefined;
  const imageKind: ImageKind = asked?.language ?? project.kind;
  return {
    runtimes,
    imageKind,
    reason:
      asked === undefined ? project.reason : `${asked.language}: ${asked.source} asks for ${asked.language}`,
    fromCode: asked === undefined && project.fromCode,
    image: imageReference({ runtimes, imageKind }, options.image),
  };
}

/** One place a version may be asked for. `read` returns the requests found (empty: none). */
interface Source {
  readonly name: string;
  /** Explicit sources make a language apply even without its project files. */
  readonly explicit: boolean;
  readonly read: () => Promise<readonly string[]>;
}

interface LanguageResult {
  readonly version: RuntimeVersion | null;
  readonly explicit: boolean;
}

async function detectLanguage(
  language: RuntimeLanguage,
  sources: readonly Source[],
  workflows: readonly Workflow[],
  offered: OfferedVersions,
): Promise<LanguageResult> {
  const fromWorkflows = workflows
    .filter((w) => w.versions[language].length > 0)
    .map((w): Source => ({
      name: `${w.path} ${language}-version`,
      explicit: false,
      read: () => Promise.resolve(w.versions[language]),
    }));
  const skipped: string[] = [];
  const skippedNote = (): string | undefined =>
    skipped.length > 0 ? `ignored ${skipped.join('; ')}: not a version` : undefined;
  for (const source of [...sources, ...fromWorkflows]) {
    const requests = await source.read();
    if (requests.length === 0) continue;
    const pick = pickFromList(
      requests
        .map((request) => ({ request, r: resolveVersion(language, request, offered[language]) }))
        .filter((x): x is { request: string; r: VersionResolution } => x.r !== null),
    );
    if (pick === undefined) {
      skipped.push(`${source.name} (${requests.join(', ')})`);
      continue;
    }
    const notes = [pick.r.note, skippedNote()].filter((n): n is string => n !== undefined);
    return {
      explicit: source.explicit,
      version: {
        language,
        requested: requests.join(', '),
        version: pick.r.version,
        source: source.name,
        ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
      },
    };
  }
  const fallback = offered[language].includes(DEFAULT_VERSIONS[language])
    ? DEFAULT_VERSIONS[language]
    : newest(offered[language]);
  if (fallback === undefined) return { explicit: false, version: null };
  const note = skippedNote();
  return {
    explicit: false,
    version: {
      language,
      requested: null,
      version: fallback,
      source: 'default',
      ...(note !== undefined ? { note } : {}),
    },
  };
}

/**
 * From a list (a CI matrix, or one request), the lowest version that is offered as asked; when none
 * is, the one nearest to what was asked.
 */
function pickFromList<T extends { r: VersionResolution }>(list: readonly T[]): T | undefined {
  let best: T | undefined;
  for (const x of list) {
    if (best === undefined) {
      best = x;
      continue;
    }
    const better =
      x.r.distance < best.r.distance || (x.r.distance === best.r.distance && x.r.index < best.r.index);
    if (better) best = x;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Sources

function nodeSources(probe: WorkspaceProbe, configured: string | number | undefined): Source[] {
  return [
    { name: 'configured', explicit: true, read: () => Promise.resolve(configuredRequest(configured)) },
    { name: '.nvmrc', explicit: true, read: async () => firstLine(await probe.readText('.nvmrc')) },
    {
      name: '.node-version',
      explicit: true,
      read: async () => firstLine(await probe.readText('.node-version')),
    },
    {
      name: '.tool-versions nodejs',
      explicit: true,
      read: async () => toolVersion(await probe.readText('.tool-versions'), ['nodejs', 'node']),
    },
    {
      name: 'package.json volta.node',
      explicit: false,
      read: async () => packageJsonField(await probe.readText('package.json'), 'volta'),
    },
    {
      name: 'package.json engines.node',
      explicit: false,
      read: async () => packageJsonField(await probe.readText('package.json'), 'engines'),
    },
  ];
}

function pythonSources(probe: WorkspaceProbe, configured: string | number | undefined): Source[] {
  return [
    { name: 'configured', explicit: true, read: () => Promise.resolve(configuredRequest(configured)) },
    {
      name: '.python-version',
      explicit: true,
      // pyenv allows several lines; the first is the one `python` runs.
      read: async () => firstLine(await probe.readText('.python-version')),
    },
    {
      name: '.tool-versions python',
      explicit: true,
      read: async () => toolVersion(await probe.readText('.tool-versions'), ['python']),
    },
    {
      name: 'pyproject.toml requires-python',
      explicit: false,
      read: async () => tomlString(await probe.readText('pyproject.toml'), 'project', 'requires-python'),
    },
    {
      name: 'pyproject.toml tool.poetry.dependencies.python',
      explicit: false,
      read: async () =>
        tomlString(await probe.readText('pyproject.toml'), 'tool.poetry.dependencies', 'python'),
    },
  ];
}

function configuredRequest(value: string | number | undefined): string[] {
  if (value === undefined) return [];
  const text = String(value).trim();
  return text === '' ? [] : [text];
}

/** The first line that is not blank or a comment (nvm allows `# …` comments). */
function firstLine(text: string | null): string[] {
  if (text === null) return [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/#.*/, '').trim();
    if (line !== '') return [line];
  }
  return [];
}

/** asdf/mise `.tool-versions`: `nodejs 20.11.0 18.19.0 # comment`; the first version is the one used. */
function toolVersion(text: string | null, names: readonly string[]): string[] {
  if (text === null) return [];
  for (const raw of text.split(/\r?\n/)) {
    const [name, first] = raw.replace(/#.*/, '').trim().split(/\s+/);
    if (name !== undefined && first !== undefined && names.includes(name)) return [first];
  }
  return [];
}

/** package.json `volta.node` or `engines.node`, when it is a string. */
function packageJsonField(text: string | null, field: 'volta' | 'engines'): string[] {
  if (text === null) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return [];
  }
  if (!isRecord(parsed)) return [];
  const section = parsed[field];
  if (!isRecord(section)) return [];
  const value = section.node;
  return typeof value === 'string' && value.trim() !== '' ? [value.trim()] : [];
}

/** A quoted string `key = "…"` in TOML table `[table]`, by a line scan (no TOML parser needed). */
function tomlString(text: string | null, table: string, key: string): string[] {
  if (text === null) return [];
  let current = '';
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    const header = /^\[([^\]]+)\]\s*(?:#.*)?$/.exec(line);
    if (header !== null) {
      current = (header[1] ?? '').replace(/\s+/g, '');
      continue;
    }
    if (current !== table) continue;
    const m = /^("?)([\w.-]+)\1\s*=\s*(["'])([^"']*)\3/.exec(line);
    if (m?.[2] === key && m[4] !== undefined && m[4].trim() !== '') return [m[4].trim()];
  }
  return [];
}

interface Workflow {
  readonly path: string;
  readonly versions: { readonly [L in RuntimeLanguage]: readonly string[] };
}

/**
 * `node-version` / `python-version` values in `.github/workflows/*.yml`, in file-name order. A
 * `${{ matrix.x }}` value is looked up in the job's matrix (and its `include`), `${{ env.x }}` in
 * the job's or workflow's env; other expressions are skipped.
 */
async function readWorkflows(probe: WorkspaceProbe): Promise<Workflow[]> {
  const dir = '.github/workflows';
  const names = ((await probe.listDir(dir)) ?? []).filter((n) => /\.ya?ml$/.test(n)).sort();
  const out: Workflow[] = [];
  for (const name of names) {
    const path = `${dir}/${name}`;
    const text = await probe.readText(path);
    if (text === null) continue;
    let doc: unknown;
    try {
      // failsafe: every scalar stays a string, so `3.10` is not read as the number 3.1.
      doc = parseYaml(text, { schema: 'failsafe', uniqueKeys: false });
    } catch {
      continue;
    }
    if (!isRecord(doc) || !isRecord(doc.jobs)) continue;
    const versions: Record<RuntimeLanguage, string[]> = { node: [], python: [] };
    for (const job of Object.values(doc.jobs)) {
      if (!isRecord(job)) continue;
      const strategy = job.strategy;
      const matrix = isRecord(strategy) && isRecord(strategy.matrix) ? strategy.matrix : {};
      const env = { ...(isRecord(doc.env) ? doc.env : {}), ...(isRecord(job.env) ? job.env : {}) };
      const steps = Array.isArray(job.steps) ? (job.steps as unknown[]) : [];
      // A reusable workflow's call passes `with:` on the job itself.
      for (const holder of [job, ...steps]) {
        if (!isRecord(holder) || !isRecord(holder.with)) continue;
        for (const language of ['node', 'python'] as const) {
          const value = holder.with[`${language}-version`];
          versions[language].push(...expand(value, matrix, env));
        }
      }
    }
    out.push({ path, versions: { node: unique(versions.node), python: unique(versions.python) } });
  }
  return out;
}

function expand(value: unknown, matrix: Record<string, unknown>, env: Record<string, unknown>): string[] {
  const strings = (v: unknown): string[] =>
    typeof v === 'string' ? [v] : Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
  const out: string[] = [];
  // setup-python takes several versions, one a line.
  for (const raw of strings(value).flatMap((s) => s.split(/\r?\n/))) {
    const item = raw.trim();
    if (item === '') continue;
    const ref = /^\$\{\{\s*(matrix|env)\.([\w-]+)\s*\}\}$/.exec(item);
    if (ref === null) {
      if (!item.includes('${{')) out.push(item);
      continue;
    }
    const [, scope, key = ''] = ref;
    if (scope === 'env') {
      out.push(...strings(env[key]));
      continue;
    }
    out.push(...strings(matrix[key]).filter((s) => !s.includes('${{')));
    const include = matrix.include;
    if (Array.isArray(include)) {
      for (const entry of include) if (isRecord(entry)) out.push(...strings(entry[key]));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Versions and ranges

/** A version as [major, minor, patch]; Infinity as a major stands for "no upper bound". */
type Version = readonly [number, number, number];

/** Half-open [lo, hi). */
interface Interval {
  readonly lo: Version;
  readonly hi: Version;
}

/** One comparator set (all must hold): the allowed interval minus the `!=` exclusions. */
interface ComparatorSet {
  readonly allow: Interval;
  readonly deny: readonly Interval[];
}

const ZERO: Version = [0, 0, 0];
const INFINITE: Version = [Infinity, 0, 0];
const ANY: Interval = { lo: ZERO, hi: INFINITE };

function compare(a: Version, b: Version): number {
  for (let i = 0; i < 3; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}

const maxV = (a: Version, b: Version): Version => (compare(a, b) >= 0 ? a : b);
const minV = (a: Version, b: Version): Version => (compare(a, b) <= 0 ? a : b);

/** A partial version: the numeric parts written before any wildcard (`18.x` → [18]). */
type Partial = readonly number[];

const PARTIAL =
  /^v?(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:[-+][\w.+-]*|(?:a|b|rc|dev|alpha|beta|post)\d*)?$/;

function parsePartial(text: string): Partial | null {
  const m = PARTIAL.exec(text);
  if (m === null) return null;
  const parts: number[] = [];
  for (const p of [m[1], m[2], m[3]]) {
    if (p === undefined || !/^\d+$/.test(p)) break;
    parts.push(Number(p));
  }
  return parts;
}

function pad(p: Partial): Version {
  return [p[0] ?? 0, p[1] ?? 0, p[2] ?? 0];
}

/** Every version the partial names: `18` → [18.0.0, 19.0.0), `18.2.1` → just 18.2.1. */
function xRange(p: Partial): Interval {
  const [a = 0, b = 0, c = 0] = p;
  switch (p.length) {
    case 0:
      return ANY;
    case 1:
      return { lo: [a, 0, 0], hi: [a + 1, 0, 0] };
    case 2:
      return { lo: [a, b, 0], hi: [a, b + 1, 0] };
    default:
      return { lo: [a, b, c], hi: [a, b, c + 1] };
  }
}

const EMPTY: Interval = { lo: INFINITE, hi: ZERO };

/** One comparator, npm (`^18`, `~18.2`, `>=18 <21`) or PEP 440 (`~=3.10`, `!=3.12.*`, `==3.11.*`). */
function comparator(token: string): { allow: Interval } | { deny: Interval } | null {
  const m = /^(>=|<=|>|<|===|==|=|!=|~=|~>|~|\^)?(.+)$/.exec(token);
  if (m === null) return null;
  const op = m[1] ?? '';
  const p = parsePartial((m[2] ?? '').replace(/\.\*$/, '.x'));
  if (p === null) return null;
  const x = xRange(p);
  const [a = 0, b = 0] = p;
  switch (op) {
    case '':
    case '=':
    case '==':
    case '===':
      return { allow: x };
    case '>=':
      return { allow: { lo: pad(p), hi: INFINITE } };
    case '>':
      return { allow: p.length === 0 ? EMPTY : { lo: x.hi, hi: INFINITE } };
    case '<':
      return { allow: p.length === 0 ? EMPTY : { lo: ZERO, hi: x.lo } };
    case '<=':
      return { allow: { lo: ZERO, hi: x.hi } };
    case '!=':
      return { deny: x };
    case '^':
      return { allow: { lo: pad(p), hi: a > 0 || p.length < 2 ? [a + 1, 0, 0] : [0, b + 1, 0] } };
    case '~':
    case '~>':
      return { allow: { lo: pad(p), hi: p.length <= 1 ? [a + 1, 0, 0] : [a, b + 1, 0] } };
    case '~=':
      return { allow: { lo: pad(p), hi: p.length <= 2 ? [a + 1, 0, 0] : [a, b + 1, 0] } };
    default:
      return null;
  }
}

/** A range as OR-ed comparator sets; null when any part is not understood. */
function parseRange(text: string): ComparatorSet[] | null {
  const sets: ComparatorSet[] = [];
  for (const alternative of text.split('||')) {
    const part = alternative.trim();
    const hyphen = /^(\S+)\s+-\s+(\S+)$/.exec(part);
    if (hyphen !== null) {
      const from = parsePartial(hyphen[1] ?? '');
      const to = parsePartial(hyphen[2] ?? '');
      if (from === null || to === null) return null;
      sets.push({ allow: { lo: pad(from), hi: xRange(to).hi }, deny: [] });
      continue;
    }
    // Commas (PEP 440) and spaces (npm) both mean "and"; an operator may be followed by a space.
    const tokens = part
      .replace(/,/g, ' ')
      .replace(/(>=|<=|>|<|===|==|=|!=|~=|~>|~|\^)\s+/g, '$1')
      .split(/\s+/)
      .filter((t) => t !== '');
    if (tokens.length === 0) {
      if (text.trim() === '') return null;
      sets.push({ allow: ANY, deny: [] });
      continue;
    }
    let allow = ANY;
    const deny: Interval[] = [];
    for (const token of tokens) {
      const c = comparator(token);
      if (c === null) return null;
      if ('deny' in c) deny.push(c.deny);
      else allow = { lo: maxV(allow.lo, c.allow.lo), hi: minV(allow.hi, c.allow.hi) };
    }
    sets.push({ allow, deny });
  }
  return sets;
}

/** Whether some version in `bucket` satisfies the range (an exclusion must cover all that is left). */
function rangeMeets(range: readonly ComparatorSet[], bucket: Interval): boolean {
  return range.some((set) => {
    const lo = maxV(set.allow.lo, bucket.lo);
    const hi = minV(set.allow.hi, bucket.hi);
    if (compare(lo, hi) >= 0) return false;
    return !set.deny.some((d) => compare(d.lo, lo) <= 0 && compare(d.hi, hi) >= 0);
  });
}

/** Release lines by codename (nvm's `lts/<name>`, setup-node's codenames). */
const NODE_CODENAMES: Readonly<Record<string, number>> = {
  argon: 4,
  boron: 6,
  carbon: 8,
  dubnium: 10,
  erbium: 12,
  fermium: 14,
  gallium: 16,
  hydrogen: 18,
  iron: 20,
  jod: 22,
  krypton: 24,
};

export interface VersionResolution {
  readonly version: string;
  /** How far the version is from what was asked, in majors (node) or minors (python); 0 = as asked. */
  readonly distance: number;
  /** The version's position among the offered ones (for "lowest of a matrix"). */
  readonly index: number;
  readonly note?: string;
}

/** The bucket of an offered version: a whole Node major, or a whole Python minor. */
function bucketOf(language: RuntimeLanguage, version: string): Interval | null {
  const p = parsePartial(version);
  if (p === null || p.length === 0) return null;
  return language === 'node' ? xRange(p.slice(0, 1)) : xRange([p[0] ?? 0, p[1] ?? 0]);
}

/** A bucket's position on one line (majors for node, 100·major + minor for python). */
function ordinal(language: RuntimeLanguage, bucket: Interval): number {
  return language === 'node' ? bucket.lo[0] : bucket.lo[0] * 100 + bucket.lo[1];
}

/** The buckets a request could mean, to measure how far an offered version is from it. */
function candidateBuckets(language: RuntimeLanguage): Interval[] {
  if (language === 'node') return Array.from({ length: 100 }, (_, m) => xRange([m]));
  const out: Interval[] = [];
  for (let minor = 0; minor <= 7; minor++) out.push(xRange([2, minor]));
  for (let minor = 0; minor <= 40; minor++) out.push(xRange([3, minor]));
  return out;
}

/**
 * Maps one request onto the offered versions: the highest offered version that satisfies it;
 * when none does, the offered version nearest to what it asks (ties: the newer). Null when the
 * request is not a version or range, or nothing could ever satisfy it.
 */
export function resolveVersion(
  language: RuntimeLanguage,
  request: string,
  offered: readonly string[],
): VersionResolution | null {
  const buckets = offered
    .map((version, index) => ({ version, index, bucket: bucketOf(language, version) }))
    .filter((o): o is { version: string; index: number; bucket: Interval } => o.bucket !== null)
    .sort((x, y) => compare(x.bucket.lo, y.bucket.lo))
    .map((o, index) => ({ ...o, index }));
  if (buckets.length === 0) return null;
  const range = language === 'node' ? nodeRange(request.trim(), buckets) : pythonRange(request.trim());
  if (range === null) return null;

  const satisfying = buckets.filter((o) => rangeMeets(range, o.bucket));
  const best = satisfying.at(-1);
  if (best !== undefined) return { version: best.version, distance: 0, index: best.index };

  const asked = candidateBuckets(language)
    .filter((b) => rangeMeets(range, b))
    .map((b) => ordinal(language, b));
  if (asked.length === 0) return null;
  let nearest = buckets[0];
  let nearestDistance = Infinity;
  for (const o of buckets) {
    const at = ordinal(language, o.bucket);
    const d = Math.min(...asked.map((a) => Math.abs(a - at)));
    if (d <= nearestDistance) {
      nearest = o;
      nearestDistance = d;
    }
  }
  if (nearest === undefined) return null;
  const which =
    buckets.length === 1
      ? 'the only one offered'
      : nearest.index === 0
        ? 'the oldest offered'
        : nearest.index === buckets.length - 1
          ? 'the newest offered'
          : 'the nearest offered';
  return {
    version: nearest.version,
    distance: nearestDistance,
    index: nearest.index,
    note: `requested ${request.trim()}, which this deployment does not offer; using ${nearest.version}, ${which}`,
  };
}

/** npm-style ranges plus nvm/setup-node aliases: `lts/*`, `lts/-1`, `node`, `latest`, codenames. */
function nodeRange(
  request: string,
  offered: readonly { readonly bucket: Interval }[],
): ComparatorSet[] | null {
  const lower = request.toLowerCase();
  const exact = (major: number): ComparatorSet[] => [{ allow: xRange([major]), deny: [] }];
  const newestOffered = offered.at(-1)?.bucket.lo[0];
  if (newestOffered === undefined) return null;
  if (['node', 'latest', 'current', 'stable'].includes(lower)) return exact(newestOffered);
  const lts = /^lts\/(\*|-(\d+))$/.exec(lower);
  if (lts !== null || lower === 'lts') {
    const ltsMajors = offered.map((o) => o.bucket.lo[0]).filter((m) => m % 2 === 0);
    const newestLts = ltsMajors.at(-1);
    if (newestLts === undefined) return null;
    const back = Number(lts?.[2] ?? 0);
    return exact(newestLts - 2 * back);
  }
  const codename = NODE_CODENAMES[lower.replace(/^lts\//, '')];
  if (codename !== undefined) return exact(codename);
  return parseRange(request);
}

/** PEP 440 specifiers (and Poetry's `^`/`~`, setup-python's `pypy3.9`, `3.x`). */
function pythonRange(request: string): ComparatorSet[] | null {
  return parseRange(request.replace(/^pypy-?/i, ''));
}

// ---------------------------------------------------------------------------------------------

function newest(versions: readonly string[]): string | undefined {
  return [...versions].sort((a, b) => compare(pad(parsePartial(a) ?? []), pad(parsePartial(b) ?? []))).at(-1);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}
