import assert from 'node:assert/strict';
import { readdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { oracle, startModelSimulator, type ModelSimulator } from '../../src/model-sim/index.js';
import { cliEnv, lastJson, runCli } from '../support/cli.js';
import { gitOutput, makeFixtureRepo, type FixtureRepo } from '../support/fixture-repo.js';

const KEY = 'sk-ant-test-key';

for (const name of ['node-calc', 'python-inventory'] as const) {
  describe(`CLI resolve with the oracle: ${name}`, () => {
    let repo: FixtureRepo;
    let sim: ModelSimulator;
    let out: string;
    before(async () => {
      repo = makeFixtureRepo(name);
      sim = await startModelSimulator({ policy: oracle(repo.patch), apiKey: KEY });
      out = mkdtempSync(join(tmpdir(), 'ia-traj-'));
    });
    after(async () => {
      await sim.close();
      repo.cleanup();
      rmSync(out, { recursive: true, force: true });
    });

    test('reaches resolved, baseline fails, final passes, trajectory replays to the same state', async () => {
      const traj = join(out, 'run');
      const r = await runCli(
        [
          'resolve',
          repo.dir,
          '--task',
          'Fix the failing behaviour described by the tests',
          '--out',
          traj,
          '--json',
        ],
        cliEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: sim.url }),
      );
      assert.equal(r.code, 0, `exit ${String(r.code)}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
      const json = lastJson(r.stdout);
      assert.equal(json.outcome, 'resolved');
      assert.equal(json.trajectory, traj);
      assert.ok(typeof json.tokens === 'number' && json.tokens > 0);
      assert.ok(typeof json.usd === 'number' && json.usd > 0);

      const store = FileEventStore.open(traj);
      const state = reduceState(store.events);
      assert.ok(
        state.baseline !== null && state.baseline.exitCode !== 0,
        'the baseline run shows the failure',
      );
      assert.ok((state.baseline.summary.failed ?? 0) >= 1);
      assert.ok(state.finalTest !== null && state.finalTest.exitCode === 0, 'the final run passes');
      assert.equal(state.finalTest.summary.failed ?? 0, 0);
      // One file per event, numbered in order, and replaying them gives the same state.
      const files = readdirSync(join(traj, 'events')).sort();
      assert.equal(files.length, store.events.length);
      files.forEach((f, i) => {
        assert.match(f, new RegExp(`^${String(i + 1).padStart(6, '0')}-[a-z_]+\\.json$`));
      });
      const replayed = FileEventStore.open(traj);
      assert.deepEqual(reduceState(replayed.events), state);
      // The change stays in the working tree: the fix and the new file are there, uncommitted.
      const status = gitOutput(repo.dir, 'status', '--porcelain');
      assert.ok(status.includes('??') && status.includes(' M '), status);
      // Every request carried the tools and the stable prefix was cached.
      assert.ok(sim.requests.length >= 5);
      assert.ok(sim.requests.slice(1).some((q) => (q.usage?.cache_read_input_tokens ?? 0) > 0));

      const replay = await runCli(['replay', traj], cliEnv({}));
      assert.equal(replay.code, 0);
      assert.match(replay.stdout, /Outcome: resolved/);
    });
  });
}
