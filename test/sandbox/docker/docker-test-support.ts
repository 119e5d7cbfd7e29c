import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { IMAGES } from '../../../src/sandbox/docker/choose-image.js';
import { tallied } from '../../support/attack-log.js';
import { LABEL_OWNER, LABEL_SANDBOX } from '../../../src/sandbox/docker/owner.js';

export const execFileAsync = promisify(execFile);

/** Set in CI: a missing engine or image is a failure, not a skip. */
const required = process.env.ISSUE_AGENT_REQUIRE_DOCKER === '1';

/** One ping, bounded: a socket nobody answers on must not hang the file. */
async function ping(docker: Docker, ms: number): Promise<void> {
  await Promise.race([
    docker.ping(),
    new Promise((_, reject) =>
      setTimeout(() => {
        reject(new Error(`ping timed out after ${String(ms / 1000)} s`));
      }, ms).unref(),
    ),
  ]);
}

async function probe(): Promise<{ docker: Docker } | { reason: string }> {
  const docker = new Docker();
  // A machine starved by the suite (two test files and their containers on two cores) can take
  // longer than one ping's bound to answer: where the engine is required, a slow answer is asked
  // again for up to a minute before it counts as missing. Without the flag, one ping decides.
  const deadline = Date.now() + (required ? 60_000 : 0);
  for (;;) {
    try {
      await ping(docker, 5000);
      break;
    } catch (error) {
      if (Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        continue;
      }
      return {
        reason: `no Docker engine answers (${error instanceof Error ? error.message : String(error)}); run scripts/setup-docker.sh`,
      };
    }
  }
  for (const image of Object.values(IMAGES)) {
    try {
      await docker.getImage(image).inspect();
    } catch {
      return { reason: `image ${image} is missing; run scripts/build-images.sh` };
    }
  }
  return { docker };
}

const engine = await probe();
if ('reason' in engine) {
  console.log(`# docker tests ${required ? 'FAIL' : 'skipped'}: ${engine.reason}`);
}

/**
 * A test against the real engine: skipped with the reason when no engine answers, failed instead
 * when ISSUE_AGENT_REQUIRE_DOCKER=1.
 */
export function dockerTest(
  name: string,
  fn: (docker: Docker, t: TestContext) => Promise<void>,
  /** attack: the test is one of the attack suite's (an escape attempt), tallied with it. */
  options: { timeout?: number; attack?: boolean } = {},
): void {
  if ('reason' in engine) {
    if (required) {
      test(name, () => {
        throw new Error(`ISSUE_AGENT_REQUIRE_DOCKER=1 but ${engine.reason}`);
      });
    } else {
      test(name, { skip: engine.reason }, () => undefined);
    }
    return;
  }
  const { docker } = engine;
  test(name, { timeout: options.timeout ?? 60_000 }, (t) =>
    options.attack === true ? tallied(name, async () => fn(docker, t)) : fn(docker, t),
  );
}

/** The engine, or why there is none (a failure instead of a skip when ISSUE_AGENT_REQUIRE_DOCKER=1). */
export function dockerEngine():
  { readonly docker: Docker } | { readonly reason: string; readonly required: boolean } {
  return 'reason' in engine ? { reason: engine.reason, required } : engine;
}

/** A fresh host directory, removed after the test. */
export async function tempWorkspace(t: TestContext, prefix = 'ia-docker-test-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Ids of our labelled containers (optionally only the ones with this owner label). */
export async function labelledContainers(docker: Docker, owner?: string): Promise<string[]> {
  const label = [`${LABEL_SANDBOX}=1`];
  if (owner !== undefined) label.push(`${LABEL_OWNER}=${owner}`);
  const list = await docker.listContainers({ all: true, filters: { label } });
  return list.map((c) => c.Id);
}

/** Polls `check` until it returns true or the deadline passes (no fixed sleeps). */
export async function waitFor(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let delay = 10;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 200);
  }
}

/** A unique owner label per test, so parallel test files never count each other's containers. */
export function testOwner(name: string): string {
  return `test-${name}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Whether a process with exactly this command line runs in the container (`docker top`). */
export async function containerRuns(docker: Docker, id: string, command: string): Promise<boolean> {
  // The engine needs a pid column in what ps prints.
  const top: unknown = await docker
    .getContainer(id)
    .top({ ps_args: '-eo pid,args' })
    .catch(() => null);
  if (typeof top !== 'object' || top === null || !('Processes' in top) || !Array.isArray(top.Processes))
    return false;
  const rows: unknown[] = top.Processes;
  return rows.some((row) => Array.isArray(row) && row.slice(1).join(' ') === command);
}
