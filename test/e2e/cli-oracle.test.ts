import assert from 'node:assert/strict';
import { readdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { reduceState } from '../../src/events/reduce-state.js';
import type { AgentEvent } from '../../src/events/schema.js';
import {
  oracle,
  startModelSimulator,
  type MessagesRequest,
  type ModelSimulator,
} from '../../src/model-sim/index.js';
import { cliEnv, lastJson, runCli } from '../support/cli.js';
import { gitOutput, makeFixtureRepo, type FixtureRepo } from '../support/fixture-repo.js';

const KEY = 'sk-ant-test-key';

/**
 * Each fixture with both tool sets (issue 36): `native` (the default for Claude 4 models: Anthropic's
 * text editor and bash tools, with interleaved thinking) and `schema` (the harness's own tools).
 */
const CASES = [
  ['node-calc', 'native', 'default'],
  ['node-calc', 'schema', 'default'],
  ['python-inventory', 'native', 'default'],
  ['python-inventory', 'schema', '0'],
] as const;

for (const [name, tools, thinking] of CASES) {
  describe(`CLI resolve with the oracle: ${name}, ${tools} tools, thinking ${thinking}`, () => {
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
        cliEnv({
          ANTHROPIC_API_KEY: KEY,
          ANTHROPIC_BASE_URL: sim.url,
          ISSUE_AGENT_TOOLS: tools,
          ...(thinking === '0' ? { ISSUE_AGENT_THINKING_BUDGET: '0' } : {}),
        }),
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

      checkToolSet(tools, thinking === 'default', sim, store.events);

      const replay = await runCli(['replay', traj], cliEnv({}));
      assert.equal(replay.code, 0);
      assert.match(replay.stdout, /Outcome: resolved/);
    });
  });
}

/** What the requests declared and what the log recorded, for either tool set. */
function checkToolSet(
  tools: 'native' | 'schema',
  thinks: boolean,
  sim: ModelSimulator,
  events: readonly AgentEvent[],
): void {
  const first = sim.requests[0];
  const body = first?.body as MessagesRequest;
  const declared = (body.tools ?? []).map((t) => {
    const o = t as { type?: string; name?: string };
    return o.type !== undefined && o.type !== 'custom' ? `${o.type}:${o.name ?? ''}` : (o.name ?? '');
  });
  const edits = events.filter((e) => e.kind === 'action' && e.tool === 'editor');
  assert.ok(edits.length > 0, 'the oracle used the editor');
  const responses = events.filter((e) => e.kind === 'model_response');
  if (tools === 'native') {
    assert.ok(declared.includes('text_editor_20250728:str_replace_based_edit_tool'), declared.join());
    assert.ok(declared.includes('bash_20250124:bash'), declared.join());
    assert.ok(!declared.includes('editor'));
    // Recorded as the harness's editor, with the name the model called.
    for (const e of edits) assert.equal(e.kind === 'action' && e.calledAs, 'str_replace_based_edit_tool');
  } else {
    assert.ok(declared.includes('editor') && declared.includes('bash'), declared.join());
    assert.ok(!declared.some((d) => d.includes(':')), declared.join());
    for (const e of edits) assert.equal(e.kind === 'action' && e.calledAs, undefined);
  }
  if (thinks) {
    // Interleaved thinking, every turn's thinking replayed (the simulator checks the signatures).
    assert.deepEqual(body.thinking, { type: 'enabled', budget_tokens: 8192 });
    assert.equal(body.max_tokens, 8192 + 8192);
    assert.match(String(first?.headers['anthropic-beta']), /interleaved-thinking-2025-05-14/);
    for (const r of responses) {
      assert.equal(r.content[0]?.type, 'thinking', 'every turn thought first');
      assert.ok((r.thinkingTokens ?? 0) > 0);
    }
  } else {
    assert.equal(body.thinking, undefined);
    assert.equal(first?.headers['anthropic-beta'], undefined);
    for (const r of responses) assert.ok(!r.content.some((b) => b.type === 'thinking'));
  }
}
