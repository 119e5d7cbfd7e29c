import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { DockerSandbox } from '../../src/sandbox/docker/docker-sandbox.js';
import { isolationSupport } from '../../src/sandbox/local/launch.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { descendantsOf } from '../../src/sandbox/local/proc-tree.js';
import { SandboxCancelledError } from '../../src/sandbox/sandbox.js';
import {
  containerRuns,
  dockerTest,
  labelledContainers,
  tempWorkspace,
  testOwner,
  waitFor,
} from './docker/docker-test-support.js';

/**
 * A sandbox's start cancelled while a setup command hangs: the start rejects with
 * SandboxCancelledError within the issue's 5 s, the command is no longer running, and nothing the
 * start made is left (the container; the sandbox's namespaces and host folders).
 */

const BOUND_MS = 5_000;

/** A setup command no other process on the host runs: `sleep <n>`. */
function hangingCommand(): string {
  return `sleep ${String(600 + Math.floor(Math.random() * 99_000))}`;
}

/** Pids of the processes whose command line is `command` (split on spaces). */
async function running(command: string): Promise<number[]> {
  const want = `${command.split(' ').join('\0')}\0`;
  const out: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (cmdline === want) out.push(Number(name));
  }
  return out;
}

/** Aborts once `ready` holds, then measures how long the start takes to reject. */
async function cancelWhen(
  start: (signal: AbortSignal) => Promise<{ close(): Promise<void> }>,
  ready: () => Promise<boolean>,
): Promise<{ readonly error: unknown; readonly ms: number }> {
  const controller = new AbortController();
  const starting = start(controller.signal).then(
    async (sandbox) => {
      await sandbox.close();
      return null;
    },
    (error: unknown) => error,
  );
  let settled = false;
  void starting.then(() => (settled = true));
  await waitFor(
    async () => {
      if (settled) throw new Error(`the start ended before its setup ran: ${String(await starting)}`);
      return ready();
    },
    60_000,
    'the setup command to run',
  );
  const t0 = performance.now();
  controller.abort('cancelled by the test');
  const error = await starting;
  return { error, ms: Math.round(performance.now() - t0) };
}

dockerTest(
  'DockerSandbox.create: an abort during a hanging setup command removes the container within 5 s',
  async (docker, t) => {
    const owner = testOwner('setup-cancel');
    const scratchParent = await tempWorkspace(t, 'ia-setup-cancel-scratch-');
    const workspace = await tempWorkspace(t);
    const command = hangingCommand();
    const { error, ms } = await cancelWhen(
      (signal) =>
        DockerSandbox.create({
          docker,
          workspace,
          jobId: 'setup-cancel',
          image: 'issue-agent/base:latest',
          owner,
          scratchParent,
          setup: { commands: [command], env: {}, secretValues: [], timeoutMs: 600_000, outputs: [] },
          signal,
        }),
      async () => {
        const [id] = await labelledContainers(docker, owner);
        if (id === undefined) return false;
        return containerRuns(docker, id, command);
      },
    );
    console.log(`# docker: setup cancelled in ${ms} ms`);
    assert.ok(error instanceof SandboxCancelledError, String(error));
    assert.equal(error.message, 'cancelled during setup');
    assert.equal(error.reason, 'cancelled by the test');
    assert.ok(ms <= BOUND_MS, `${ms} ms`);
    assert.deepEqual(await labelledContainers(docker, owner), [], 'the container is gone');
    assert.deepEqual(await readdir(scratchParent), [], 'no scratch folder is left');
  },
  { timeout: 120_000 },
);

test(
  'LocalSandbox.create: an abort during a hanging setup command ends the sandbox within 5 s, nothing left',
  { timeout: 120_000 },
  async (t) => {
    const support = await isolationSupport();
    if (!support.ok) {
      t.skip(`no isolation here: ${support.reason}`);
      return;
    }
    const root = await mkdtemp(join(tmpdir(), 'ia-setup-cancel-'));
    t.after(() => rm(root, { recursive: true, force: true }));
    const workspace = join(root, 'workspace');
    const scratch = join(root, 'tmp');
    await Promise.all([mkdir(workspace), mkdir(scratch)]);
    // The sandbox's folders go where this test looks (os.tmpdir() reads TMPDIR at each call).
    const before = process.env.TMPDIR;
    process.env.TMPDIR = scratch;
    t.after(() => {
      if (before === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = before;
    });
    // This process's own children (the TypeScript loader's service) are not the sandbox's.
    const ours = new Set(await descendantsOf(process.pid));
    const command = hangingCommand();
    const { error, ms } = await cancelWhen(
      (signal) =>
        LocalSandbox.create({
          workspace,
          path: process.env.PATH ?? '/usr/bin:/bin',
          isolate: { hide: [], workspaceBytes: 64 * 1024 * 1024 },
          setup: { commands: [command], env: {}, secretValues: [], timeoutMs: 600_000, outputs: [] },
          signal,
        }),
      async () => {
        const below = new Set(await descendantsOf(process.pid));
        return (await running(command)).some((p) => below.has(p));
      },
    );
    console.log(`# local: setup cancelled in ${ms} ms`);
    assert.ok(error instanceof SandboxCancelledError, String(error));
    assert.ok(ms <= BOUND_MS, `${ms} ms`);
    assert.deepEqual(await running(command), [], 'the setup command is gone');
    // Killed host-side helpers are reaped by this process's event loop: a moment, no more.
    const left = async (): Promise<string[]> =>
      Promise.all(
        (await descendantsOf(process.pid))
          .filter((p) => !ours.has(p))
          .map(
            async (p) =>
              `${p} ${(await readFile(`/proc/${p}/cmdline`, 'utf8').catch(() => '')).split('\0').join(' ')}`,
          ),
      );
    await waitFor(async () => (await left()).length === 0, 2_000, 'no process left').catch(
      async (error: unknown) => {
        assert.fail(`${String(error)}: ${(await left()).join('; ')}`);
      },
    );
    assert.deepEqual(await readdir(scratch), [], 'no folder of the sandbox is left');
  },
);
