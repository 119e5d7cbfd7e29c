import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { oracle } from '../../src/model-sim/index.js';
import { labelledIssue, startStack } from '../support/pipeline.js';
import { bashThenOracle, requestText, routeByTag } from '../support/pipeline-fixtures.js';
import { localStackSkip } from '../support/local-stack-skip.js';

const skip = await localStackSkip();

/**
 * Busy processes per sandbox (ISSUE_AGENT_TEST_SATURATION_BURNERS, default 3), and how long they
 * burn: three sandboxes take both cores many times over.
 */
const BURNERS = Number(process.env.ISSUE_AGENT_TEST_SATURATION_BURNERS ?? '3');
const BURN_S = 12;
/**
 * Half the burn (ISSUE_AGENT_LOCK_DURATION_MS; ISSUE_AGENT_TEST_SATURATION_LOCK_MS sets another): a
 * job outlives its lock twice over while the cores are taken, so it keeps the lock only by renewals.
 * The production default (60 s) would outlast the burn without any.
 */
const LOCK_MS = Number(process.env.ISSUE_AGENT_TEST_SATURATION_LOCK_MS ?? '6000');
/** The sandboxes' nice value (ISSUE_AGENT_SANDBOX_NICE, default 10); 0 measures them unlowered. */
const NICE = process.env.ISSUE_AGENT_TEST_SATURATION_NICE ?? '10';

interface LogLine {
  readonly msg?: string;
  readonly issue?: number;
  readonly job?: string;
  readonly blockedMs?: number;
  readonly keeperMaxDelayMs?: number;
  readonly mainMaxDelayMs?: number;
  readonly renewals?: number;
}

function lines(file: string): LogLine[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

/**
 * A worker host whose sandboxes saturate its cores (the repositories' tests run there): one real
 * worker with three jobs at once (isolated local sandboxes, real App, Redis, GitHub and model
 * simulators), each job's agent running BURNERS busy loops for BURN_S seconds on a 2-core machine.
 * With a lock shorter than the burn, every job keeps its lock throughout: no lost lock, no stall, each job's
 * processor starts exactly once, and each ends with its pull request. The sandboxes' processes run
 * at the lower CPU priority (nice 10), and the worker reports how late its lock renewals were (the
 * renewing thread) beside how long its own event loop was held up.
 */
test(
  'App: a worker whose sandboxes saturate the CPU keeps every job lock; each job runs once and publishes',
  { skip, timeout: 600_000 },
  async (t) => {
    const burn = [
      'echo "sandbox-nice=$(cut -d" " -f19 /proc/self/stat)"',
      `for i in $(seq ${BURNERS}); do timeout ${BURN_S} sh -c 'while :; do :; done' & done`,
      'wait',
      'echo burned',
    ].join('; ');
    const stack = await startStack({
      owner: 'acme',
      repo: 'calc',
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-saturation-0123456789abcdef',
      sandbox: 'local',
      env: {
        ISSUE_AGENT_WORKER_CONCURRENCY: '3',
        ISSUE_AGENT_SANDBOX_NICE: NICE,
        ISSUE_AGENT_LOCK_DURATION_MS: String(LOCK_MS),
        ISSUE_AGENT_STALLED_INTERVAL_MS: String(Math.max(1000, Math.min(5000, Math.floor(LOCK_MS / 3)))),
      },
      policy: (fixture) =>
        routeByTag({ '[burn]': bashThenOracle(burn, fixture.patch) }, oracle(fixture.patch)),
    });
    t.after(() => stack.stop());
    const { sim, model, pipeline } = stack;
    const worker = pipeline.workers[0];
    assert.ok(worker !== undefined);
    const issues: number[] = [];
    for (const n of [1, 2, 3])
      issues.push(
        await labelledIssue(stack, {
          title: `Average rounds wrong, part ${n} [burn]`,
          body: 'average([1,2,2]) should be 1.67',
        }),
      );
    const prs = (issue: number) =>
      sim.pulls('acme', 'calc').filter((p) => p.head.ref === `issue-agent/issue-${issue}`);
    await sim.waitFor(
      () => issues.every((n) => prs(n).length > 0),
      480_000,
      () => `three pull requests\n${pipeline.logs()}`,
    );
    // The last job's completion is logged after its PR is opened.
    await sim.waitFor(
      () => lines(worker.log).filter((l) => l.msg === 'job completed' || l.msg === 'job failed').length >= 3,
      30_000,
      () => `the jobs' ends\n${pipeline.logs()}`,
    );
    const raw = readFileSync(worker.log, 'utf8');
    let log = lines(worker.log);
    // The sandboxes burned at once, at the lower priority.
    const burned = model.requests.filter((r) => requestText(r.body).includes('burned'));
    assert.ok(burned.length >= issues.length, `every sandbox burned\n${pipeline.logs()}`);
    for (const r of burned) assert.match(requestText(r.body), new RegExp(`sandbox-nice=${NICE}\\b`));
    // No lock lost, no stall, each processor started once, each job completed.
    assert.doesNotMatch(raw, /lost the job lock|another worker runs this job now|job stalled/, raw);
    for (const n of issues) {
      const started = log.filter((l) => l.msg === 'job started' && l.issue === n);
      assert.equal(started.length, 1, `job for issue ${n} started once\n${raw}`);
      assert.equal(prs(n).length, 1);
    }
    assert.equal(log.filter((l) => l.msg === 'job completed').length, issues.length, raw);
    assert.equal(log.filter((l) => l.msg === 'job failed').length, 0, raw);

    // Each job's end is followed by a report of how its lock renewals kept up.
    await sim.waitFor(
      () => lines(worker.log).filter((l) => l.msg === 'lock renewals').length >= issues.length,
      30_000,
      () => `the worker's renewal reports\n${pipeline.logs()}`,
    );
    log = lines(worker.log);

    const reports = log.filter((l) => l.msg === 'lock renewals');
    const keeperMax = Math.max(...reports.map((r) => r.keeperMaxDelayMs ?? 0));
    const mainMax = Math.max(...reports.map((r) => r.mainMaxDelayMs ?? 0));
    const blocks = log.filter((l) => l.blockedMs !== undefined).map((l) => l.blockedMs ?? 0);
    t.diagnostic(
      `lock ${LOCK_MS} ms, sandboxes at nice ${NICE}; renewing thread's worst delay ${keeperMax} ms; main loop's worst delay ${mainMax} ms; ` +
        `main-loop blocks logged: ${blocks.length === 0 ? 'none' : blocks.join(', ')} ms`,
    );
    // The renewals kept well inside the lock: a third of it is when the next one is due.
    assert.ok(keeperMax < LOCK_MS / 3, `renewing thread delayed ${keeperMax} ms`);
  },
);
