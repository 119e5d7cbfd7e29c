import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { isolationSupport } from '../../src/sandbox/local/launch.js';
import { reply } from '../../src/model-sim/index.js';
import { buildHistoryRepo } from '../support/history-repo.js';
import { startStack } from '../support/pipeline.js';
import { redisSkipReason } from '../support/redis-server.js';
import { hostArtifacts } from '../support/host-artifacts.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

const MODEL_KEY = 'sk-ant-evaluate-0123456789abcdef';

/**
 * `@agent evaluate` through the whole App (Redis, the worker, Docker or local sandboxes): a writer is refused,
 * a bad option gets the usage, an admin's request builds the tasks from the repository's history and
 * posts the report in the conversation that asked; no branch or pull request is made.
 */

async function evaluateThroughTheApp(
  sandbox: 'docker' | 'local',
  t: TestContext,
  /** For `local`: a folder outside /tmp for the work folder (see hostArtifacts). */
  local: string | null = null,
): Promise<void> {
  const skip = redisSkipReason();
  if (skip !== false) {
    t.skip(skip);
    return;
  }
  const stack = await startStack({
    owner: 'octo',
    repo: 'other',
    maintainer: { login: 'ada', permission: 'admin' },
    modelKey: MODEL_KEY,
    sandbox,
    // Not under /tmp (private in a local sandbox): the masked work folder is what keeps the
    // worker's other files out of sight.
    ...(local === null ? {} : { env: { ISSUE_AGENT_WORK_DIR: join(local, 'work') } }),
    // The oracle brings its own model; the deployment's is never asked.
    policy: () => () => reply().text('not asked').tool('finish', { summary: 'not asked' }),
  });
  const root = mkdtempSync(join(tmpdir(), 'ia-app-evaluate-'));
  t.after(async () => {
    await stack.stop();
    rmSync(root, { recursive: true, force: true });
  });
  const { sim, model, pipeline } = stack;
  const h = await buildHistoryRepo(sim, 'octo', 'calc', root);
  sim.setPermission('octo', 'calc', 'ada', 'admin');
  sim.setPermission('octo', 'calc', 'wes', 'write');
  const issue = sim.createIssue('octo', 'calc', {
    title: 'How well does the bot do on this repository?',
    body: 'Before we enable it.',
    author: 'ada',
  }).number;
  const botComments = (): string[] =>
    sim
      .comments('octo', 'calc', issue)
      .filter((c) => c.user === sim.app.botLogin)
      .map((c) => c.body);

  await sim.comment('octo', 'calc', issue, 'wes', '@agent evaluate oracle');
  await sim.waitFor(
    () => botComments().length === 1,
    60_000,
    () => `the refusal\n${pipeline.logs()}`,
  );
  assert.match(botComments()[0] ?? '', /Only an admin of this repository can ask me to evaluate/);

  await sim.comment('octo', 'calc', issue, 'ada', '@agent evaluate --frobnicate');
  await sim.waitFor(
    () => botComments().length === 2,
    60_000,
    () => `the usage\n${pipeline.logs()}`,
  );
  assert.match(
    botComments()[1] ?? '',
    /I don't know the option `frobnicate`[\s\S]*@agent evaluate \[oracle\]/,
  );

  await sim.comment('octo', 'calc', issue, 'ada', '@agent evaluate oracle limit 5');
  await sim.waitFor(
    () => botComments().some((b) => /100% resolved \(3\/3\)/.test(b)),
    400_000,
    () => `the report\n${pipeline.logs()}\n${botComments().join('\n----\n')}`,
  );
  const report = botComments().find((b) => /100% resolved/.test(b)) ?? '';
  assert.match(report, /^<!-- issue-agent:progress job=/);
  assert.match(report, new RegExp(`octo__calc-${h.subPull}`));
  assert.match(report, new RegExp(`octo__calc-${h.zeroPull}`));
  // Issue numbers are shown, not linked (a joiner after `#`): the report mentions no issue's timeline.
  assert.match(report, new RegExp(`#\u200D${h.wontfix}: closed without a merged pull request`));
  assert.match(
    report,
    new RegExp(
      `#\u200D${h.typo} \\(pull request #\u200D${h.typoPull}\\): pull request #\u200D${h.typoPull} changed no tests`,
    ),
  );
  assert.match(report, new RegExp(`Model: oracle; sandbox: ${sandbox}`));
  // One comment per request: the refusal, the usage, the evaluation (its progress comment, edited).
  assert.equal(botComments().length, 3);
  // No branch, no pull request, and the deployment's model was never asked.
  assert.ok(sim.pulls('octo', 'calc').every((p) => p.user !== sim.app.botLogin));
  assert.equal(model.requests.length, 0);
  // The report's files are on the worker's host, with no token in them.
  const out = /in `([^`]+)` on the worker's host/.exec(report)?.[1];
  assert.ok(out !== undefined, report);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { resolved: number };
  assert.equal(summary.resolved, 3);
  assert.doesNotMatch(report, /gh[suo]_[A-Za-z0-9]{20,}/);
}

dockerTest(
  'App: `@agent evaluate oracle` by an admin posts the eval of the repository’s closed issues (3 tasks, 2 skipped with reasons); a writer is refused',
  async (_docker, t) => evaluateThroughTheApp('docker', t),
  { timeout: 600_000 },
);

const isolation = await isolationSupport();
test(
  'App, local sandbox (work folder masked): the same evaluation',
  {
    timeout: 600_000,
    skip:
      !isolation.ok && process.env.ISSUE_AGENT_REQUIRE_DOCKER !== '1'
        ? `no isolation here: ${isolation.reason}`
        : false,
  },
  async (t) => {
    const local = hostArtifacts('app-evaluate');
    t.after(() => {
      rmSync(local, { recursive: true, force: true });
    });
    await evaluateThroughTheApp('local', t, local);
  },
);
