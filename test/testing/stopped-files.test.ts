import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventOf } from '../../src/events/schema.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { reply, type Policy } from '../../src/model-sim/index.js';
import { renderVerification } from '../../src/publish/verification.js';
import { startHarness, type Harness } from '../support/agent-harness.js';

/**
 * Whole runs of the agent (the real loop, the model simulator, the local sandbox, node's test
 * runner) on a repository whose bug makes a test file run out of memory or hang: the engine names
 * the file, reconciles it with its tests once the change fixes it, and bounds every run so that a
 * hang costs seconds here (minutes with the default limits), not the test timeout.
 */

/** The agent runs `commands` one by one, then finishes. */
function agent(...commands: string[]): Policy {
  return (request) => {
    const turns = request.messages.filter((m) => m.role === 'assistant').length;
    const command = commands[turns];
    if (command !== undefined) {
      return reply().tool(
        command === 'run_tests' ? 'run_tests' : 'bash',
        command === 'run_tests' ? {} : { command },
        {
          id: `toolu_sf_${String(turns).padStart(4, '0')}`,
        },
      );
    }
    return reply().tool('finish', { summary: 'Fixed.' }, { id: 'toolu_sf_9999' });
  };
}

function runs(h: Harness): EventOf<'test_run'>[] {
  return h.store.events.filter((e): e is EventOf<'test_run'> => e.kind === 'test_run');
}

/** A line splitter whose last line (without a newline) loops, growing its list until memory runs out. */
const LINES_BUG = `export function lines(text) {
  const out = [];
  let i = 0;
  while (i < text.length) {
    const j = text.indexOf('\\n', i);
    out.push(text.slice(i, j));
    i = j + 1;
  }
  return out;
}
`;
const LINES_FIX = `sed -i 's/    const j = text.indexOf(.\\\\n., i);/    const n = text.indexOf("\\\\n", i);\\n    const j = n === -1 ? text.length : n;/' src/lines.js`;

const LINES_TEST = `import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lines } from '../src/lines.js';

test('splits at newlines', () => {
  assert.deepEqual(lines('a\\nb\\n'), ['a', 'b']);
});

test('keeps a last line without a newline', () => {
  assert.deepEqual(lines('a\\nb'), ['a', 'b']);
});
`;

/** A client that waits for the proxy's greeting, which the buggy proxy never sends. */
const PROXY = `import net from 'node:net';

export function startProxy() {
  return net.createServer((socket) => {
    // The bug: the greeting is never written.
    void socket;
  });
}
`;
const PROXY_FIX = `sed -i 's/    void socket;/    socket.end("hello");/' src/proxy.js`;

const PROXY_TEST = `import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startProxy } from '../src/proxy.js';

test('starts', () => {
  assert.ok(startProxy());
});

test('greets a client', async () => {
  const server = startProxy();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const socket = net.connect(server.address().port, '127.0.0.1');
  const data = await new Promise((resolve) => socket.once('data', resolve));
  assert.equal(String(data), 'hello');
  server.close();
});
`;

describe('a test file that cannot finish', () => {
  it('runs out of memory at baseline; the fix makes its tests pass: resolved, the file reconciled in the reason', async (t) => {
    const h = await startHarness({
      policy: agent(LINES_FIX),
      testCommand: 'npm test',
      files: {
        // The repository's own heap limit, so the baseline's file runs out of memory in a second.
        'package.json': `${JSON.stringify({ name: 'node-calc', type: 'module', private: true, scripts: { test: 'node --max-old-space-size=64 --test' } }, null, 2)}\n`,
        'src/lines.js': LINES_BUG,
        'test/lines.test.js': LINES_TEST,
      },
    });
    t.after(() => h.close());
    const outcome = await h.run();
    const [baseline, final] = [
      runs(h).find((r) => r.phase === 'baseline'),
      runs(h).find((r) => r.phase === 'final'),
    ];
    assert.ok(baseline !== undefined && final !== undefined);
    const crashed = baseline.summary.tests?.find((f) => f.id === 'test/lines.test.js');
    assert.deepEqual(
      { status: crashed?.status, detail: crashed?.detail },
      { status: 'crashed-file', detail: 'out of memory' },
      JSON.stringify(baseline.summary.tests),
    );
    assert.ok(final.summary.passedNames.includes('test/lines.test.js::keeps a last line without a newline'));
    assert.equal(outcome.outcome, 'resolved', outcome.reason);
    assert.match(
      outcome.reason,
      /test files that could not run before run now and their tests pass: test\/lines\.test\.js \(out of memory before; its 2 tests pass now\)/,
    );
    // The node-calc fixture's own failing test is not held against the fix.
    assert.match(
      outcome.reason,
      /failing before and after, not caused by this change: test\/calc\.test\.js::average rounds/,
    );
    const state = reduceState(h.store.events);
    assert.match(
      renderVerification(state.baseline, state.finalTest),
      /Test files that could not run before and whose tests pass now:\*\* `test\/lines\.test\.js` \(out of memory before; 2 tests passing now\)/,
    );
  });

  it('waits forever on a socket: every run stops within seconds, names the file, and the loop goes on', async (t) => {
    const h = await startHarness({
      // The agent runs the tests (bounded too), then changes something unrelated: still hanging.
      policy: agent('run_tests', "printf '// unrelated\\n' >> src/calc.js"),
      testCommand: 'npm test',
      // 15 s for a run, so 5 s for a test (bounds.ts); the default's are 15 and 3 minutes.
      limits: { testTimeoutMs: 15_000 },
      files: { 'src/proxy.js': PROXY, 'test/proxy.test.js': PROXY_TEST },
    });
    t.after(() => h.close());
    const started = performance.now();
    const outcome = await h.run();
    const all = runs(h);
    assert.deepEqual(
      all.map((r) => r.phase),
      ['baseline', 'final'],
    );
    for (const r of all) {
      assert.equal(r.killed, null, `${r.phase}: node stopped the file itself (--test-timeout)`);
      assert.ok(r.durationMs < 14_000, `${r.phase} took ${r.durationMs} ms`);
      assert.deepEqual(r.summary.hung, ['test/proxy.test.js'], r.phase);
      assert.ok(r.summary.failedNames.includes('test/proxy.test.js'), JSON.stringify(r.summary.tests));
    }
    const observation = h.store.events.find((e) => e.kind === 'observation' && e.tool === 'run_tests');
    assert.ok(observation?.kind === 'observation');
    assert.match(observation.content, /hung: test\/proxy\.test\.js/);
    assert.equal(outcome.outcome, 'unverified', outcome.reason);
    assert.match(outcome.reason, /test\/proxy\.test\.js/);
    assert.ok(performance.now() - started < 120_000, 'the whole run');
  });

  it('the fix for the hang: resolved, the file that timed out reconciled with its tests', async (t) => {
    const h = await startHarness({
      policy: agent(PROXY_FIX),
      testCommand: 'npm test',
      limits: { testTimeoutMs: 15_000 },
      files: { 'src/proxy.js': PROXY, 'test/proxy.test.js': PROXY_TEST },
    });
    t.after(() => h.close());
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'resolved', outcome.reason);
    assert.match(outcome.reason, /test\/proxy\.test\.js \(timed out before; its 2 tests pass now\)/);
  });
});
