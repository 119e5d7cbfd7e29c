import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { describedWorkspace } from '../../src/agent/resume-check.js';
import { FileEventStore } from '../../src/events/file-event-store.js';
import type { AgentEvent } from '../../src/events/schema.js';
import { reply, startModelSimulator, type MessagesRequest } from '../../src/model-sim/index.js';
import { cliEnv, lastJson, ROOT, runCli, type CliResult } from '../support/cli.js';
import { TS_HOOKS } from '../support/entry.js';
import { FIXTURES, gitOutput, makeFixtureRepo } from '../support/fixture-repo.js';

/**
 * Must show 6 of issue 35: a CLI run SIGKILLed at each point of an editing step, then resumed,
 * ends with the change its log describes. The kill lands at a named event boundary of the first
 * edit (test/support/kill-at-event.ts), never after a guessed delay. The model makes one fix (a
 * str_replace) and finishes, in every run, so each resumed run must end `resolved` with exactly that
 * fix in the checkout, and its log must hold the edit's observation once, after the checkpoint that
 * holds its change. (Two model turns, not the oracle's seven: each case is two CLI processes.)
 */

const KEY = 'sk-ant-crash-steps';
const CLI = join(ROOT, 'src', 'cli', 'main.ts');
const HOOK = join(ROOT, 'test', 'support', 'kill-at-event.ts');

const BUG = 'return Math.floor(mean * 100) / 100;';
const FIX = 'return (Math.sign(mean) * Math.round(Math.abs(mean) * 100)) / 100;';

/** Stateless, so the resumed run gets what the first would have: the edit, then finish. */
function policy(req: MessagesRequest): ReturnType<typeof reply> {
  const turns = req.messages.filter((m) => m.role === 'assistant').length;
  return turns === 0
    ? reply().tool('editor', { command: 'str_replace', path: 'src/calc.js', old_str: BUG, new_str: FIX })
    : reply().tool('finish', { summary: 'average rounds to the nearest hundredth.' });
}

/** The CLI, with the kill hook loaded, killed at `point`. */
function runKilledAt(point: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  const child = spawn(process.execPath, ['--import', TS_HOOKS, '--import', HOOK, CLI, ...args], {
    cwd: ROOT,
    env: { ...env, KILL_AT_EVENT: point },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => {
    child.once('close', (code, signal) => {
      resolve({ code, signal, stdout, stderr });
    });
  });
}

const isEditAction = (e: AgentEvent): e is Extract<AgentEvent, { kind: 'action' }> =>
  e.kind === 'action' &&
  e.tool === 'editor' &&
  typeof e.input === 'object' &&
  e.input !== null &&
  'command' in e.input &&
  e.input.command === 'str_replace';

/** The log killed at each point, as it must be before the resume (the edit = the first str_replace). */
const POINTS = {
  // The model asked for the edit; the edit has not run.
  'after:action': (tail: readonly AgentEvent[]) => {
    assert.deepEqual(
      tail.map((e) => e.kind),
      ['action'],
      'the log ends with the edit action',
    );
  },
  // The edit has run (the file is changed in the run's workspace); nothing of it is recorded.
  'before:checkpoint': (tail: readonly AgentEvent[]) => {
    assert.deepEqual(
      tail.map((e) => e.kind),
      ['action'],
      'the log ends with the edit action',
    );
  },
  // Between the two records of the step: the checkpoint holding the change, no observation yet.
  'after:checkpoint': (tail: readonly AgentEvent[]) => {
    assert.deepEqual(
      tail.map((e) => e.kind),
      ['action', 'checkpoint'],
    );
    const [action, checkpoint] = tail;
    assert.ok(action?.kind === 'action' && checkpoint?.kind === 'checkpoint');
    assert.equal(checkpoint.toolUseId, action.toolUseId);
  },
  // The step is fully recorded: the observation states the checkpoint's tree.
  'after:observation': (tail: readonly AgentEvent[]) => {
    assert.deepEqual(
      tail.map((e) => e.kind),
      ['action', 'checkpoint', 'observation'],
    );
    const [, checkpoint, observation] = tail;
    assert.ok(checkpoint?.kind === 'checkpoint' && observation?.kind === 'observation');
    assert.equal(observation.tree, checkpoint.tree);
  },
} as const;

describe('crash-consistent editing steps: SIGKILL at every point of an edit, then resume', () => {
  for (const [point, expectKilledLog] of Object.entries(POINTS)) {
    // Two CLI processes each; a loaded 2-core machine took up to 3.5 minutes for one.
    it(
      `killed ${point.replace(':', ' the ')}: the resumed run is resolved with exactly the fix`,
      { timeout: 400_000 },
      async () => {
        const repo = makeFixtureRepo('node-calc');
        const sim = await startModelSimulator({ policy, apiKey: KEY });
        const out = mkdtempSync(join(tmpdir(), 'ia-crash-step-'));
        const traj = join(out, 'run');
        const env = cliEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: sim.url });
        try {
          const killed = await runKilledAt(
            point,
            ['resolve', repo.dir, '--task', 'Fix average rounding', '--out', traj, '--json'],
            env,
          );
          assert.equal(killed.signal, 'SIGKILL', killed.stderr);
          const before = FileEventStore.open(traj);
          const edit = before.events.find(isEditAction);
          assert.ok(edit !== undefined, 'the run reached the edit');
          expectKilledLog(before.events.slice(before.events.indexOf(edit)));
          // Whatever the point, the log is one a resume can trust.
          assert.ok(describedWorkspace(before.base.workspace.baseTree, before.events).ok);

          const resumed = await runCli(['resume', traj, '--json'], env);
          assert.equal(resumed.code, 0, resumed.stderr);
          const summary = lastJson(resumed.stdout);
          assert.equal(summary.outcome, 'resolved', JSON.stringify(summary));

          // The log: one observation of the edit, after the checkpoint naming it, which holds its
          // tree; the edit ran again only when no checkpoint of it was recorded.
          const events = FileEventStore.open(traj).events;
          const observations = events.filter(
            (e) => e.kind === 'observation' && e.toolUseId === edit.toolUseId,
          );
          assert.equal(observations.length, 1);
          const observed = observations[0];
          const own = events.find((e) => e.kind === 'checkpoint' && e.toolUseId === edit.toolUseId);
          assert.ok(observed?.kind === 'observation' && own?.kind === 'checkpoint');
          assert.ok(own.id < observed.id, 'the checkpoint is recorded before the observation');
          assert.equal(observed.tree, own.tree);
          assert.equal(observed.isError, false, observed.content);
          const actions = events.filter((e) => e.kind === 'action' && e.toolUseId === edit.toolUseId).length;
          assert.equal(actions, point === 'after:action' || point === 'before:checkpoint' ? 2 : 1);
          if (point === 'after:checkpoint')
            assert.match(observed.content, /interrupted before its output was recorded/);
          assert.ok(describedWorkspace(before.base.workspace.baseTree, events).ok);

          // The change applied to the checkout is exactly the edit, once.
          assert.match(String(summary.change), /^applied to /);
          assert.equal(gitOutput(repo.dir, 'status', '--porcelain'), ' M src/calc.js\n');
          const original = readFileSync(join(FIXTURES, 'node-calc', 'src', 'calc.js'), 'utf8');
          assert.equal(readFileSync(join(repo.dir, 'src', 'calc.js'), 'utf8'), original.replace(BUG, FIX));
        } finally {
          await sim.close();
          repo.cleanup();
          rmSync(out, { recursive: true, force: true });
        }
      },
    );
  }
});
