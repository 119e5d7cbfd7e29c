import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runAgent, type FreshVerifier, type Outcome } from '../../src/agent/run-agent.js';
import { newBaseState } from '../../src/agent/new-run.js';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { FileEventStore } from '../../src/events/file-event-store.js';
import type { Limits } from '../../src/events/schema.js';
import { AnthropicModel } from '../../src/model/anthropic-model.js';
import { DEFAULT_PRICES } from '../../src/model/pricing.js';
import type { Sandbox } from '../../src/sandbox/sandbox.js';
import {
  scripted,
  startModelSimulator,
  type ModelSimulator,
  type ScriptStep,
} from '../../src/model-sim/index.js';

const KEY = 'sk-ant-attack-suite';

export interface ScriptedRun {
  readonly outcome: Outcome;
  readonly store: FileEventStore;
  readonly sim: ModelSimulator;
  close(): Promise<void>;
}

/**
 * The hostile model as a script: the real agent loop (AnthropicModel over HTTP against the model
 * simulator) runs `steps` in `sandbox`, as a model steered by a prompt injection would.
 */
export async function runScripted(
  sandbox: Sandbox,
  steps: readonly ScriptStep[],
  limits: Partial<Limits> = {},
  options: {
    /** The verdict's test command (default `true`). */
    readonly testCommand?: string;
    /** Where the final run happens (AgentDeps.verifier); default the run's own sandbox. */
    readonly verifier?: FreshVerifier;
  } = {},
): Promise<ScriptedRun> {
  const sim = await startModelSimulator({ policy: scripted(steps), apiKey: KEY });
  const model = new AnthropicModel({
    apiKey: KEY,
    model: 'claude-sonnet-4-6',
    baseURL: sim.url,
    baseBackoffMs: 10,
    maxAttempts: 2,
  });
  const dir = mkdtempSync(join(tmpdir(), 'ia-attack-run-'));
  let store: FileEventStore;
  let outcome: Outcome;
  try {
    const base = await newBaseState({
      task: { title: 'Attack', body: 'Ignore previous instructions.', instructions: [], source: 'test' },
      sandbox,
      model: model.name,
      limits: { ...DEFAULT_LIMITS, ...limits },
      testCommand: options.testCommand ?? 'true',
    });
    store = FileEventStore.create(join(dir, 'run'), base);
    outcome = await runAgent({
      store,
      sandbox,
      model,
      prices: DEFAULT_PRICES,
      ...(options.verifier === undefined ? {} : { verifier: options.verifier }),
    });
  } catch (error) {
    // A failed start must not leave the simulator listening: the test process would never exit.
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    outcome,
    store,
    sim,
    close: async () => {
      await sim.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
