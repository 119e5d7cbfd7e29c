import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { reusableBaseline } from '../../src/agent/baseline-answer.js';
import type { AgentEvent, EventOf } from '../../src/events/schema.js';
import { reply, scripted } from '../../src/model-sim/index.js';
import { startHarness } from '../support/agent-harness.js';

const baseline: EventOf<'test_run'> = {
  id: 1,
  ts: '2026-12-03T00:00:00.000Z',
  kind: 'test_run',
  phase: 'baseline',
  command: 'npm test',
  exitCode: 1,
  killed: null,
  durationMs: 700,
  summary: { runner: 'node-test', passed: 3, failed: 1, skipped: 0, failedNames: ['adds'], passedNames: [] },
  output: 'not ok 1 - adds',
  outputBytes: 15,
};

let id = 2;
const action = (tool: string, input: Record<string, unknown>): AgentEvent => ({
  id: id++,
  ts: '2026-12-03T00:00:01.000Z',
  kind: 'action',
  toolUseId: `toolu_${id}`,
  tool,
  input,
});

describe('an unfiltered run_tests before anything changed is answered with the baseline', () => {
  it('while every action since the baseline only read', () => {
    assert.equal(reusableBaseline([baseline]), baseline);
    assert.equal(
      reusableBaseline([
        baseline,
        action('editor', { command: 'view', path: 'src/calc.js' }),
        action('search', { pattern: 'add' }),
        action('bash', { command: 'cat src/calc.js | head -5' }),
        action('run_tests', {}),
      ]),
      baseline,
    );
  });

  it('not once anything could have changed, even a command that changed nothing', () => {
    for (const [tool, input] of [
      ['editor', { command: 'str_replace', path: 'a.js', old_str: 'a', new_str: 'b' }],
      ['editor', { command: 'create', path: 'b.js', file_text: '' }],
      ['bash', { command: 'npm install left-pad' }],
      ['bash', { command: 'true; touch x' }],
      // Readers that run another program or write a file.
      ['bash', { command: 'env rm -rf node_modules' }],
      ['bash', { command: 'uniq a.txt b.txt' }],
      ['bash', { command: 'rg --pre ./x foo' }],
      ['bash', { command: 'git diff --output=patch' }],
      ['bash', { command: 'tree -o out.txt' }],
      ['run_tests', { filter: 'test/one.test.js' }],
      ['delegate', { question: 'where is add?' }],
      ['mcp__docs__fetch', { url: 'x' }],
    ] as const) {
      assert.equal(
        reusableBaseline([baseline, action('run_tests', {}), action(tool, input), action('run_tests', {})]),
        null,
        `${tool} ${JSON.stringify(input)}`,
      );
    }
  });

  it('not without a baseline, nor after one that was stopped', () => {
    assert.equal(reusableBaseline([action('run_tests', {})]), null);
    assert.equal(reusableBaseline([{ ...baseline, killed: 'timeout' }]), null);
  });

  it('in a run: the first run_tests is not run again and says so; after a command, it runs', async (t) => {
    // Every run of the test command leaves a line in a file outside the tree (ignored by git), so
    // the count says how often the tests really ran.
    const testCommand = 'echo ran >> .git/runs.log; npm test';
    const h = await startHarness({
      testCommand,
      policy: scripted([
        reply().tool('run_tests', {}, { id: 'toolu_first_run' }),
        reply().tool('editor', { command: 'view', path: 'src/calc.js' }, { id: 'toolu_view' }),
        reply().tool('run_tests', {}, { id: 'toolu_second_run' }),
        reply().tool('bash', { command: "printf '// looked\\n' >> src/calc.js" }, { id: 'toolu_command' }),
        reply().tool('run_tests', {}, { id: 'toolu_third_run' }),
        reply().tool('finish', { summary: 'Looked.' }, { id: 'toolu_finish' }),
      ]),
    });
    t.after(() => h.close());
    await h.run();
    const events = h.store.events;
    const observation = (toolUseId: string): EventOf<'observation'> => {
      const o = events.find(
        (e): e is EventOf<'observation'> => e.kind === 'observation' && e.toolUseId === toolUseId,
      );
      assert.ok(o, toolUseId);
      return o;
    };
    const base = events.find(
      (e): e is EventOf<'test_run'> => e.kind === 'test_run' && e.phase === 'baseline',
    );
    assert.ok(base);
    for (const reused of ['toolu_first_run', 'toolu_second_run']) {
      const o = observation(reused);
      assert.match(
        o.content,
        /^\$ .*npm test\nNot run again: nothing has changed since the harness ran the tests/,
      );
      assert.match(o.content, /tests fail \(exit code 1\)/);
      assert.deepEqual(o.testSummary, base.summary);
      assert.equal(o.exitCode, base.exitCode);
    }
    const ran = observation('toolu_third_run');
    assert.doesNotMatch(ran.content, /Not run again/);
    assert.deepEqual(ran.testSummary, base.summary);
    // Baseline, the third run_tests and the final run: three, not five.
    assert.equal(readFileSync(join(h.repo.dir, '.git', 'runs.log'), 'utf8'), 'ran\nran\nran\n');
  });
});
