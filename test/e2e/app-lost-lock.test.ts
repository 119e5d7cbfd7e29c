import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { oracle } from '../../src/model-sim/index.js';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { SHORT_LOCK, startStack } from '../support/pipeline.js';
import { manyStepsThenOracle, requestText, routeByTag } from '../support/pipeline-fixtures.js';
import { redisSkipReason } from '../support/redis-server.js';

const OWNER = 'acme';
const REPO = 'calc';

/**
 * A worker frozen past its job's lock (SIGSTOP: a stalled event loop, a paused VM) while the job is
 * mid-run: BullMQ hands the job to the other worker, which resumes it from the event log and opens
 * the PR. When the frozen worker wakes (SIGCONT) with its run still going, it must not write another
 * event into the log the other worker now owns, nor say anything on GitHub: one PR, one whole log,
 * one final state on the progress comment. Real App, two workers, Redis, GitHub and model simulators;
 * a short (4 s) lock.
 */
test(
  'App: a worker frozen past its lock wakes to find the job taken over; it stops without a word, the log stays whole, one PR',
  { skip: redisSkipReason(), timeout: 400_000 },
  async (t) => {
    const stack = await startStack({
      owner: OWNER,
      repo: REPO,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-lost-lock-0123456789abcdef',
      workers: 2,
      env: { ...SHORT_LOCK },
      policy: (fixture) =>
        routeByTag({ '[freeze]': manyStepsThenOracle(30, fixture.patch) }, oracle(fixture.patch)),
    });
    t.after(() => stack.stop());
    const { sim, model, pipeline } = stack;
    const n = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong [freeze]',
      body: 'average([1,2,2]) should be 1.67',
      author: 'maria',
    }).number;
    const asked = (): number => model.requests.filter((r) => requestText(r.body).includes('[freeze]')).length;
    await sim.label(OWNER, REPO, n, 'agent', 'maria');
    await sim.waitFor(
      () => asked() >= 6,
      60_000,
      () => `the job to be under way\n${pipeline.logs()}`,
    );
    const victim = pipeline.workers.find((w) =>
      readFileSync(w.log, 'utf8')
        .split('\n')
        .some((l) => l.includes('"job started"') && new RegExp(`"issue":${n}[,}]`).test(l)),
    );
    assert.ok(victim !== undefined);
    const other = pipeline.workers.find((w) => w !== victim);
    assert.ok(other !== undefined);
    victim.child.kill('SIGSTOP');
    let woken = false;
    t.after(() => {
      if (!woken) victim.child.kill('SIGCONT');
    });
    const prs = () => sim.pulls(OWNER, REPO).filter((p) => p.head.ref === `issue-agent/issue-${n}`);
    await sim.waitFor(
      () => prs().length > 0,
      180_000,
      () => `the other worker's PR\n${pipeline.logs()}`,
    );
    const ran = (w: typeof other): boolean =>
      readFileSync(w.log, 'utf8')
        .split('\n')
        .some((l) => l.includes('"job started"') && new RegExp(`"issue":${n}[,}]`).test(l));
    assert.ok(ran(other), `the other worker ran the job\n${pipeline.logs()}`);

    // The frozen worker wakes with its run still going.
    victim.child.kill('SIGCONT');
    woken = true;
    // Logged when its run has stopped (the lock's loss is logged as it is noticed, before that).
    await sim.waitFor(
      () => readFileSync(victim.log, 'utf8').includes('another worker runs this job now'),
      60_000,
      () => `the woken worker's run to stop\n${readFileSync(victim.log, 'utf8')}`,
    );
    assert.equal(await pipeline.jobsEnded(n), 1);

    assert.equal(prs().length, 1, 'one PR');
    // The log opens (no event written twice, whatever its kind) and ends once, published.
    const jobs = join(pipeline.workDir, 'work', 'jobs');
    const job = readdirSync(jobs).find((d) => d.startsWith(`r`) && d.includes(`-i${n}-`));
    assert.ok(job !== undefined);
    const store = FileEventStore.open(join(jobs, job, 'trajectory'));
    const outcomes = store.events.filter((e) => e.kind === 'outcome');
    assert.equal(outcomes.length, 1, outcomes.map((o) => JSON.stringify(o)).join('\n'));
    assert.equal(reduceState(store.events).outcome?.outcome, 'resolved');
    // Nothing from the woken worker on GitHub: the progress comment ends with the PR, and no comment
    // says the job failed or was cancelled.
    const bot = sim.comments(OWNER, REPO, n).filter((c) => c.user === sim.app.botLogin);
    const progress = bot.find((c) => c.body.includes('issue-agent:progress'));
    assert.ok(progress !== undefined);
    assert.match(progress.body, new RegExp(`Pull request #${prs()[0]?.number ?? 0} opened`), progress.body);
    for (const c of bot) assert.doesNotMatch(c.body, /failed|cancelled|stopped/i, c.body);
  },
);
