import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { oracle, startModelSimulator } from '../../src/model-sim/index.js';
import { isolationSupport } from '../../src/sandbox/local/launch.js';
import { cliEnv, lastJson, runCli } from '../support/cli.js';
import { buildTaskSet } from '../support/eval-tasks.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';
import { labelledIssue, readJobRun, startStack } from '../support/pipeline.js';
import {
  readRecords,
  RECORDING_HOOK,
  RECORDING_KIND,
  RECORDING_LOG_ENV,
} from '../support/recording-backend.js';
import { redisSkipReason } from '../support/redis-server.js';

/**
 * Must-show 2 of issue 35: a backend that is not one of the table's own (test/support's recording
 * backend, over the isolated local one) is added through the table's test hook alone and named
 * where a user names a backend; the CLI, eval and the App's worker run a job through it end to end
 * with no change of their own, and its records say it was the one each used.
 */
const support = await isolationSupport();
const noIsolation =
  !support.ok && process.env.ISSUE_AGENT_REQUIRE_DOCKER !== '1'
    ? `no isolation here: ${support.reason}`
    : false;
const KEY = 'sk-ant-third-backend-0123456789';

function logIn(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'ia-third-backend-'));
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return join(dir, 'provisioned.jsonl');
}

test(
  'the CLI resolves a checkout in the third backend',
  { skip: noIsolation, timeout: 300_000 },
  async (t) => {
    const log = logIn(t);
    const repo = makeFixtureRepo('node-calc');
    const sim = await startModelSimulator({ policy: oracle(repo.patch), apiKey: KEY });
    t.after(async () => {
      await sim.close();
      repo.cleanup();
    });
    const traj = join(tmpdir(), `ia-third-cli-${process.pid}`);
    t.after(() => {
      rmSync(traj, { recursive: true, force: true });
    });
    const r = await runCli(
      [
        'resolve',
        repo.dir,
        '--task',
        'Fix the failing tests',
        '--sandbox',
        RECORDING_KIND,
        '--out',
        traj,
        '--json',
      ],
      cliEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: sim.url, [RECORDING_LOG_ENV]: log }),
      [RECORDING_HOOK],
    );
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.equal(lastJson(r.stdout).outcome, 'resolved');
    const store = FileEventStore.open(traj);
    assert.equal(store.base.sandbox, RECORDING_KIND, 'the trajectory names the backend the CLI chose');
    const records = readRecords(log);
    assert.deepEqual(
      records.map((x) => [x.entry, x.command, x.jobId, x.lazyAgentShell]),
      [['src/cli/main.ts', 'resolve', `cli-${store.base.conversationId}`, false]],
    );
  },
);

test(
  'eval grades a task whose sandboxes the third backend made',
  { skip: noIsolation, timeout: 300_000 },
  async (t) => {
    const log = logIn(t);
    const set = buildTaskSet({ only: ['py-clamp'] });
    t.after(() => {
      set.cleanup();
    });
    const out = join(set.dir, 'out');
    const r = await runCli(
      ['eval', set.file, '--model', 'oracle', '--sandbox', RECORDING_KIND, '--out', out],
      cliEnv({ [RECORDING_LOG_ENV]: log }),
      [RECORDING_HOOK],
    );
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const result = JSON.parse(readFileSync(join(out, 'tasks', 'py-clamp', 'result.json'), 'utf8')) as {
      resolved: boolean;
      trajectory: string;
    };
    assert.equal(result.resolved, true);
    const base = FileEventStore.open(result.trajectory).base;
    assert.equal(base.sandbox, RECORDING_KIND);
    assert.equal(
      (JSON.parse(readFileSync(join(out, 'eval.json'), 'utf8')) as { sandbox: string }).sandbox,
      RECORDING_KIND,
    );
    // The agent's sandbox and grading's, both labelled as the CLI labels its own (`cli-<runId>`).
    const records = readRecords(log);
    assert.deepEqual(
      records.map((x) => [x.entry, x.command, x.jobId, x.lazyAgentShell]).sort(),
      [
        ['src/cli/main.ts', 'eval', `cli-${base.conversationId}`, false],
        ['src/cli/main.ts', 'eval', `cli-${base.conversationId}-grade`, true],
      ].sort(),
    );
  },
);

const noWorker = noIsolation || redisSkipReason();
test(
  "the App's worker opens a pull request from a run in the third backend",
  { skip: noWorker, timeout: 400_000 },
  async (t) => {
    const log = logIn(t);
    const stack = await startStack({
      owner: 'acme',
      repo: 'calc',
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: KEY,
      sandbox: RECORDING_KIND,
      imports: [RECORDING_HOOK],
      env: { [RECORDING_LOG_ENV]: log },
      policy: (fixture) => oracle(fixture.patch),
    });
    t.after(() => stack.stop());
    const n = await labelledIssue(stack, {
      title: 'Average rounds wrong',
      body: 'average() truncates instead of rounding: average([1, 2, 2]) should be 1.67.',
    });
    await stack.sim.waitFor(
      () => stack.sim.pulls('acme', 'calc').some((p) => p.head.ref === `issue-agent/issue-${n}`),
      240_000,
      () => `the PR\n${stack.pipeline.logs()}`,
    );
    const records = readRecords(log);
    const worker = stack.pipeline.workers[0]?.child.pid;
    assert.ok(records.length > 0, 'the worker provisioned through the third backend');
    assert.ok(
      records.every((x) => x.entry === 'workers/main.ts' && x.pid === worker),
      JSON.stringify(records),
    );
    // The agent's sandbox, and (an isolated backend) the verdict's fresh one, for the same job.
    const agent = records.filter((x) => !x.lazyAgentShell);
    assert.equal(agent.length, 1, JSON.stringify(records));
    assert.ok(
      records.every((x) => x.jobId === agent[0]?.jobId),
      JSON.stringify(records),
    );
    assert.equal(agent[0]?.sandboxKind, 'local', 'the sandbox is the inner backend’s');
    assert.equal(
      readJobRun(stack, agent[0].jobId).base.sandbox,
      RECORDING_KIND,
      'the trajectory names the backend the worker chose',
    );
  },
);
