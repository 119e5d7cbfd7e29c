import type { SandboxBackend } from './backend.js';

/**
 * The one list of sandbox backends, by the name `--sandbox`, the Action's `sandbox` input and
 * ISSUE_AGENT_SANDBOX give. Each is loaded on first use, so an entry point that does not choose
 * Docker never loads dockerode. A new backend is a folder of src/sandbox and one line here.
 */
const BACKENDS = new Map<string, () => Promise<SandboxBackend>>([
  ['local', async () => (await import('./local/backend.js')).localBackend],
  ['docker', async () => (await import('./docker/backend.js')).dockerBackend],
  ['unconfined', async () => (await import('./local/backend.js')).unconfinedBackend],
]);

/** The names of the backends there are, in the table's order. */
export function backendKinds(): readonly string[] {
  return [...BACKENDS.keys()];
}

export function isBackendKind(kind: string): boolean {
  return BACKENDS.has(kind);
}

/** The backend of that name (see backendKinds); a name not in the table is the caller's bug. */
export async function loadBackend(kind: string): Promise<SandboxBackend> {
  const load = BACKENDS.get(kind);
  if (load === undefined)
    throw new Error(`no sandbox backend "${kind}" (there are ${backendKinds().join(', ')})`);
  const backend = await load();
  if (backend.kind !== kind)
    throw new Error(`the sandbox backend listed as "${kind}" calls itself "${backend.kind}"`);
  return backend;
}

/**
 * A test's hook: one more entry in the table, for this process only (a test preloads a module that
 * calls it with `--import`; no setting of a deployment reaches it). Returns its removal.
 */
export function addBackendForTests(kind: string, load: () => Promise<SandboxBackend>): () => void {
  if (BACKENDS.has(kind)) throw new Error(`a sandbox backend "${kind}" is already listed`);
  BACKENDS.set(kind, load);
  return () => {
    BACKENDS.delete(kind);
  };
}
