import { chmodSync, mkdirSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
/** Areas the isolated local sandbox replaces with private, empty ones. */
const PRIVATE = /^\/(tmp|var\/tmp|run|dev\/shm)(\/|$)/;

/**
 * A fresh folder (mode 0755) for a test whose host files the isolated local sandbox must mask or
 * hide by itself: under the checkout's `test-artifacts/`, unless the checkout is under /tmp (a CI
 * clone), where the sandbox's private /tmp would hide it anyway and prove nothing about the mask;
 * then under /var/lib (a root host, as CI is). The caller removes it.
 */
export function hostArtifacts(name: string): string {
  const inRepo = join(REPO, 'test-artifacts', name);
  const base =
    PRIVATE.test(inRepo) && process.getuid?.() === 0 ? join('/var/lib/issue-agent-tests', name) : inRepo;
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(join(base, 'run-'));
  chmodSync(dir, 0o755);
  return dir;
}
