import { hostProbe } from '../../environment/host-probe.js';
import { detectProject, markerKind, type ProjectKind } from '../../testing/detect-project.js';

/** The image kinds are the project kinds detection tells apart. */
export type ImageKind = ProjectKind;

/** The default image of each kind; `issue-agent/node:latest` is the default Node major (22). */
export const IMAGES: { readonly [K in ImageKind]: string } = {
  base: 'issue-agent/base:latest',
  node: 'issue-agent/node:latest',
  python: 'issue-agent/python:latest',
};

/** Image repositories without a tag: `issue-agent/node:<major>`, `issue-agent/python:<major.minor>`. */
export const IMAGE_REPOSITORIES: { readonly [K in ImageKind]: string } = {
  base: 'issue-agent/base',
  node: 'issue-agent/node',
  python: 'issue-agent/python',
};

/**
 * The image kind the project files at a root ask for (package.json → node; a Python project file →
 * python; otherwise base), without reading the code: detectProject (src/testing/detect-project.ts)
 * is the whole decision, these files first.
 */
export function chooseImageKind(rootFiles: readonly string[]): ImageKind {
  return markerKind(rootFiles)?.kind ?? 'base';
}

function isImageKind(value: string): value is ImageKind {
  return Object.hasOwn(IMAGES, value);
}

/**
 * The image for a workspace directory, as detectProject decides it from its files, its code and its
 * tests; a per-repo setting wins: pass `override` (an image kind or a full image reference). Read
 * on the host, so only before any sandbox process has run there (see hostProbe).
 */
export async function chooseImage(workspace: string, override?: ImageKind | (string & {})): Promise<string> {
  if (override !== undefined) return isImageKind(override) ? IMAGES[override] : override;
  return IMAGES[(await detectProject(hostProbe(workspace))).kind];
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
