import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after } from 'node:test';
import { startStack, type Stack } from '../support/pipeline.js';
import type { EventOf } from '../../src/events/schema.js';
import { oracle } from '../../src/model-sim/index.js';
import { manyStepsThenOracle, routeByTag } from '../support/pipeline-fixtures.js';
import { redisSkipReason } from '../support/redis-server.js';
import { describeTimeline, jobTimeline } from '../support/timeline.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

const STEPS = 50;
const MANY = '[fifty steps]';

/**
 * One stack for both tests (a Docker stack and its first job are the file's largest cost): the
 * issues titled with MANY take STEPS quick steps before the fix, the others go straight to it.
 */
let started: Promise<Stack> | undefined;
const stackOnce = (): Promise<Stack> =>
  (started ??= startStack({
    owner: 'acme',
    repo: 'calc',
    maintainer: { login: 'maria', permission: 'maintain' },
    modelKey: 'sk-ant-latency-0123456789abcdef',
    sandbox: 'docker',
    policy: (fixture) =>
      routeByTag({ [MANY]: manyStepsThenOracle(STEPS, fixture.patch) }, oracle(fixture.patch)),
  }));
after(async () => {
  const stack = await started?.catch(() => undefined);
  await stack?.stop();
});

const progressOf = (stack: Stack, n: number): string =>
  stack.sim.comments('acme', 'calc', n).find((c) => c.user === stack.sim.app.botLogin)?.body ?? '';

/**
 * The stack's first job: STEPS fast steps, then the fix (test 1's run; also the first job of test
 * 2, whose baseline the second job reuses). Started once, by whichever test asks first.
 */
let first: Promise<{ n: number; labelled: number }> | undefined;
const fiftyStepJob = (stack: Stack): Promise<{ n: number; labelled: number }> =>
  (first ??= (async () => {
    const { sim, pipeline } = stack;
    const n = sim.createIssue('acme', 'calc', {
      title: `Average rounds wrong ${MANY}`,
      body: 'average([1, 2, 2]) should be 1.67',
      author: 'maria',
    }).number;
    const labelled = Date.now();
    await sim.label('acme', 'calc', n, 'agent', 'maria');
    await sim
      .waitFor(() => /Pull request \[?#\d+|Finished|failed/i.test(progressOf(stack, n)), 120_000, 'the PR')
      .catch((error: unknown) => {
        const seen = sim.requests.map((r) => `${r.method} ${r.path} ${r.status}`).join('\n');
        throw new Error(`${String(error)}\n${pipeline.logs()}\n${seen}\n${progressOf(stack, n)}`);
      });
    return { n, labelled };
  })());

/**
 * The time a person waits is the time the agent works (issue 17): a job of 50 fast steps with the
 * progress interval at 0 (every step asks for an edit), in the Docker sandbox. The progress comment
 * is edited about once a second whatever the step count, the pull request is opened within a second
 * of the job's last event (it never waits behind progress edits), and the comment's last state is
 * the final one.
 */
dockerTest(
  'App pipeline, Docker: 50 fast steps → progress edits bounded by the run time, publishing behind no queue of step edits, the final state last',
  async (_docker, t) => {
    const skip = redisSkipReason();
    if (skip !== false) {
      t.skip(skip);
      return;
    }
    const stack = await stackOnce();
    const { sim, pipeline } = stack;
    const { n, labelled } = await fiftyStepJob(stack);
    assert.match(progressOf(stack, n), /Pull request \[?#\d+/);
    // Nothing stale lands after the final state: read once the job has ended.
    assert.equal(await pipeline.jobsEnded(n), 1);
    const jobs = join(pipeline.workDir, 'work', 'jobs');
    const job = readdirSync(jobs).find((j) => new RegExp(`^r\\d+-i${n}-`).test(j));
    assert.ok(job);
    const tl = jobTimeline({
      labelled,
      requests: sim.requests,
      owner: 'acme',
      repo: 'calc',
      trajectoryDir: join(jobs, job, 'trajectory'),
    });
    t.diagnostic(describeTimeline(tl));
    assert.ok(tl.events > 2 * STEPS, `the run had its ${STEPS} steps (${tl.events} events)`);
    assert.ok(tl.agentStart !== null && tl.lastEvent !== null && tl.prCreated !== null);
    // Publishing starts as soon as the job ends, behind no queue of step edits: between the last
    // event and the PR's POST at most the edit already in flight and the "publishing" state go
    // out. (Counted, not timed: on a loaded CI machine the push alone can take a second; the time
    // is in the diagnostic above and in docs/benchmarks.md.)
    const { lastEvent, prCreated } = tl;
    const editsBeforePr = sim.requests.filter(
      (r) =>
        r.method === 'PATCH' &&
        r.path.startsWith('/repos/acme/calc/issues/comments/') &&
        r.at > lastEvent &&
        r.at < prCreated,
    ).length;
    assert.ok(editsBeforePr <= 2, `${editsBeforePr} progress edits before the PR\n${describeTimeline(tl)}`);
    // Edits: about one per second of the job's run (the progress lane's pacing), never one per step.
    const runSeconds = ((tl.lastCommentEdit ?? tl.prCreated) - labelled) / 1000;
    assert.ok(
      tl.commentEdits <= Math.ceil(runSeconds) + 2,
      `${tl.commentEdits} edits in ${runSeconds.toFixed(1)} s\n${describeTimeline(tl)}`,
    );
    assert.ok(tl.commentEdits < STEPS / 2, `${tl.commentEdits} edits for ${STEPS} steps`);
    // The comment's history: the last edit is the final state, and no step state follows a final one.
    const edits = sim.comments('acme', 'calc', n).find((c) => c.user === sim.app.botLogin)?.edits ?? [];
    assert.match(edits.at(-1) ?? '', /Pull request \[?#\d+(\]\([^)]*\))? opened/);
    const finalAt = edits.findIndex((e) => /Pull request \[?#\d+/.test(e));
    assert.equal(finalAt, edits.length - 1, 'the final state is the last edit');
  },
  { timeout: 300_000 },
);

/**
 * Reused baselines through the App (issue 17): a second job on the same base commit, environment and
 * test command records the first job's baseline instead of running the tests again, and its PR says so.
 * The first job is the stack's fifty-step one (what it does after its baseline does not matter here).
 */
dockerTest(
  'App pipeline, Docker: a second job on the same base reuses the first job’s baseline, and its PR says so',
  async (_docker, t) => {
    const skip = redisSkipReason();
    if (skip !== false) {
      t.skip(skip);
      return;
    }
    const stack = await stackOnce();
    const { sim, pipeline } = stack;
    const baselineOf = async (n: number): Promise<EventOf<'test_run'>> => {
      const progressOf = (): string =>
        sim.comments('acme', 'calc', n).find((c) => c.user === sim.app.botLogin)?.body ?? '';
      // "Publishing … opening a pull request" comes before the pull request: wait for the end.
      await sim.waitFor(
        () => /Pull request \S+ opened|Finished without|failed/.test(progressOf()),
        120_000,
        () => `job #${n}: ${progressOf()}`,
      );
      const jobs = join(pipeline.workDir, 'work', 'jobs');
      const job = readdirSync(jobs).find((j) => new RegExp(`^r\\d+-i${n}-`).test(j));
      assert.ok(job, `a job folder for #${n}`);
      const events = join(jobs, job, 'trajectory', 'events');
      const file = readdirSync(events).find((f) => f.endsWith('-test_run.json'));
      assert.ok(file);
      const e = JSON.parse(readFileSync(join(events, file), 'utf8')) as EventOf<'test_run'>;
      assert.equal(e.phase, 'baseline');
      return e;
    };
    const issue = (title: string): number =>
      sim.createIssue('acme', 'calc', { title, body: 'average([1, 2, 2]) should be 1.67', author: 'maria' })
        .number;
    // The stack's first job (test 1's, when it ran): nothing to reuse yet.
    const { n: a } = await fiftyStepJob(stack);
    const first = await baselineOf(a);
    assert.equal(first.reusedFrom, undefined, 'the first job ran its baseline');
    const b = issue('Average rounds wrong, again');
    await sim.label('acme', 'calc', b, 'agent', 'maria');
    const second = await baselineOf(b);
    assert.ok(second.reusedFrom !== undefined, 'the second job reused it');
    assert.equal(second.reusedFrom.ts, first.ts);
    assert.match(second.reusedFrom.conversationId, new RegExp(`-i${a}-`));
    const pr = sim.pulls('acme', 'calc').find((p) => p.body.includes(`Fixes #${b}`));
    assert.match(pr?.body ?? '', /The baseline was not run again/);
  },
  { timeout: 300_000 },
);
