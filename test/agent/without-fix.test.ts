import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import type { FreshVerifier } from '../../src/agent/run-agent.js';
import type { EventOf } from '../../src/events/schema.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { reply, type Policy } from '../../src/model-sim/index.js';
import { renderVerification } from '../../src/publish/verification.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { startHarness, type Harness } from '../support/agent-harness.js';

/**
 * A change whose only evidence is tests that pass without its code proves nothing: the final run
 * that would resolve it is followed by a run of the change's test files alone on the code before
 * it (`without_fix`), and a test that passes there is not proof. The fixture (node-calc) has one
 * failing test, "average rounds to the nearest hundredth".
 */

const FAILING = 'average rounds to the nearest hundredth';

/** The agent runs `command`, then finishes claiming success. */
function agent(command: string): Policy {
  return (request) => {
    const turns = request.messages.filter((m) => m.role === 'assistant').length;
    if (turns === 0) return reply().tool('bash', { command }, { id: 'toolu_wf_0001' });
    return reply().tool('finish', { summary: 'Fixed: all tests pass.' }, { id: 'toolu_wf_0002' });
  };
}

/**
 * New test files that pass whatever the code does; the second's name is shell syntax, which must
 * reach git as a path (on stdin), never as a command.
 */
const TRIVIAL = `cat > test/trivial.test.js <<'EOF'
import { test } from 'node:test';
test('the calculator module exists', () => {});
EOF
cp test/trivial.test.js 'test/$(touch HACKED) x.test.js'
printf '// reviewed\\n' >> src/calc.js`;

/** The failing test edited to expect what the bug gives (1.66 and 0.37, Math.floor's answers). */
const EDIT_THE_TEST = `sed -i 's/2\\]), 1\\.67/2]), 1.66/; s/25\\]), 0\\.38/25]), 0.37/' test/calc.test.js`;

/** The real fix (the fixture's patch) and a new test of the module it adds. */
const fixWithTest = (patch: string): string => `git apply <<'PATCH'
${patch}
PATCH
cat > test/round.test.js <<'EOF'
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { roundTo } from '../src/round.js';
test('roundTo rounds halves away from zero', () => {
  assert.equal(roundTo(-2.5, 0), -3);
  assert.equal(roundTo(1.005, 1), 1);
});
EOF`;

function cloningVerifier(t: TestContext, origin: () => string): FreshVerifier {
  return {
    open: async (baseCommit: string) => {
      const dir = mkdtempSync(join(tmpdir(), 'ia-fresh-'));
      t.after(() => {
        rmSync(dir, { recursive: true, force: true });
      });
      execFileSync('git', ['clone', '-q', '--no-checkout', origin(), dir]);
      execFileSync('git', ['-C', dir, 'checkout', '-q', '--detach', baseCommit]);
      const sandbox = await LocalSandbox.create({
        workspace: dir,
        path: process.env.PATH ?? '/usr/bin:/bin',
      });
      return { sandbox, close: () => sandbox.close() };
    },
  };
}

function runOf(h: Harness, phase: EventOf<'test_run'>['phase']): EventOf<'test_run'> | undefined {
  return h.store.events.find((e): e is EventOf<'test_run'> => e.kind === 'test_run' && e.phase === phase);
}

describe("the change's tests run without its code", () => {
  it('a trivial new test and no fix: unverified, the failing test named, and the workspace is the change again', async (t) => {
    const h = await startHarness({ policy: agent(TRIVIAL), testCommand: 'npm test' });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'unverified', outcome.reason);
    assert.match(outcome.reason, /also pass without it .*the calculator module exists/);
    assert.match(
      outcome.reason,
      // Ids carry their file (testing/test-run.ts).
      new RegExp(`failing before and after, not caused by this change: test/calc\\.test\\.js::${FAILING}`),
    );
    const without = runOf(h, 'without_fix');
    assert.ok(without, 'a without_fix run');
    assert.ok(without.summary.passedNames.includes('test/trivial.test.js::the calculator module exists'));
    // Run in the agent's own sandbox, which is put back to the change afterwards.
    assert.ok(existsSync(join(h.repo.dir, 'test', 'trivial.test.js')));
    assert.ok(existsSync(join(h.repo.dir, 'test', '$(touch HACKED) x.test.js')));
    assert.ok(!existsSync(join(h.repo.dir, 'HACKED')), 'a path ran as a command');
    assert.match(readFileSync(join(h.repo.dir, 'src', 'calc.js'), 'utf8'), /\/\/ reviewed\n$/);
    const state = reduceState(h.store.events);
    assert.equal(state.withoutFix?.id, without.id);
    const body = renderVerification(state.baseline, state.finalTest, { withoutFix: state.withoutFix });
    assert.match(
      body,
      /Passing without the change's code too, so not proof:\*\* `test\/(?:trivial|\$\(touch HACKED\) x)\.test\.js::the calculator module exists`/,
    );
  });

  it('the failing test edited until it passes: unverified, because it passes on the code before the change', async (t) => {
    const h = await startHarness({ policy: agent(EDIT_THE_TEST), testCommand: 'npm test' });
    t.after(() => h.close());
    const outcome = await h.run();
    const final = runOf(h, 'final');
    assert.equal(final?.exitCode, 0, 'the edited suite passes');
    assert.equal(outcome.outcome, 'unverified', outcome.reason);
    assert.match(outcome.reason, new RegExp(`also pass without it .*${FAILING}`));
  });

  it('the real fix with a new test that cannot load without it: resolved, in a fresh sandbox', async (t) => {
    const h: Harness = await startHarness({
      policy: (request, ctx) => agent(fixWithTest(h.repo.patch))(request, ctx),
      testCommand: 'npm test',
      verifier: cloningVerifier(t, () => h.repo.dir),
    });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'resolved', outcome.reason);
    assert.match(outcome.reason, /each fails without the change/);
    const without = runOf(h, 'without_fix');
    assert.equal(without?.sandbox, 'fresh');
    assert.notEqual(without.exitCode, 0);
    assert.ok(!without.summary.passedNames.includes('roundTo rounds halves away from zero'));
  });

  it('a trivial new test with a fresh sandbox: unverified there too', async (t) => {
    const h: Harness = await startHarness({
      policy: agent(TRIVIAL),
      testCommand: 'npm test',
      verifier: cloningVerifier(t, () => h.repo.dir),
    });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'unverified', outcome.reason);
    assert.equal(runOf(h, 'without_fix')?.sandbox, 'fresh');
  });

  it('the failing test deleted, and a new module with a test that fails without it: unverified, the deleted test named', async (t) => {
    // The new test is real proof of the new module, but the issue's failing test is gone.
    const h = await startHarness({
      policy: agent(`git rm -q test/calc.test.js && mkdir -p test
printf 'export const twice = (x) => 2 * x;\\n' > src/twice.js
cat > test/twice.test.js <<'EOF'
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { twice } from '../src/twice.js';
test('twice doubles', () => assert.equal(twice(2), 4));
EOF`),
      testCommand: 'npm test',
    });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'unverified', outcome.reason);
    assert.match(
      outcome.reason,
      new RegExp(`removed, renamed or skipped\\), so the change does not show them fixed: .*${FAILING}`),
    );
    const state = reduceState(h.store.events);
    assert.match(
      renderVerification(state.baseline, state.finalTest, { withoutFix: state.withoutFix }),
      /Failing before, not reported after \(removed, renamed or skipped\):\*\* .*average rounds to the nearest hundredth/,
    );
  });

  it('every test file deleted: the final run runs no test and passes, which proves nothing', async (t) => {
    const h = await startHarness({ policy: agent('git rm -q -r test'), testCommand: 'npm test' });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.equal(runOf(h, 'final')?.exitCode, 0, 'node --test with no test file exits 0');
    assert.equal(outcome.outcome, 'unverified', outcome.reason);
    assert.match(outcome.reason, /ran no test: the tests were removed or not found/);
  });

  it('a fix that changes no test file: the base runs again, its failing test fails there, and the fix is proven', async (t) => {
    const h: Harness = await startHarness({
      policy: (request, ctx) => agent(`git apply <<'PATCH'\n${h.repo.patch}\nPATCH`)(request, ctx),
      testCommand: 'npm test',
    });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'resolved', outcome.reason);
    assert.match(
      outcome.reason,
      /each fails without the change \(the tests run again on the code before it\)/,
    );
    const without = runOf(h, 'without_fix');
    assert.deepEqual(without?.changeFiles, { paths: [], total: 0 });
    assert.ok(without.summary.failedNames.includes(`test/calc.test.js::${FAILING}`));
    const state = reduceState(h.store.events);
    assert.match(
      renderVerification(state.baseline, state.finalTest, { withoutFix: state.withoutFix }),
      /The tests were also run again on the code before the change/,
    );
  });

  it('a test that failed before by chance (flaky) is not proof: it passes when the base runs again', async (t) => {
    // Fails the first time it runs in this checkout, passes from then on: the baseline's failure is
    // chance, and a change that touches nothing it tests would otherwise be "proven" by it.
    const flaky = `import { test } from 'node:test';
import { existsSync, writeFileSync } from 'node:fs';
const marker = new URL('../.git/ia-flaky-ran', import.meta.url);
test('flaky once', () => {
  if (!existsSync(marker)) {
    writeFileSync(marker, '');
    throw new Error('failed by chance');
  }
});
`;
    const h = await startHarness({
      policy: agent(`printf '// reviewed\\n' >> src/calc.js`),
      testCommand: 'npm test',
      files: { 'test/flaky.test.js': flaky },
    });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.ok(runOf(h, 'baseline')?.summary.failedNames.includes('test/flaky.test.js::flaky once'));
    assert.ok(runOf(h, 'final')?.summary.passedNames.includes('test/flaky.test.js::flaky once'));
    assert.equal(outcome.outcome, 'unverified', outcome.reason);
    assert.match(
      outcome.reason,
      /also pass without it \(the tests run again on the code before it\), .*flaky once/,
    );
    assert.deepEqual(runOf(h, 'without_fix')?.changeFiles, { paths: [], total: 0 });
  });

  it('a test file the runner runs but not named like a test, its expectation edited: unverified, run as edited on the code before the change', async (t) => {
    // `checks/average.js` holds a failing test (the fixture's bug) under a name no runner's default
    // and no test folder gives away. The change edits its expectation, and the expectation of the
    // fixture's own test, until both pass on the unchanged code.
    const check = `import { test } from 'node:test';
import assert from 'node:assert/strict';
import { average } from '../src/calc.js';
test('average of 1, 2, 2 is 1.67', () => {
  assert.equal(average([1, 2, 2]), 1.67);
});
`;
    const pkg = JSON.parse(
      readFileSync(join('test', 'fixtures', 'repos', 'node-calc', 'package.json'), 'utf8'),
    ) as {
      scripts: Record<string, string>;
    };
    pkg.scripts.test = "node --test 'test/*.test.js' 'checks/*.js'";
    const h = await startHarness({
      policy: agent(`${EDIT_THE_TEST} && sed -i 's/2\\]), 1\\.67/2]), 1.66/' checks/average.js`),
      testCommand: 'npm test',
      files: { 'checks/average.js': check, 'package.json': `${JSON.stringify(pkg, null, 2)}\n` },
    });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.ok(
      runOf(h, 'baseline')?.summary.failedNames.includes('checks/average.js::average of 1, 2, 2 is 1.67'),
    );
    assert.equal(runOf(h, 'final')?.exitCode, 0, 'the edited tests pass');
    assert.equal(outcome.outcome, 'unverified', outcome.reason);
    assert.match(outcome.reason, /also pass without it .*checks\/average\.js::average of 1, 2, 2 is 1\.67/);
    assert.deepEqual(runOf(h, 'without_fix')?.changeFiles?.paths.sort(), [
      'checks/average.js',
      'test/calc.test.js',
    ]);
  });
});
