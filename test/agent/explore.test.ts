import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { reduceState } from '../../src/events/reduce-state.js';
import type { AgentEvent } from '../../src/events/schema.js';
import { DETAIL_LEVELS, trajectoryUnits } from '../../src/publish/trajectory.js';
import { Redactor } from '../../src/publish/redact.js';
import { StepGrouper } from '../../src/server/web/steps.js';
import { reply, type Policy } from '../../src/model-sim/index.js';
import type { MessagesRequest } from '../../src/model-sim/types.js';
import { startHarness } from '../support/agent-harness.js';

const isExplorer = (r: MessagesRequest): boolean => JSON.stringify(r.system).includes('exploration helper');

/** Main-loop replies and explorer replies, each in their own order. */
function routed(
  main: readonly ReturnType<typeof reply>[],
  explorer: readonly ReturnType<typeof reply>[],
): Policy {
  let m = 0;
  let x = 0;
  return (request) => {
    const next = isExplorer(request) ? explorer[x++] : main[m++];
    return next ?? { status: 500, message: 'script ran out' };
  };
}

test('a delegated exploration: read-only, nested in the log, its summary (only) back in the main context, its cost in the job', async () => {
  const h = await startHarness({
    testCommand: 'npm test',
    policy: routed(
      [
        reply().tool('delegate', { question: 'Where is sum defined, and who calls it?' }),
        reply().tool('finish', { summary: 'explored only' }),
      ],
      [
        reply().tool('search', { pattern: 'function sum' }),
        reply().tool('editor', { command: 'view', path: 'src/calc.js' }),
        reply().tool('bash', { command: 'touch CHANGED' }),
        reply().tool('editor', { command: 'create', path: 'NEW.txt', file_text: 'x' }),
        reply().text('SUMMARY: sum is defined in src/calc.js at line 6; the tests call it.'),
      ],
    ),
  });
  try {
    await h.run();
    const requests = h.sim.requests.map((r) => r.body as MessagesRequest);
    assert.equal(requests.filter(isExplorer).length, 5);
    const mainRequests = requests.filter((r) => !isExplorer(r));
    assert.equal(mainRequests.length, 2);
    const second = JSON.stringify(mainRequests[1]?.messages);
    assert.match(second, /SUMMARY: sum is defined in src\/calc\.js/);
    assert.doesNotMatch(
      second,
      /Small arithmetic helpers/,
      'the file the explorer read stays out of the main context',
    );
    // The explorer's own context: the question, not the issue.
    const firstExplorer = JSON.stringify(requests.find(isExplorer)?.messages);
    assert.match(firstExplorer, /Where is sum defined/);
    assert.doesNotMatch(firstExplorer, /untrusted-issue/);
    // Read-only: the writing calls were refused and changed nothing.
    const nested = h.store.events.filter((e) => 'parent' in e && e.parent !== undefined);
    const delegateId = h.store.events.find((e) => e.kind === 'action' && e.tool === 'delegate');
    assert.ok(delegateId?.kind === 'action');
    assert.ok(nested.every((e) => 'parent' in e && e.parent === delegateId.toolUseId));
    const refused = nested.filter((e) => e.kind === 'observation' && e.isError);
    assert.equal(refused.length, 2);
    assert.equal(existsSync(join(h.repo.dir, 'CHANGED')), false);
    assert.equal(existsSync(join(h.repo.dir, 'NEW.txt')), false);
    // Steps are the main loop's; tokens and cost are the job's, the explorer's included.
    const state = reduceState(h.store.events);
    assert.equal(state.steps, 2);
    const explorerIn = nested.reduce(
      (n, e) => n + (e.kind === 'model_response' ? e.usage.inputTokens : 0),
      0,
    );
    const mainIn = h.store.events.reduce(
      (n, e) => n + (e.kind === 'model_response' && e.parent === undefined ? e.usage.inputTokens : 0),
      0,
    );
    assert.ok(explorerIn > 0);
    assert.equal(state.usage.inputTokens, explorerIn + mainIn);
    // Shown nested: in the PR's trajectory and in the run view (one step holds the explorer's item).
    const detail = DETAIL_LEVELS[0];
    assert.ok(detail);
    const md = trajectoryUnits(
      [{ base: h.store.base, events: h.store.events, label: 'x' }],
      detail,
      new Redactor([]),
    )
      .map((u) => u.markdown)
      .join('\n\n');
    assert.match(md, /↳ 🔎 \*Explorer\*/);
    assert.match(md, /\*\*Step 2\*\*/);
    assert.doesNotMatch(md, /\*\*Step 3\*\*/);
    const g = new StepGrouper();
    for (const e of h.store.events) g.add(e);
    const subs = g.steps.flatMap((s) => s.items.filter((i) => i.kind === 'sub'));
    assert.equal(subs.length, 1);
    const sub = subs[0];
    assert.ok(sub?.kind === 'sub');
    const calls = sub.entries.filter((x) => x.kind === 'call');
    assert.equal(calls.length, 4, 'each explorer tool call, paired');
    assert.ok(calls.every((c) => c.observation !== null));
    assert.equal(sub.entries.length - calls.length, 5, 'and its five turns');
    assert.equal(g.steps.filter((s) => s.index > 0).length, 2);
  } finally {
    await h.close();
  }
});

test('a budget exhausted inside the exploration ends the explorer with what it found, not the job', async () => {
  const h = await startHarness({
    policy: routed(
      [
        reply().tool('delegate', { question: 'Look everywhere.', max_steps: 2 }),
        reply().tool('finish', { summary: 'went on after the explorer stopped' }),
      ],
      [
        reply().text('FOUND-SO-FAR: calc.js').tool('search', { pattern: 'x' }),
        reply().tool('search', { pattern: 'y' }),
        reply().tool('search', { pattern: 'z' }),
      ],
    ),
  });
  try {
    const outcome = await h.run();
    assert.notEqual(outcome.outcome, 'budget_exhausted');
    const result = h.store.events.find(
      (e): e is Extract<AgentEvent, { kind: 'observation' }> =>
        e.kind === 'observation' && e.tool === 'delegate',
    );
    assert.ok(result);
    assert.match(
      result.content,
      /The exploration stopped: its step budget \(2\) ran out\. What it had found so far:\n\nFOUND-SO-FAR/,
    );
    assert.equal(h.sim.requests.filter((r) => isExplorer(r.body as MessagesRequest)).length, 2);
  } finally {
    await h.close();
  }
});
