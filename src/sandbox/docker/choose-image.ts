import { readdir } from 'node:fs/promises';

/** The default image of each kind; `issue-agent/node:latest` is the default Node major (22). */
export const IMAGES = {
  base: 'issue-agent/base:latest',
  node: 'issue-agent/node:latest',
  python: 'issue-agent/python:latest',
} as const;

export type ImageKind = keyof typeof IMAGES;

/** Image repositories without a tag: `issue-agent/node:<major>`, `issue-agent/python:<major.minor>`. */
export const IMAGE_REPOSITORIES: { readonly [K in ImageKind]: string } = {
  base: 'issue-agent/base',
  node: 'issue-agent/node',
  python: 'issue-agent/python',
};

/** Python project files at the repository root: pyproject.toml, setup.py, setup.cfg, requirements*.txt. */
/** Files at a root that say the project is Python's (a bare pytest setup counts: its tests need pytest). */
const PYTHON_MARKERS = new Set([
  'pyproject.toml',
  'setup.py',
  'setup.cfg',
  'Pipfile',
  'pytest.ini',
  'tox.ini',
  'conftest.py',
]);

export function isPythonProject(rootFiles: readonly string[]): boolean {
  return rootFiles.some((f) => PYTHON_MARKERS.has(f) || /^requirements.*\.txt$/.test(f));
}

/**
 * The sandbox image for a repository, from the files at its root: package.json → node;
 * pyproject.toml, setup.py, setup.cfg, Pipfile, requirements*.txt, pytest.ini, tox.ini or
 * conftest.py → python; otherwise base. A per-repo
 * setting wins: pass `override` (an image kind or a full image reference).
 */
export function chooseImageKind(rootFiles: readonly string[]): ImageKind {
  if (rootFiles.includes('package.json')) return 'node';
  if (isPythonProject(rootFiles)) return 'python';
  return 'base';
}

function isImageKind(value: string): value is ImageKind {
  return Object.hasOwn(IMAGES, value);
}

/** chooseImageKind over a workspace directory, as an image reference. */
export async function chooseImage(workspace: string, override?: ImageKind | (string & {})): Promise<string> {
  if (override !== undefined) return isImageKind(override) ? IMAGES[override] : override;
  return IMAGES[chooseImageKind(await readdir(workspace))];
}

/** What imageReference needs of a RuntimeChoice (src/environment/runtime.ts). */
export interface RuntimeImageInput {
  readonly imageKind: ImageKind;
  readonly runtimes: readonly { readonly language: string; readonly version: string }[];
}

/**
 * The image for a detected runtime: `issue-agent/node:<major>`, `issue-agent/python:<version>` or
 * the base image. A configured image (the repo config's `image:`) wins and is returned as given,
 * even a bare `node` (that names Docker Hub's image, not an image kind).
 */
export function imageReference(choice: RuntimeImageInput, configured?: string): string {
  if (configured !== undefined && configured.trim() !== '') return configured;
  const kind = choice.imageKind;
  if (kind === 'base') return IMAGES.base;
  const runtime = choice.runtimes.find((r) => r.language === kind);
  return runtime === undefined ? IMAGES[kind] : `${IMAGE_REPOSITORIES[kind]}:${runtime.version}`;
}
