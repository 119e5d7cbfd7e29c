import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { hang, oracle, startModelSimulator, type MessagesRequest } from '../support/model-sim/index.js';
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
  } finally {
    await sim.close();
    repo.cleanup();
    rmSync(out, { recursive: true, force: true });
  }
});
