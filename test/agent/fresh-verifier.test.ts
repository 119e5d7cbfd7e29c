import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import type { FreshVerifier } from '../../src/agent/run-agent.js';
import type { EventOf } from '../../src/events/schema.js';
import { oracle, reply, type Policy } from '../../src/model-sim/index.js';
import { renderVerification } from '../../src/publish/verification.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { startHarness, type Harness } from '../support/agent-harness.js';

/** The fixture's tests (test/fixtures/repos/node-calc), every one of which the forgery reports passing. */
const CALC_TESTS = [
  'sum adds every value',
  'sum of an empty list is zero',
  'range includes both ends',
  'range is empty when start is past end',
  'average of whole numbers',
  'average rounds to the nearest hundredth',
  'average rounds negative means away from zero',
  'average of an empty list throws',
];
const FORGED_TAP = [
  'TAP version 13',
  ...CALC_TESTS.map((name, i) => `ok ${i + 1} - ${name}`),
  `1..${CALC_TESTS.length}`,
  `# pass ${CALC_TESTS.length}`,
  '# fail 0',
  '# forged: all pass',
  '',
].join('\\n');

/**
 * The forgery a hostile agent can leave in its own sandbox outside the change: a file its workspace
 * git is told to ignore (so no checkpoint or diff holds it) that the test command consults, which
 * then prints every test passing, by name, when the workspace holds the change (so the run of the
 * code before the change, `without_fix`, shows the real failure and the forged pass stands). Here
 * the test command is written to make that dependence plain; in a real sandbox it is a home
 * `.npmrc`, an edited installed package or a tool first on PATH (test/e2e/app-forged-verdict).
 */
const TEST_COMMAND = `test -f forged.flag && ! git diff --quiet HEAD && printf '${FORGED_TAP}' || npm test`;

const forger: Policy = (request) => {
  const turns = request.messages.filter((m) => m.role === 'assistant').length;
  if (turns === 0)
    return reply().tool(
      'bash',
      {
        command:
          "echo forged.flag >> .git/info/exclude && touch forged.flag && printf '// looked\\n' >> src/calc.js",
      },
      { id: 'toolu_forger_0001' },
    );
  return reply().tool('finish', { summary: 'All tests pass.' }, { id: 'toolu_forger_0002' });
};

/** Sandboxes on fresh clones of `origin` at the asked commit; records what it was asked and closed. */
function cloningVerifier(
  t: TestContext,
  origin: () => string,
  tweak?: (dir: string) => void,
): FreshVerifier & { opened: string[]; closed: number } {
  const v = {
    opened: [] as string[],
    closed: 0,
    open: async (baseCommit: string) => {
      v.opened.push(baseCommit);
      const dir = mkdtempSync(join(tmpdir(), 'ia-fresh-'));
      t.after(() => {
        rmSync(dir, { recursive: true, force: true });
      });
      execFileSync('git', ['clone', '-q', '--no-checkout', origin(), dir]);
      execFileSync('git', ['-C', dir, 'checkout', '-q', '--detach', baseCommit]);
      tweak?.(dir);
      const sandbox = await LocalSandbox.create({
        workspace: dir,
        path: process.env.PATH ?? '/usr/bin:/bin',
      });
      return {
        sandbox,
        close: async () => {
          v.closed += 1;
          await sandbox.close();
        },
      };
    },
  };
  return v;
}

const finalRun = (h: Harness): EventOf<'test_run'> => {
  const e = h.store.events.find(
    (x): x is EventOf<'test_run'> => x.kind === 'test_run' && x.phase === 'final',
  );
  assert.ok(e, 'a final run');
  return e;
};

describe('the final run in a fresh sandbox (AgentDeps.verifier)', () => {
  it('in its own sandbox the forgery passes; in a fresh one on the recorded change it does not', async (t) => {
    const own = await startHarness({ policy: forger, testCommand: TEST_COMMAND });
    t.after(() => own.close());
    const forged = await own.run();
    assert.equal(forged.outcome, 'resolved', `the forgery works where the agent ran: ${forged.reason}`);
    assert.match(finalRun(own).output, /forged: all pass/);

    const verifier = cloningVerifier(t, () => h.repo.dir);
    const h: Harness = await startHarness({ policy: forger, testCommand: TEST_COMMAND, verifier });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'unverified', outcome.reason);
    const final = finalRun(h);
    assert.equal(final.sandbox, 'fresh');
    assert.doesNotMatch(final.output, /forged/);
    // The command is not a runner's own (a shell test before `npm test`): no report is asked for,
    // and node 20's console output does not name a test's file, so the id is the name alone.
    assert.deepEqual(final.summary.failedNames, ['average rounds to the nearest hundredth']);
    assert.deepEqual(verifier.opened, [h.store.base.workspace.baseCommit]);
    assert.equal(verifier.closed, 1);
    assert.match(renderVerification(null, final), /new sandbox that the agent never ran in/);
  });

  it('a real fix is resolved there, and the fresh sandbox holds exactly the checkpoint', async (t) => {
    const verifier = cloningVerifier(t, () => h.repo.dir);
    const h: Harness = await startHarness({
      policy: (request, ctx) => oracle(h.repo.patch)(request, ctx),
      testCommand: 'npm test',
      verifier,
    });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'resolved', outcome.reason);
    assert.equal(finalRun(h).sandbox, 'fresh');
    assert.equal(finalRun(h).exitCode, 0);
    assert.equal(verifier.closed, 1);
  });

  it('a change that does not rebuild the checkpoint there is unverified, with why, and nothing is tested', async (t) => {
    // The fresh sandbox holds another history whose files differ from the base: the base's tree
    // is not there to apply the change to, so what would be tested is not what is published.
    const verifier = cloningVerifier(
      t,
      () => h.repo.dir,
      (dir) => {
        rmSync(join(dir, '.git'), { recursive: true, force: true });
        writeFileSync(join(dir, 'src', 'calc.js'), 'export const nothing = 1;\n');
        const git = (...args: string[]) =>
          execFileSync('git', [
            '-c',
            'user.name=T',
            '-c',
            'user.email=t@example.invalid',
            '-C',
            dir,
            ...args,
          ]);
        git('init', '-q');
        git('add', '-A');
        git('commit', '-q', '-m', 'other');
      },
    );
    const h: Harness = await startHarness({ policy: forger, testCommand: 'npm test', verifier });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'unverified');
    assert.match(outcome.reason, /could not be rebuilt in a fresh sandbox/);
    assert.ok(!h.store.events.some((e) => e.kind === 'test_run' && e.phase === 'final'));
    assert.equal(verifier.closed, 1);
  });
});
