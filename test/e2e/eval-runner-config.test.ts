import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { TaskResult } from '../../src/eval/run-eval.js';
import { tallied } from '../support/attack-log.js';
import { cliEnv, runCli } from '../support/cli.js';
import { registryDeploymentEnv } from '../support/egress-env.js';
import { commitFiles, makeFixtureRepo, type FixtureName } from '../support/fixture-repo.js';
import { changePatch, FORGERIES, type Forgery } from '../support/runner-config-forgeries.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

/**
 * Eval grading applies the rule the verdict does (SWE-bench's harness does not): a patch's files
 * that decide how tests run are run as the base commit has them. Each forgery of
 * test/support/runner-config-forgeries.ts is a task whose gold patch is the forgery, run by
 * `issue-agent eval` with the oracle: none is graded resolved, and the grade names the files. The
 * real fixes of the same repositories, one with package.json's dependencies edited too, are graded
 * resolved in the same runs (so the forgeries' tasks are gradeable, and a fix is not withheld).
 */

interface Spec {
  readonly id: string;
  readonly fixture: FixtureName;
  readonly base: Readonly<Record<string, string>>;
  /** The gold patch: the files it writes, over the fixture's real fix when `fix` is set. */
  readonly change: Readonly<Record<string, string | null>>;
  readonly fix?: true;
  readonly testCommand?: string;
  readonly f2p: string;
  readonly p2p: readonly string[];
}

const TEST_FILE: Record<FixtureName, string> = {
  'node-calc': 'test/calc.test.js',
  'node-slug': 'test/slugify.test.js',
  'python-inventory': 'tests/test_stock.py',
  'python-durations': 'tests/test_ago.py',
};

const P2P: Record<string, readonly string[]> = {
  'node-calc': ['test/calc.test.js::sum adds every value', 'test/calc.test.js::range includes both ends'],
  'node-slug': [],
  'python-inventory': ['tests/test_stock.py::AddTest::test_add_accumulates'],
};

const fromForgery = (f: Forgery): Spec => ({
  id: f.id,
  fixture: f.fixture,
  base: f.base,
  change: f.change,
  // The JavaScript tasks run through npm, as the repository's own `npm test` does.
  ...(f.fixture === 'python-inventory' ? {} : { testCommand: f.testCommand }),
  f2p: f.failingId,
  p2p: P2P[f.fixture] ?? [],
});

/**
 * A task set over fixture repositories, in SWE-bench's format (see test/support/eval-tasks.ts).
 * Tasks of one fixture at the same base share its repository (as SWE-bench's tasks of one
 * repository do), so they share its environment-cache entry too: one install per repository.
 */
function taskSet(specs: readonly Spec[]): { readonly file: string; readonly dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'ia-eval-rc-'));
  const cleanups: (() => void)[] = [
    () => {
      rmSync(dir, { recursive: true, force: true });
    },
  ];
  const lines: string[] = [];
  const repos = new Map<string, ReturnType<typeof makeFixtureRepo>>();
  for (const s of specs) {
    const shared = `${s.fixture}\0${JSON.stringify(s.base)}`;
    let repo = repos.get(shared);
    if (repo === undefined) {
      const made = makeFixtureRepo(s.fixture);
      cleanups.push(() => {
        made.cleanup();
      });
      if (Object.keys(s.base).length > 0) commitFiles(made.dir, s.base, 'base');
      repos.set(shared, made);
      repo = made;
    }
    // changePatch leaves the checkout at the base commit again: the next task of the repository starts there.
    const base = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repo.dir, encoding: 'utf8' }).trim();
    if (s.fix === true) execFileSync('git', ['apply'], { cwd: repo.dir, input: repo.patch });
    const patch = changePatch(repo.dir, s.change);
    // The test patch: a note in the test file (the listed tests are already there at the base).
    const testFile = TEST_FILE[s.fixture];
    const comment = testFile.endsWith('.py')
      ? '# The issue is covered above.\n'
      : '// The issue is covered above.\n';
    const testPatch = changePatch(repo.dir, {
      [testFile]: `${readFileSync(join(repo.dir, testFile), 'utf8')}${comment}`,
    });
    lines.push(
      JSON.stringify({
        instance_id: s.id,
        repo_path: repo.dir,
        base_commit: base,
        problem_statement: 'The tests fail.',
        patch,
        test_patch: testPatch,
        FAIL_TO_PASS: [s.f2p],
        PASS_TO_PASS: s.p2p,
        ...(s.testCommand === undefined ? {} : { test_command: s.testCommand }),
      }),
    );
  }
  const file = join(dir, 'tasks.jsonl');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return {
    file,
    dir,
    cleanup: () => {
      for (const c of cleanups.reverse()) c();
    },
  };
}

function results(out: string): Map<string, TaskResult> {
  return new Map(
    readFileSync(join(out, 'results.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as TaskResult)
      .map((r) => [r.instance_id, r]),
  );
}

/** The forgeries are graded unresolved with their files named; the controls resolved, naming none. */
function assertGraded(
  got: ReadonlyMap<string, TaskResult>,
  forgeries: readonly Forgery[],
  controls: readonly string[],
  log: string,
): void {
  for (const f of forgeries) {
    const r = got.get(f.id);
    assert.ok(r?.grade, `${f.id} graded: ${JSON.stringify(r)}\n${log}`);
    assert.equal(r.resolved, false, `${f.id}: ${JSON.stringify(r.grade)}`);
    // The agent's own verdict (the App's) did not take it as proven either.
    assert.notEqual(r.outcome, 'resolved', `${f.id}: the agent's verdict: ${r.outcomeReason ?? ''}`);
    assert.equal(r.grade.status, 'unresolved');
    assert.deepEqual(r.grade.tests.FAIL_TO_PASS.failure, [f.failingId], JSON.stringify(r.grade));
    assert.deepEqual(
      r.grade.runnerConfig?.map((t) => t.path),
      [...f.guarded],
    );
    assert.match(r.grade.reason ?? '', /the change changes how tests run/);
  }
  for (const id of controls) {
    const r = got.get(id);
    assert.equal(r?.resolved, true, `${id}: ${JSON.stringify(r?.grade)}`);
    assert.equal(r.grade?.runnerConfig, undefined);
  }
}

const LOCAL_NAME =
  'attack: `issue-agent eval` grades patches that forge their tests through .npmrc node-options, scripts.test, a pytest plugin in addopts and a root conftest.py as unresolved, with the files named; the real fixes resolved';

test(LOCAL_NAME, { timeout: 600_000 }, (t) =>
  tallied(LOCAL_NAME, async () => {
    const forgeries = FORGERIES.filter((f) => f.fixture !== 'node-slug');
    const pkg = readFileSync(
      join(import.meta.dirname, '..', 'fixtures', 'repos', 'node-calc', 'package.json'),
      'utf8',
    );
    const set = taskSet([
      ...forgeries.map(fromForgery),
      {
        id: 'calc-fix-with-dependencies',
        fixture: 'node-calc',
        base: {},
        fix: true,
        change: {
          'package.json': `${JSON.stringify({ ...(JSON.parse(pkg) as object), version: '1.0.1', devDependencies: { c8: '^10.1.3' } }, null, 2)}\n`,
        },
        testCommand: 'npm test',
        f2p: 'test/calc.test.js::average rounds to the nearest hundredth',
        p2p: P2P['node-calc'] ?? [],
      },
      {
        id: 'inventory-fix',
        fixture: 'python-inventory',
        base: { 'pytest.ini': '[pytest]\ntestpaths = tests\n' },
        fix: true,
        change: {},
        f2p: 'tests/test_stock.py::RemoveTest::test_remove_rejects_negative',
        p2p: P2P['python-inventory'] ?? [],
      },
    ]);
    t.after(() => {
      set.cleanup();
    });
    const out = join(set.dir, 'out');
    const r = await runCli(
      ['eval', set.file, '--model', 'oracle', '--sandbox', 'local', '--concurrency', '2', '--out', out],
      cliEnv({}),
    );
    assert.ok(r.code === 0 || r.code === 1, `${r.stdout}\n${r.stderr}`);
    assertGraded(
      results(out),
      forgeries,
      ['calc-fix-with-dependencies', 'inventory-fix'],
      `${r.stdout}\n${r.stderr}`,
    );
    assert.match(r.stdout, /resolved: 2\/6/);
  }),
);

const DOCKER_NAME =
  "attack: `issue-agent eval` in Docker (jest from the npm registry) grades a patch that makes every jest matcher pass in the setup file the base's jest config names as unresolved; the real fix resolved";

dockerTest(
  DOCKER_NAME,
  (_docker, t) =>
    tallied(DOCKER_NAME, async () => {
      const forgeries = FORGERIES.filter((f) => f.fixture === 'node-slug');
      const jest = forgeries[0];
      assert.ok(jest);
      const set = taskSet([
        fromForgery(jest),
        { ...fromForgery(jest), id: 'slug-fix', fix: true, change: {} },
      ]);
      const work = mkdtempSync(join(tmpdir(), 'ia-eval-rc-cache-'));
      t.after(() => {
        set.cleanup();
        rmSync(work, { recursive: true, force: true });
      });
      const out = join(set.dir, 'out');
      const r = await runCli(
        ['eval', set.file, '--model', 'oracle', '--sandbox', 'docker', '--concurrency', '1', '--out', out],
        cliEnv({
          ...(await registryDeploymentEnv()),
          ISSUE_AGENT_ENV_CACHE: 'on',
          ISSUE_AGENT_ENV_CACHE_DIR: join(work, 'env-cache'),
        }),
      );
      assert.ok(r.code === 0 || r.code === 1, `${r.stdout}\n${r.stderr}`);
      assertGraded(results(out), forgeries, ['slug-fix'], `${r.stdout}\n${r.stderr}`);
    }),
  { timeout: 600_000 },
);
