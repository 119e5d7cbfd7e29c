import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { hang, oracle, reply, startModelSimulator, type MessagesRequest } from '../../src/model-sim/index.js';
import { cliEnv, lastJson, runCli, startCli } from '../support/cli.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';

const KEY = 'sk-ant-resume';

function assistantTurns(body: unknown): number {
  return (body as MessagesRequest).messages.filter((m) => m.role === 'assistant').length;
}

test('SIGKILL after k model calls, then resume: resolved, and no answered step is asked again', async () => {
  const repo = makeFixtureRepo('node-calc');
  const fix = oracle(repo.patch);
  const k = 4;
  // Answer k requests, then hang: the kill lands while step k+1 is in flight, never mid-write.
  const sim = await startModelSimulator({
    policy: (req, ctx) => (ctx.requestIndex >= k ? hang() : fix(req, ctx)),
    apiKey: KEY,
  });
  const out = mkdtempSync(join(tmpdir(), 'ia-resume-'));
  const traj = join(out, 'run');
  const env = cliEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: sim.url });
  try {
    const child = startCli(
      ['resolve', repo.dir, '--task', 'Fix average rounding', '--out', traj, '--json'],
      env,
    );
    await sim.waitForRequests(k + 1, 60_000);
    child.kill('SIGKILL');
    const killed = await child.result;
    assert.equal(killed.signal, 'SIGKILL');

    const before = FileEventStore.open(traj);
    const answered = before.events.filter((e) => e.kind === 'model_response').length;
    assert.equal(answered, k);
    assert.equal(
      before.events.some((e) => e.kind === 'outcome'),
      false,
    );
    const seenBeforeResume = sim.requests.length;

    sim.setPolicy(fix);
    const resumed = await runCli(['resume', traj, '--json'], env);
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.equal(lastJson(resumed.stdout).outcome, 'resolved');
    const after = sim.requests.slice(seenBeforeResume);
    assert.ok(after.length > 0);
    for (const r of after) {
      assert.ok(
        assistantTurns(r.body) >= answered,
        `a request re-asked step ${assistantTurns(r.body) + 1}, already answered`,
      );
    }
    // The request that was in flight at the kill is the first one after resume, byte for byte.
    assert.deepEqual(after[0]?.body, sim.requests[k]?.body);
    const store = FileEventStore.open(traj);
    assert.ok(store.events.some((e) => e.kind === 'run_resumed'));
    // Thinking is on by default (issue 36): the turns answered before the kill kept their thinking,
    // and the resumed requests sent it back unchanged (the simulator checks every signature, so a
    // changed or dropped block would have been a 400 and no `resolved`).
    const thoughtBefore = before.events.flatMap((e) =>
      e.kind === 'model_response' ? e.content.filter((b) => b.type === 'thinking') : [],
    );
    assert.equal(thoughtBefore.length, k);
    const resent = JSON.stringify((after[0]?.body as MessagesRequest).messages);
    for (const b of thoughtBefore) assert.ok(resent.includes(JSON.stringify(b.signature)));
    assert.ok(after.every((r) => r.status === 200));
  } finally {
    await sim.close();
    repo.cleanup();
    rmSync(out, { recursive: true, force: true });
  }
});

const isExplorer = (body: unknown): boolean =>
  JSON.stringify((body as MessagesRequest).system).includes('exploration helper');

test('SIGKILL inside a delegated exploration, then resume: the explorer goes on from its next step, its answered calls are not asked again', async () => {
  const repo = makeFixtureRepo('node-calc');
  // Stateless, so the resumed run gets what the first would have: the main loop delegates once,
  // then finishes; the explorer searches, views, then answers.
  const policy = (req: MessagesRequest): ReturnType<typeof reply> => {
    const turns = assistantTurns(req);
    if (isExplorer(req)) {
      if (turns === 0) return reply().tool('search', { pattern: 'function average' });
      if (turns === 1) return reply().tool('editor', { command: 'view', path: 'src/calc.js' });
      return reply().text('SUMMARY: average is in src/calc.js.');
    }
    return turns === 0
      ? reply().tool('delegate', { question: 'Where is average?' })
      : reply().tool('finish', { summary: 'explored' });
  };
  // Requests 0 (main), 1 and 2 (explorer) are answered; the explorer's third hangs: the kill lands
  // inside the delegate call.
  const sim = await startModelSimulator({
    policy: (req, ctx) => (ctx.requestIndex >= 3 ? hang() : policy(req)),
    apiKey: KEY,
  });
  const out = mkdtempSync(join(tmpdir(), 'ia-resume-delegate-'));
  const traj = join(out, 'run');
  const env = cliEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: sim.url });
  try {
    const child = startCli(['resolve', repo.dir, '--task', 'Look around', '--out', traj, '--json'], env);
    await sim.waitForRequests(4, 60_000);
    child.kill('SIGKILL');
    assert.equal((await child.result).signal, 'SIGKILL');
    const before = FileEventStore.open(traj).events;
    const delegateCall = before.find((e) => e.kind === 'action' && e.tool === 'delegate');
    assert.ok(delegateCall?.kind === 'action');
    assert.equal(before.filter((e) => 'parent' in e && e.kind === 'model_response').length, 2);

    const seen = sim.requests.length;
    sim.setPolicy((req) => policy(req));
    const resumed = await runCli(['resume', traj, '--json'], env);
    assert.ok(resumed.code !== null, resumed.stderr);
    const after = sim.requests.slice(seen).map((r) => r.body);
    // First the explorer's third step, byte for byte what was in flight; no explorer step again.
    assert.deepEqual(after[0], sim.requests[3]?.body);
    assert.equal(after.filter(isExplorer).length, 1);
    const events = FileEventStore.open(traj).events;
    const nested = events.filter((e) => 'parent' in e && e.parent === delegateCall.toolUseId);
    assert.equal(nested.filter((e) => e.kind === 'model_response').length, 3);
    const summaries = events.filter(
      (e) => e.kind === 'observation' && e.tool === 'delegate' && !('parent' in e && e.parent !== undefined),
    );
    assert.equal(summaries.length, 1);
    assert.match(summaries[0]?.kind === 'observation' ? summaries[0].content : '', /SUMMARY: average is in/);
    assert.ok(events.some((e) => e.kind === 'outcome'));
  } finally {
    await sim.close();
    repo.cleanup();
    rmSync(out, { recursive: true, force: true });
  }
});
