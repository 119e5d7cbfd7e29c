import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { readAgentEnv } from '../../src/config/agent-env.js';
import type { BaseState } from '../../src/events/schema.js';
import { FileRunStorage } from '../../src/events/run-storage.js';
import type { FixJob } from '../../src/queue/payloads.js';
import { unconfinedBackend } from '../../src/sandbox/local/backend.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { runInSandbox } from '../../src/worker/stages/run.js';
import type { JobContext } from '../../src/worker/stages/types.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';

/** Thrown by the storage once the base state is in hand: the agent itself is not run. */
class BaseWritten extends Error {
  constructor(readonly base: BaseState) {
    super('base state written');
  }
}

test("a new worker trajectory names the backend as the backend calls itself, not the sandbox's implementation", async (t) => {
  const repo = makeFixtureRepo('node-calc');
  const jobsDir = mkdtempSync(join(tmpdir(), 'ia-trajectory-backend-'));
  const sandbox = await LocalSandbox.create({
    workspace: repo.dir,
    path: process.env.PATH ?? '/usr/bin:/bin',
  });
  t.after(async () => {
    await sandbox.close();
    repo.cleanup();
    rmSync(jobsDir, { recursive: true, force: true });
  });
  const files = new FileRunStorage(jobsDir);
  const storage = {
    discard: (runId) => files.discard(runId),
    create: (_runId, base) => Promise.reject(new BaseWritten(base)),
  } as JobContext['storage'];
  const p = {
    kind: 'fix-issue',
    repo: { owner: 'acme', name: 'calc', id: 7 },
    issue: { number: 3 },
    instructions: [],
    config: { budgets: {}, testCommand: undefined, triage: 'off' },
  } as unknown as FixJob;
  const ctx = {
    p,
    jobId: 'job-1',
    jobsDir,
    storage,
    paths: { trajectory: join(jobsDir, 'job-1', 'trajectory'), pristine: repo.dir, workspace: repo.dir },
    // The instructions are read from the pristine clone; a failure to read them is not the run's.
    git: {
      revParse: () => Promise.reject(new Error('no pristine clone in this test')),
    },
    log: pino({ level: 'silent' }),
    redactor: () => ({ redact: (text: string) => text }),
  } as unknown as JobContext;
  // The unconfined backend's sandbox is a LocalSandbox, whose own kind is `local`.
  assert.equal(sandbox.kind, 'local');
  const error = await runInSandbox({
    ctx,
    sandbox,
    store: null,
    environment: null,
    pull: null,
    issue: { title: 'Average rounds wrong', body: 'It truncates.' },
    agent: readAgentEnv({}),
    model: () => {
      throw new Error('no model in this test');
    },
    signal: new AbortController().signal,
    baseBranch: 'main',
    canContinue: true,
    hostDiskSealed: unconfinedBackend.hostDiskSealed,
    backendKind: unconfinedBackend.kind,
  }).then(
    () => null,
    (e: unknown) => e,
  );
  assert.ok(error instanceof BaseWritten, String(error));
  assert.equal(error.base.sandbox, 'unconfined');
});
