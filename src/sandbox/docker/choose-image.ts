import { readdir } from 'node:fs/promises';

export const IMAGES = {
  base: 'issue-agent/base:latest',
  node: 'issue-agent/node:latest',
  python: 'issue-agent/python:latest',
} as const;

export type ImageKind = keyof typeof IMAGES;

/**
 * The sandbox image for a repository, from the files at its root: package.json → node;
 * pyproject.toml, setup.py, setup.cfg or requirements*.txt → python; otherwise base. A per-repo
 * setting wins: pass `override` (an image kind or a full image reference).
 */
export function chooseImageKind(rootFiles: readonly string[]): ImageKind {
  const files = new Set(rootFiles);
  if (files.has('package.json')) return 'node';
  if (
    files.has('pyproject.toml') ||
    files.has('setup.py') ||
    files.has('setup.cfg') ||
    rootFiles.some((f) => /^requirements.*\.txt$/.test(f))
  ) {
    return 'python';
  }
  return 'base';
}

/** chooseImageKind over a workspace directory, as an image reference. */
export async function chooseImage(workspace: string, override?: ImageKind | (string & {})): Promise<string> {
  if (override !== undefined) return override in IMAGES ? IMAGES[override as ImageKind] : override;
  return IMAGES[chooseImageKind(await readdir(workspace))];
}
