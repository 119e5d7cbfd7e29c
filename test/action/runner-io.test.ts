import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ActionInputError, readInputs } from '../../src/action/inputs.js';
import { readAgentEnv } from '../../src/config/agent-env.js';
import { RunnerIo } from '../../src/action/runner-io.js';

describe('the runner protocols', () => {
  const temp = mkdtempSync(join(tmpdir(), 'ia-runner-io-'));
  after(() => {
    rmSync(temp, { recursive: true, force: true });
  });

  it('masks secrets line by line, then stops command processing until its own annotation', () => {
    const lines: string[] = [];
    const io = new RunnerIo(null, null, (l) => lines.push(l));
    io.start(['sk-ant-secret-1', '-----BEGIN KEY-----\nabc123\n']);
    assert.deepEqual(lines.slice(0, 3), [
      '::add-mask::sk-ant-secret-1',
      '::add-mask::-----BEGIN KEY-----',
      '::add-mask::abc123',
    ]);
    const stop = /^::stop-commands::([0-9a-f]{32})$/.exec(lines[3] ?? '');
    assert.ok(stop !== null);
    io.annotate('error', 'broke: 100%\nsecond line');
    // Resumed with the token, one escaped annotation, stopped again.
    assert.deepEqual(lines.slice(4), [
      `::${stop[1]}::`,
      '::error::broke: 100%25%0Asecond line',
      `::stop-commands::${stop[1]}`,
    ]);
  });

  it('writes outputs in the delimited form, with a delimiter the value does not contain', () => {
    const file = join(temp, 'out');
    writeFileSync(file, '');
    const io = new RunnerIo(file, null, () => undefined);
    io.setOutput('outcome', 'resolved');
    io.setOutput('evil', 'a\nghadelimiter_x\nb=c');
    const text = readFileSync(file, 'utf8');
    const blocks = [...text.matchAll(/^([\w-]+)<<(\S+)\n([\s\S]*?)\n\2$/gm)].map((m) => [m[1], m[3]]);
    assert.deepEqual(blocks, [
      ['outcome', 'resolved'],
      ['evil', 'a\nghadelimiter_x\nb=c'],
    ]);
  });

  it('inputs: the runner passes `foo-bar` as INPUT_FOO-BAR; every problem is named', () => {
    const ok = readInputs({
      'INPUT_ANTHROPIC-API-KEY': 'k',
      'INPUT_GITHUB-TOKEN': 't',
      'INPUT_MAX-USD': '2.5',
      INPUT_SANDBOX: 'docker',
      INPUT_HANDLE: '@bot',
    });
    assert.deepEqual(ok.budgets, { maxUsd: 2.5 });
    assert.equal(ok.sandbox, 'docker');
    assert.equal(ok.handle, '@bot');
    assert.throws(
      () =>
        readInputs({
          'INPUT_MAX-STEPS': '1.5',
          INPUT_SANDBOX: 'vm',
          INPUT_HANDLE: 'bot',
          'INPUT_BASE-BRANCH': '--upload-pack=x',
        }),
      (e: unknown) => {
        assert.ok(e instanceof ActionInputError);
        const all = e.problems.join('\n');
        for (const name of [
          'anthropic-api-key',
          'github-token',
          'max-steps',
          'sandbox',
          'handle',
          'base-branch',
        ])
          assert.match(all, new RegExp(`^${name}:`, 'm'));
        return true;
      },
    );
  });

  it('inputs: `tools` and `thinking-budget` become ISSUE_AGENT_TOOLS and ISSUE_AGENT_THINKING_BUDGET; bad values are named', () => {
    const required = { 'INPUT_ANTHROPIC-API-KEY': 'k', 'INPUT_GITHUB-TOKEN': 't' };
    const unset = readInputs(required);
    assert.equal(unset.tools, null);
    assert.equal(unset.thinkingBudget, null);
    const set = readInputs({ ...required, INPUT_TOOLS: 'Schema', 'INPUT_THINKING-BUDGET': '4096' });
    assert.equal(set.tools, 'schema');
    assert.equal(set.thinkingBudget, 4096);
    assert.equal(readInputs({ ...required, 'INPUT_THINKING-BUDGET': '0' }).thinkingBudget, 0);
    // What run-action hands readAgentEnv resolves to the run's setup as the settings would.
    const agent = readAgentEnv({
      ISSUE_AGENT_MODEL: 'claude-sonnet-4-6',
      ISSUE_AGENT_TOOLS: set.tools,
      ISSUE_AGENT_THINKING_BUDGET: String(set.thinkingBudget),
    });
    assert.deepEqual(agent.modelChoice, { tools: 'schema', thinkingBudget: 4096 });
    for (const [tools, budget, problems] of [
      ['bash', null, ['tools: must be native or schema (got "bash")']],
      [null, '512', ['thinking-budget: must be 0 (off) or at least 1024 (got "512")']],
      [null, 'lots', ['thinking-budget: must be a whole number of tokens (0: off) (got "lots")']],
      ['json', '-1', ['tools:', 'thinking-budget:']],
    ] as const) {
      assert.throws(
        () =>
          readInputs({
            ...required,
            ...(tools === null ? {} : { INPUT_TOOLS: tools }),
            ...(budget === null ? {} : { 'INPUT_THINKING-BUDGET': budget }),
          }),
        (e: unknown) => {
          assert.ok(e instanceof ActionInputError);
          assert.equal(e.problems.length, problems.length);
          problems.forEach((p, i) => {
            assert.ok(e.problems[i]?.startsWith(p), e.problems[i]);
          });
          return true;
        },
      );
    }
  });
});
