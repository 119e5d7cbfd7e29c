import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { FileEventStore } from '../../src/events/file-event-store.js';
import type { TaskResult } from '../../src/eval/run-eval.js';
import type { EventOf } from '../../src/events/schema.js';
import { cliEnv, runCli } from '../support/cli.js';
import { registryDeploymentEnv } from '../support/egress-env.js';
import { buildLibraryTaskSet, CARELESS_OF, LIBRARIES, librarySpec } from '../support/eval-libraries.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

/**
 * Must-show 4 with real runners: `issue-agent eval --model oracle --sandbox docker` over the libraries
 * of test/fixtures/eval-libraries (jest, vitest, mocha, node-tap and ava from the npm registry,
 * installed by setup through the egress proxy, with a lockfile or without one; node:test; pytest and
 * unittest in the Python image). Every task is graded resolved with every listed test found under
 * the id the task names (`#`, `\` and nested suites among them), shell-words' baseline hangs and is
 * stopped by node-tap's own timeout, and a careless gold patch is graded unresolved with the
 * PASS_TO_PASS test it breaks named in the grade and the report.
 */

const CARELESS = `${CARELESS_OF}-careless`;
/** The PASS_TO_PASS test the careless fix of qs-lite breaks (it decodes `%23` before cutting at `#`). */
const BROKEN = 'test/parse.test.js::parse > encoding > an encoded %23 stays a #';

/** How each library's dependencies are set up: from its lockfile, or as the registry has them. */
const SETUP: Record<(typeof LIBRARIES)[number], RegExp | null> = {
  'glob-match': /^npm ci\b/,
  'qs-lite': /^npm ci\b/,
  'ini-parse': /^npm install --no-package-lock\b/,
  'shell-words': /^npm install --no-package-lock\b/,
  'kebab-case': /^npm install --no-package-lock\b/,
  'lru-map': null,
  'dotenv-lite': /\/pip install -r requirements-dev\.txt$/,
  'roman-numerals': null,
};

function readResults(out: string): TaskResult[] {
  return readFileSync(join(out, 'results.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as TaskResult);
}

dockerTest(
  'eval with the oracle in Docker over eight libraries with real runners (jest, vitest, mocha, node-tap, ava, node:test, pytest, unittest): every task resolved with its listed ids found; a hanging baseline bounded; a careless gold patch graded unresolved with the broken PASS_TO_PASS test named',
  async (_docker, t) => {
    const set = buildLibraryTaskSet({ careless: true });
    const work = mkdtempSync(join(tmpdir(), 'ia-evallibs-cache-'));
    t.after(() => {
      set.cleanup();
      rmSync(work, { recursive: true, force: true });
    });
    const out = join(set.dir, 'out');
    const started = performance.now();
    const r = await runCli(
      ['eval', set.file, '--model', 'oracle', '--sandbox', 'docker', '--concurrency', '2', '--out', out],
      cliEnv({
        ...(await registryDeploymentEnv()),
        // The agent's sandbox, its fresh verifier and grading share one setup per library.
        ISSUE_AGENT_ENV_CACHE: 'on',
        ISSUE_AGENT_ENV_CACHE_DIR: join(work, 'env-cache'),
      }),
    );
    const wallS = Math.round((performance.now() - started) / 1000);
    t.diagnostic(`eval of ${LIBRARIES.length + 1} tasks: ${wallS} s`);
    const all = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.code, 0, all);
    const results = readResults(out);
    assert.deepEqual(
      results.map((x) => x.instance_id),
      [...LIBRARIES, CARELESS],
    );

    for (const name of LIBRARIES) {
      const x = results.find((y) => y.instance_id === name);
      assert.ok(x?.grade, name);
      const spec = librarySpec(name);
      // Every listed id was found in the graded run and passed: the ids round-trip.
      assert.equal(x.resolved, true, `${name}: ${JSON.stringify(x.grade)}`);
      assert.deepEqual(x.grade.tests.FAIL_TO_PASS.success, spec.f2p, name);
      assert.deepEqual(x.grade.tests.PASS_TO_PASS.success, spec.p2p, name);
      assert.deepEqual(x.grade.failing, [], name);

      const base = FileEventStore.open(x.trajectory).base;
      const commands = base.environment?.setup.commands ?? [];
      const setup = SETUP[name];
      if (setup === null) {
        assert.deepEqual(commands, [], `${name}: nothing to set up`);
      } else {
        const install = commands.find((c) => setup.test(c.command));
        assert.ok(install, `${name}: ${JSON.stringify(commands.map((c) => c.command))}`);
        assert.equal(install.exitCode, 0, `${name}: ${install.output}`);
      }
    }

    // shell-words' baseline hangs in test/escapes.test.js: node-tap's own file timeout (30 s) kills
    // it, and the baseline names it timed out; the rest of the run is read. On a busy machine the
    // timeout also catches test/split.test.js still loading, which is then timed out too, never left
    // out: the verdict must not take its tests, passing after the fix, for new tests.
    const hang = results.find((x) => x.instance_id === 'shell-words');
    assert.ok(hang);
    const baseline = FileEventStore.open(hang.trajectory).events.find(
      (e) => e.kind === 'test_run' && e.phase === 'baseline',
    );
    assert.ok(baseline?.kind === 'test_run', 'a baseline ran');
    assert.equal(baseline.killed, null, 'node-tap stopped the file; the harness did not stop the run');
    const facts = baseline.summary.tests ?? [];
    const seen = JSON.stringify(facts);
    assert.deepEqual(
      facts.filter((f) => f.id === 'test/escapes.test.js').map((f) => [f.status, f.detail]),
      [['crashed-file', 'timed out']],
      seen,
    );
    assert.ok(baseline.summary.hung?.includes('test/escapes.test.js'), seen);
    const split = librarySpec('shell-words').p2p.filter((id) => id.startsWith('test/split.test.js::'));
    const splitTimedOut = facts.some((f) => f.id === 'test/split.test.js' && f.status === 'crashed-file');
    assert.ok(splitTimedOut || split.every((id) => facts.some((f) => f.id === id)), seen);
    assert.equal(hang.outcome, 'resolved', hang.outcomeReason ?? '');
    assert.match(hang.outcomeReason ?? '', /test\/escapes\.test\.js \(timed out before/);
    assert.doesNotMatch(hang.outcomeReason ?? '', /new passing tests/);

    // The careless fix makes the new tests pass and breaks an old one: unresolved, the test named.
    const careless = results.find((x) => x.instance_id === CARELESS);
    assert.ok(careless?.grade);
    // Of the same repository, base commit, environment and test command as qs-lite: the eval ran
    // that baseline once, for the task that came first.
    const baselineOf = (x: TaskResult): EventOf<'test_run'> | undefined =>
      FileEventStore.open(x.trajectory).events.find(
        (e): e is EventOf<'test_run'> => e.kind === 'test_run' && e.phase === 'baseline',
      );
    const of = results.find((x) => x.instance_id === CARELESS_OF);
    assert.ok(of);
    assert.equal(baselineOf(of)?.reusedFrom, undefined);
    assert.equal(
      baselineOf(careless)?.reusedFrom?.conversationId,
      FileEventStore.open(of.trajectory).base.conversationId,
    );
    assert.equal(careless.resolved, false);
    const spec = librarySpec(CARELESS_OF);
    assert.deepEqual(careless.grade.tests.FAIL_TO_PASS.success, spec.f2p);
    assert.deepEqual(careless.grade.tests.PASS_TO_PASS.failure, [BROKEN]);
    assert.deepEqual(careless.grade.failing, [{ id: BROKEN, status: 'failed' }]);
    assert.ok(r.stdout.includes(`${CARELESS}: 1 listed test(s) did not pass: ${BROKEN} (failed)`), r.stdout);
    const md = readFileSync(join(out, 'summary.md'), 'utf8');
    assert.match(md, /## Harness bugs[\s\S]*qs-lite-careless/);
    assert.ok(md.includes(BROKEN), md);
    assert.match(r.stdout, /resolved: 8\/9 \(88\.9%\)/);
  },
  { timeout: 1_500_000 },
);
