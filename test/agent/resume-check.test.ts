import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { describedWorkspace } from '../../src/agent/resume-check.js';
import { newBaseState } from '../../src/agent/new-run.js';
import { runAgent } from '../../src/agent/run-agent.js';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import type { EventStore } from '../../src/events/event-store.js';
import { PgRunStore } from '../../src/events/pg-event-store.js';
import type { AgentEvent, NewEvent } from '../../src/events/schema.js';
import { AnthropicModel } from '../../src/model/anthropic-model.js';
import { DEFAULT_PRICES } from '../../src/model/pricing.js';
import { reply, startModelSimulator, type MessagesRequest } from '../../src/model-sim/index.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { startHarness, TEST_KEY } from '../support/agent-harness.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';
import { postgresSkipReason, startPostgres, type TestPostgres } from '../support/postgres-server.js';

const BASE = 'b'.repeat(40);
const T1 = '1'.repeat(40);
const T2 = '2'.repeat(40);

/** Events as a log holds them (ids from 1, a fixed time). */
function log(...events: NewEvent[]): AgentEvent[] {
  return events.map((e, i) => ({ ...e, id: i + 1, ts: new Date(1000 * i).toISOString() }));
}

const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 };
const turn = (id: string, input: Record<string, unknown>): NewEvent => ({
  kind: 'model_response',
  model: 'claude-sonnet-4-6',
  requestId: null,
  content: [{ type: 'tool_use', id, name: 'editor', input }],
  stopReason: 'tool_use',
  usage,
  usd: 0,
  latencyMs: 1,
  attempts: 1,
  promptTokensEstimate: 1,
});
const edit = { command: 'str_replace', path: 'src/calc.js', old_str: 'a', new_str: 'b' };
const action = (id: string, input: unknown = edit): NewEvent => ({
  kind: 'action',
  toolUseId: id,
  tool: 'editor',
  input,
});
const observed = (id: string, tree?: string): Extract<NewEvent, { kind: 'observation' }> => ({
  kind: 'observation',
  toolUseId: id,
  tool: 'editor',
  isError: false,
  content: 'Edited src/calc.js.',
  durationMs: 1,
  ...(tree === undefined ? {} : { tree }),
});
const checkpoint = (tree: string, toolUseId?: string): Extract<NewEvent, { kind: 'checkpoint' }> => ({
  kind: 'checkpoint',
  tree,
  diff: '',
  filesChanged: 1,
  ...(toolUseId === undefined ? {} : { toolUseId }),
});

describe('the workspace a log describes', () => {
  it('a step recorded checkpoint first describes its checkpoint', () => {
    const events = log(turn('a', edit), action('a'), checkpoint(T1, 'a'), observed('a', T1));
    assert.deepEqual(describedWorkspace(BASE, events), { ok: true, tree: T1 });
  });

  it('a killed step with its checkpoint and no observation yet describes that checkpoint', () => {
    const events = log(turn('a', edit), action('a'), checkpoint(T1, 'a'));
    assert.deepEqual(describedWorkspace(BASE, events), { ok: true, tree: T1 });
  });

  it('an observation that states a tree no checkpoint before it holds is refused', () => {
    const events = log(turn('a', edit), action('a'), checkpoint(T1, 'a'), observed('a', T1));
    const more = log(...events, turn('b', edit), action('b'), observed('b', T2));
    const r = describedWorkspace(BASE, more);
    assert.ok(!r.ok);
    assert.equal(r.cause, 'resume_unrecorded_change');
  });

  it('an observation of a call that changed nothing states the checkpoint it is at', () => {
    const events = log(turn('a', edit), action('a'), observed('a', BASE));
    assert.deepEqual(describedWorkspace(BASE, events), { ok: true, tree: BASE });
  });

  describe('logs from before steps were recorded checkpoint first (observation, then checkpoint)', () => {
    it('an edit followed by its checkpoint is fine', () => {
      const events = log(turn('a', edit), action('a'), observed('a'), checkpoint(T1));
      assert.deepEqual(describedWorkspace(BASE, events), { ok: true, tree: T1 });
    });

    it('an edit at the end of the log, or before a resume, with no checkpoint after it is refused', () => {
      for (const events of [
        log(turn('a', edit), action('a'), observed('a')),
        log(turn('a', edit), action('a'), observed('a'), { kind: 'run_resumed', pid: 1 }),
        log(turn('a', edit), action('a'), observed('a'), {
          kind: 'guidance_added',
          paths: ['AGENTS.md'],
          touched: 'src/calc.js',
        }),
      ]) {
        const r = describedWorkspace(BASE, events);
        assert.ok(!r.ok, JSON.stringify(events.at(-1)));
        assert.equal(r.cause, 'resume_unrecorded_change');
        assert.match(r.reason, /Edited src\/calc\.js/);
      }
    });

    it('an edit the run went on from (it changed nothing), a view, or a refused edit is fine', () => {
      const view = { command: 'view', path: 'src/calc.js' };
      const events = log(
        turn('a', edit),
        action('a'),
        observed('a'),
        turn('b', view),
        action('b', view),
        observed('b'),
        turn('c', edit),
        action('c'),
        { ...observed('c'), isError: true },
      );
      assert.deepEqual(describedWorkspace(BASE, events), { ok: true, tree: BASE });
    });
  });
});

const BUG = 'return Math.floor(mean * 100) / 100;';
const FIX = 'return (Math.sign(mean) * Math.round(Math.abs(mean) * 100)) / 100;';
const fixThenFinish = (req: MessagesRequest): ReturnType<typeof reply> =>
  req.messages.some((m) => m.role === 'assistant')
    ? reply().tool('finish', { summary: 'fixed' })
    : reply().tool('editor', { command: 'str_replace', path: 'src/calc.js', old_str: BUG, new_str: FIX });

describe('a resume that cannot rebuild the workspace its log describes stops with a typed cause', () => {
  it('a log from before steps were recorded checkpoint first, killed between the edit and its checkpoint', async () => {
    const h = await startHarness({ policy: fixThenFinish, testCommand: 'node --test' });
    try {
      const input = { command: 'str_replace', path: 'src/calc.js', old_str: BUG, new_str: FIX };
      h.store.appendSync(turn('toolu_legacy', input));
      h.store.appendSync(action('toolu_legacy', input));
      h.store.appendSync({ ...observed('toolu_legacy'), content: 'Edited src/calc.js: 1 replacement.' });
      const outcome = await h.run();
      assert.equal(outcome.outcome, 'failed');
      assert.equal(outcome.cause, 'resume_unrecorded_change');
      assert.equal(h.sim.requests.length, 0, 'no model call on a workspace the conversation does not match');
      assert.ok(!h.store.events.some((e) => e.kind === 'checkpoint' || e.kind === 'test_run'));
    } finally {
      await h.close();
    }
  });

  it('a checkpoint that is not in this repository and whose diff was not recorded', async () => {
    const h = await startHarness({ policy: fixThenFinish, testCommand: 'node --test' });
    try {
      h.store.appendSync(turn('toolu_big', edit));
      h.store.appendSync(action('toolu_big', edit));
      h.store.appendSync({ ...checkpoint(T1, 'toolu_big'), diff: null });
      h.store.appendSync(observed('toolu_big', T1));
      const outcome = await h.run();
      assert.equal(outcome.outcome, 'failed');
      assert.equal(outcome.cause, 'resume_unrestorable');
      assert.match(outcome.reason, /could not be rebuilt as the log describes it/);
      // What the workspace holds is not what the log describes: it is not recorded as a checkpoint.
      const after = h.store.events.slice(h.store.events.findIndex((e) => e.kind === 'run_resumed'));
      assert.deepEqual(
        after.map((e) => e.kind),
        ['run_resumed', 'outcome'],
      );
    } finally {
      await h.close();
    }
  });
});

/**
 * The PostgreSQL store (one row per event, what multi-host workers use) under the same crash as
 * the file store in test/cli/crash-consistent-steps.test.ts: the process dies at a point of the
 * edit (its appends stop there), and a run on another host (a fresh clone) resumes from the rows.
 */
describe(
  'crash-consistent steps on the PostgreSQL store',
  { skip: postgresSkipReason(), timeout: 300_000 },
  () => {
    let server: TestPostgres;
    let runs: PgRunStore;
    before(async () => {
      server = await startPostgres();
      runs = await PgRunStore.connect(server.url);
    });
    after(async () => {
      await runs.close();
      await server.stop();
    });

    class Died extends Error {}

    /** The run's store, dead from the first append of `kind` on (the edit's: nothing more is written). */
    function diesAt(store: EventStore, kind: 'checkpoint' | 'observation'): EventStore {
      let dead = false;
      return {
        get base() {
          return store.base;
        },
        get events() {
          return store.events;
        },
        location: store.location,
        attachFile: (path, name) => store.attachFile(path, name),
        readAttachment: (rel) => store.readAttachment(rel),
        append: async (event) => {
          if (dead || event.kind === kind) {
            dead = true;
            throw new Died(`died before the ${kind}`);
          }
          return store.append(event);
        },
      };
    }

    for (const point of ['checkpoint', 'observation'] as const) {
      it(`killed before the edit's ${point}: resumed on another host, the run ends with the change its rows describe`, async () => {
        const repo = makeFixtureRepo('node-calc');
        const sim = await startModelSimulator({ policy: fixThenFinish, apiKey: TEST_KEY });
        const model = new AnthropicModel({
          apiKey: TEST_KEY,
          model: 'claude-sonnet-4-6',
          baseURL: sim.url,
          baseBackoffMs: 10,
        });
        const other = mkdtempSync(join(tmpdir(), 'ia-pg-resume-'));
        const runId = `crash-${point}-${Date.now()}`;
        try {
          const first = await LocalSandbox.create({
            workspace: repo.dir,
            path: process.env.PATH ?? '/usr/bin:/bin',
          });
          const base = await newBaseState({
            task: { title: 'Fix average', body: 'It truncates.', instructions: [], source: 'test' },
            sandbox: first,
            model: model.name,
            limits: DEFAULT_LIMITS,
            testCommand: 'node --test',
          });
          const store = await runs.create(runId, base);
          await assert.rejects(
            runAgent({ store: diesAt(store, point), sandbox: first, model, prices: DEFAULT_PRICES }),
            Died,
          );
          await first.close();

          execFileSync('git', ['clone', '-q', repo.dir, join(other, 'repo')]);
          const second = await LocalSandbox.create({
            workspace: join(other, 'repo'),
            path: process.env.PATH ?? '/usr/bin:/bin',
          });
          try {
            const rows = await runs.open(runId);
            const outcome = await runAgent({ store: rows, sandbox: second, model, prices: DEFAULT_PRICES });
            assert.equal(outcome.outcome, 'resolved', outcome.reason);
            const events = (await runs.open(runId)).events;
            const obs = events.filter((e) => e.kind === 'observation' && e.tool === 'editor');
            const cps = events.filter((e) => e.kind === 'checkpoint');
            assert.equal(obs.length, 1);
            assert.equal(cps.length, 1, 'one checkpoint: the edit ran once into the rows');
            const [o] = obs;
            const [c] = cps;
            assert.ok(o?.kind === 'observation' && c?.kind === 'checkpoint');
            assert.ok(c.id < o.id && c.toolUseId === o.toolUseId && o.tree === c.tree);
            if (point === 'observation')
              assert.match(o.content, /interrupted before its output was recorded/);
            else assert.match(o.content, /Edited|replac/i);
            assert.ok(describedWorkspace(base.workspace.baseTree, events).ok);
            assert.match(readFileSync(join(other, 'repo', 'src', 'calc.js'), 'utf8'), /Math\.sign\(mean\)/);
          } finally {
            await second.close();
          }
        } finally {
          await sim.close();
          repo.cleanup();
          rmSync(other, { recursive: true, force: true });
        }
      });
    }
  },
);
