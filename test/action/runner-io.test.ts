import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ActionInputError, readInputs } from '../../src/action/inputs.js';
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
});
