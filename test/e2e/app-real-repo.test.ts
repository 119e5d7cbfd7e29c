import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { oracle } from '../../src/model-sim/index.js';
import { commitFiles, filesUnder, FIXTURES, makeFixtureRepo } from '../support/fixture-repo.js';
import { routeByTag } from '../support/pipeline-fixtures.js';
import { registryDeploymentEnv } from '../support/egress-env.js';
import { readJobRun, startStack, type Stack } from '../support/pipeline.js';
import { redisSkipReason } from '../support/redis-server.js';
import { after } from 'node:test';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

const MODEL_KEY = 'sk-ant-real-repo-canary-0123456789abcdef';
const CODEGEN_CANARY = 'cgt_canary_7f3a9b1c5d2e8f4a6b0c';

/**
 * One stack serves both tests: the first test's job (npm ci of jest through the proxy, the fix
 * resolved) is also the second test's first job, whose stored environment the second job reuses.
 * A job here installs ~300 packages and runs jest three times, so it is made once, by whichever
 * test asks first. The settings are the second test's (a setup secret for acme/*, which the first
 * repository does not ask for; a warm pool of the image .nvmrc picks, which a job with setup never
 * takes): the first test's assertions are about that job and hold under them.
 */
let sharedStack: Promise<Stack> | undefined;
function shared(): Promise<Stack> {
  sharedStack ??= (async () => {
    const fix = readFileSync(join(FIXTURES, 'node-slug.fix.patch'), 'utf8');
    const regress = readFileSync(join(FIXTURES, 'node-slug.regress.patch'), 'utf8');
    return startStack({
      owner: 'acme',
      repo: 'slugs',
      fixture: 'node-slug',
      maintainer: { login: 'maria', permission: 'maintain' },
      modelKey: MODEL_KEY,
      sandbox: 'docker',
      env: {
        ...(await registryDeploymentEnv()),
        ISSUE_AGENT_SETUP_SECRET_CODEGEN_TOKEN: CODEGEN_CANARY,
        ISSUE_AGENT_SETUP_SECRET_CODEGEN_TOKEN_REPOS: 'acme/*',
        // A job with setup takes a container of its own; a cache hit takes a warm one (.nvmrc: 20).
        ISSUE_AGENT_WARM_POOL: 'issue-agent/node:20=1',
      },
      policy: () => routeByTag({ '[regress]': oracle(regress) }, oracle(fix)),
    });
  })();
  return sharedStack;
}
after(async () => {
  if (sharedStack !== undefined) await (await sharedStack.catch(() => null))?.stop();
});

/** The first job of the slugs repository, labelled once; its issue, pull request and job id. */
let sharedFirst: Promise<{ n: number; job: string }> | undefined;
function firstJob(s: Stack): Promise<{ n: number; job: string }> {
  sharedFirst ??= (async () => {
    const { sim, pipeline } = s;
    const n = sim.createIssue('acme', 'slugs', {
      title: 'Slugs keep runs of dashes',
      body: '`slugify("Rock & Roll -- Live!")` gives `rock---roll----live`; it should be `rock-roll-live`.',
      author: 'maria',
    }).number;
    await sim.label('acme', 'slugs', n, 'agent', 'maria');
    await sim.waitFor(
      () => sim.pulls('acme', 'slugs').length > 0,
      360_000,
      () => `a PR\n${pipeline.logs()}`,
    );
    const [job] = readdirSync(join(pipeline.workDir, 'work', 'jobs'));
    assert.ok(job);
    return { n, job };
  })();
  return sharedFirst;
}

/**
 * Must-shows 1, 3, 8, 9 and 10 of the environments issue on one realistic repository: jest and its
 * ~300 packages from the npm registry (package-lock.json, no config), Node pinned to 20 by .nvmrc,
 * a suite that tests colour detection from the environment it runs in, and one test that fails
 * everywhere but on the release machine. The model applies the known fix.
 */
dockerTest(
  'App pipeline, Docker, a real JavaScript repository with no config: npm ci through the proxy, Node 20 from .nvmrc, baseline fails on the issue test, resolved with the pre-existing failure named',
  async (_docker, t) => {
    const skip = redisSkipReason();
    if (skip !== false) {
      t.skip(skip);
      return;
    }
    const stack = await shared();
    const { sim } = stack;
    const { n, job } = await firstJob(stack);
    const pr = sim.pulls('acme', 'slugs')[0];
    assert.ok(pr);

    const { base, events } = readJobRun(stack, job);
    const env = base.environment;
    assert.ok(env !== undefined, 'the base state records the environment');
    // 3: the runtime pinned by .nvmrc, and where that came from.
    assert.equal(env.image, 'issue-agent/node:20');
    assert.deepEqual(
      env.runtimes.map((r) => [r.language, r.version, r.source]),
      [['node', '20', '.nvmrc']],
    );
    // 1: npm ci detected from the lockfile and run through the proxy.
    assert.equal(env.setup.source, 'detected');
    assert.deepEqual(
      env.setup.commands.map((c) => [c.command, c.exitCode]),
      [['npm ci --no-audit --no-fund', 0]],
    );
    assert.match(env.setup.commands[0]?.reason ?? '', /package-lock\.json/);
    const egress = env.egress.setup;
    assert.ok(egress !== null);
    assert.ok(
      egress.totals.allowed > 0 && egress.totals.bytesDown > 1_000_000,
      'packages came through the proxy',
    );
    assert.deepEqual(egress.denied, []);
    assert.equal(env.setup.cache.status, 'stored');

    const runs = events.filter((e) => e.kind === 'test_run');
    const baseline = runs.find((e) => e.phase === 'baseline');
    const final = runs.find((e) => e.phase === 'final');
    assert.ok(baseline !== undefined && final !== undefined);
    // 10: what jest really printed, parsed test by test.
    // Ids are file and title path (docs/testing.md), from jest's JSON report.
    assert.deepEqual([...baseline.summary.failedNames].sort(), [
      'test/release.test.js::release > signing key is configured',
      'test/slugify.test.js::slugify > collapses runs of punctuation into one dash',
    ]);
    assert.equal(baseline.summary.passed, 6);
    // 9: the colour-detection tests pass in the sandbox as they do on a host.
    for (const name of [
      'test/color.test.js::supportsColor > FORCE_COLOR turns colour on without a terminal',
      'test/color.test.js::supportsColor > CLICOLOR_FORCE turns colour on without a terminal',
      'test/color.test.js::supportsColor > NO_COLOR turns colour off on a terminal',
      'test/runtime.test.js::runtime > runs on the Node major pinned in .nvmrc',
    ]) {
      assert.ok(baseline.summary.passedNames.includes(name), `${name} passes at baseline`);
      assert.ok(final.summary.passedNames.includes(name), `${name} passes at the end`);
    }
    assert.deepEqual(final.summary.failedNames, [
      'test/release.test.js::release > signing key is configured',
    ]);

    // 8: resolved, the pre-existing failure named and not held against the fix.
    const end = events.find((e) => e.kind === 'outcome');
    assert.ok(end?.kind === 'outcome');
    assert.equal(end.outcome, 'resolved', end.reason);
    assert.equal(pr.draft, false);
    assert.match(pr.body, /Failing before and after, not caused by this change/);
    assert.match(
      pr.body,
      /release\.test\.js::release &gt; signing key is configured|release\.test\.js::release > signing key is configured/,
    );
    // The PR says what ran and why.
    assert.match(pr.body, /### Environment/);
    assert.match(pr.body, /npm ci --no-audit --no-fund/);
    assert.match(pr.body, /\.nvmrc/);
    const progress = sim.comments('acme', 'slugs', n).find((c) => c.user === sim.app.botLogin)?.body ?? '';
    assert.match(progress, /\*\*Environment:\*\*/);
    assert.match(progress, /npm ci/);
    // The change is the fix alone: no node_modules in it.
    assert.doesNotMatch(pr.body, /node_modules\//);
  },
  { timeout: 600_000 },
);

/** A copy of node-slug with a `.github/issue-agent.yml`, as its own repository in the simulator. */
async function slugRepoWithConfig(stack: Stack, name: string, config: string): Promise<void> {
  const repo = makeFixtureRepo('node-slug');
  try {
    commitFiles(repo.dir, { '.github/issue-agent.yml': config });
    await stack.sim.createRepo({ owner: 'acme', name, sourceDir: repo.dir });
    stack.sim.setPermission('acme', name, 'maria', 'maintain');
  } finally {
    repo.cleanup();
  }
}

/**
 * Must-shows 6 (through the App), 7 and the second half of 8: a second job of the same repository
 * and lockfile reuses the prepared environment; a change that breaks a test that passed at baseline
 * is not resolved and the regression is named; a setup command that fails ends the job
 * failed/setup_failed with its output; a repository whose test command cannot start (no setup, so
 * jest is missing) ends with an outcome that says the environment is broken.
 */
dockerTest(
  'App pipeline, Docker: cache hit on the second job, a regression named, setup_failed with output, a broken environment said as such',
  async (_docker, t) => {
    const skip = redisSkipReason();
    if (skip !== false) {
      t.skip(skip);
      return;
    }
    const stack = await shared();
    const { sim, pipeline } = stack;
    const progressOf = (repo: string, issue: number): string =>
      sim.comments('acme', repo, issue).find((c) => c.user === sim.app.botLogin)?.body ?? '';
    const jobsDir = join(pipeline.workDir, 'work', 'jobs');

    // First job (the first test's, when it ran): setup runs and the environment is kept.
    const { job: job1 } = await firstJob(stack);
    assert.equal(readJobRun(stack, job1).base.environment?.setup.cache.status, 'stored');

    // Second job, same repository and lockfile: setup skipped; its change regresses a test.
    const second = sim.createIssue('acme', 'slugs', {
      title: 'Dashes again [regress]',
      body: 'Runs of dashes, simpler.',
      author: 'maria',
    });
    await sim.label('acme', 'slugs', second.number, 'agent', 'maria');
    await sim.waitFor(
      () =>
        /Finished|Pull request|Pushed/.test(progressOf('slugs', second.number)) &&
        readdirSync(jobsDir).length === 2,
      360_000,
      () => `job 2\n${pipeline.logs()}`,
    );
    await sim.waitFor(
      () => sim.pulls('acme', 'slugs').length === 2,
      60_000,
      () => `PR 2\n${pipeline.logs()}`,
    );
    const job2 = readdirSync(jobsDir).find((j) => j !== job1);
    assert.ok(job2);
    const run2 = readJobRun(stack, job2);
    const env2 = run2.base.environment;
    assert.ok(env2 !== undefined);
    assert.equal(env2.setup.cache.status, 'hit');
    assert.equal(env2.setup.commands[0]?.attempts, 0, 'setup did not run');
    assert.equal(env2.egress.setup, null, 'and nothing was fetched');
    const end2 = run2.events.find((e) => e.kind === 'outcome');
    assert.ok(end2?.kind === 'outcome');
    assert.equal(end2.outcome, 'unverified', end2.reason);
    assert.match(end2.reason, /test\/slugify\.test\.js::slugify > drops accents/);
    const pr2 = sim.pulls('acme', 'slugs').find((p) => p.body.includes(`#${second.number}`));
    assert.ok(pr2);
    assert.equal(pr2.draft, true);
    assert.match(pr2.body, /Passing before, failing now/);
    assert.match(pr2.body, /test\/slugify\.test\.js::slugify > drops accents/);
    assert.match(pr2.body, /reused a cached environment/);
    // The hit ran in a warm pool's container (the entry placed in it, the test PATH given to its
    // shells): the regression above was found by jest from the restored node_modules there.
    const warmLines = pipeline
      .logs()
      .split('\n')
      .filter((l) => l.includes('"msg":"sandbox from the warm pool"'));
    assert.ok(
      warmLines.some((l) => l.includes(job2) && !l.includes('"sandboxFor":"verdict"')),
      `job 2 started in a warm container\n${warmLines.join('\n')}`,
    );
    // Job 1 ran setup in a container of its own; only its verdict's container (a cache hit by
    // then: job 1 stored the entry) came from the pool.
    const job1Warm = warmLines.filter((l) => l.includes(job1));
    assert.ok(
      job1Warm.every((l) => l.includes('"sandboxFor":"verdict"')),
      `job 1 (setup ran) did not start in one\n${job1Warm.join('\n')}`,
    );

    // A setup command that fails: failed/setup_failed, with the command's output.
    await slugRepoWithConfig(
      stack,
      'slugs-setup-fails',
      // The failing command prints the setup secret it was given: what the job shows must not.
      'setupSecrets: [CODEGEN_TOKEN]\nsetup:\n  - \'echo "codegen with $CODEGEN_TOKEN: schema.graphql not found" >&2; exit 4\'\n',
    );
    const broken = sim.createIssue('acme', 'slugs-setup-fails', {
      title: 'Dashes',
      body: 'x',
      author: 'maria',
    });
    await sim.label('acme', 'slugs-setup-fails', broken.number, 'agent', 'maria');
    await sim.waitFor(
      () => /Finished without a pull request/.test(progressOf('slugs-setup-fails', broken.number)),
      360_000,
      () =>
        `setup failure\n${JSON.stringify(sim.comments('acme', 'slugs-setup-fails', broken.number))}\n${pipeline.logs()}`,
    );
    const failed = progressOf('slugs-setup-fails', broken.number);
    assert.match(failed, /exited with 4/);
    assert.match(failed, /codegen with \[REDACTED\]: schema\.graphql not found/);
    assert.equal(sim.pulls('acme', 'slugs-setup-fails').length, 0);
    // Must-show 5 through the App: the canary setup printed is in no comment, no log, no file of the job.
    const everything = [
      JSON.stringify(sim.comments('acme', 'slugs-setup-fails', broken.number)),
      pipeline.logs(),
      ...readdirSync(jobsDir).flatMap((j) =>
        filesUnder(join(jobsDir, j)).map((f) => readFileSync(f, 'utf8')),
      ),
    ];
    for (const text of everything) assert.ok(!text.includes(CODEGEN_CANARY), 'the setup secret leaked');

    // No setup at all: the test command cannot start. Not "resolved", not "tests fail".
    await slugRepoWithConfig(stack, 'slugs-no-setup', 'setup: []\n');
    const bare = sim.createIssue('acme', 'slugs-no-setup', { title: 'Dashes', body: 'x', author: 'maria' });
    await sim.label('acme', 'slugs-no-setup', bare.number, 'agent', 'maria');
    await sim.waitFor(
      () => sim.pulls('acme', 'slugs-no-setup').length === 1,
      360_000,
      () => `broken environment\n${pipeline.logs()}`,
    );
    const pr3 = sim.pulls('acme', 'slugs-no-setup')[0];
    assert.ok(pr3);
    assert.equal(pr3.draft, true);
    assert.match(pr3.body, /The test environment is broken/);
    assert.doesNotMatch(pr3.body, /✅ \*\*Resolved/);
    // The progress comment is edited to its end after the pull request is opened.
    await sim.waitFor(
      () => /environment is broken/i.test(progressOf('slugs-no-setup', bare.number)),
      60_000,
      () =>
        `the broken environment in the progress comment\n${JSON.stringify(sim.comments('acme', 'slugs-no-setup', bare.number))}\n${pipeline.logs()}`,
    );
  },
  { timeout: 900_000 },
);
