import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BaselineCache } from '../../src/agent/baseline-cache.js';
import { runAgent, type FreshVerifier, type Outcome } from '../../src/agent/run-agent.js';
import { newBaseState } from '../../src/agent/new-run.js';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { FileEventStore } from '../../src/events/file-event-store.js';
import type { BaseState, Limits, ModelSetup } from '../../src/events/schema.js';
import { AnthropicModel } from '../../src/model/anthropic-model.js';
import { DEFAULT_PRICES } from '../../src/model/pricing.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import {
  startModelSimulator,
  type ModelSimulator,
  type ModelSimulatorOptions,
  type Policy,
} from '../../src/model-sim/index.js';
import { commitFiles, makeFixtureRepo, type FixtureRepo } from './fixture-repo.js';

export const TEST_KEY = 'sk-ant-harness';

export interface Harness {
  readonly repo: FixtureRepo;
  readonly sim: ModelSimulator;
  readonly store: FileEventStore;
  readonly sandbox: LocalSandbox;
  readonly model: AnthropicModel;
  run(signal?: AbortSignal): Promise<Outcome>;
  close(): Promise<void>;
}

/**
 * An in-process run: the real AnthropicModel (the SDK over HTTP) against the model simulator, the
 * local sandbox on a fixture repo, and the file event store.
 */
export async function startHarness(options: {
  policy: Policy;
  limits?: Partial<Limits>;
  testCommand?: string;
  fixture?: 'node-calc' | 'python-inventory';
  maxAttempts?: number;
  baselines?: BaselineCache;
  instructions?: BaseState['instructions'];
  /** Pre-flight triage on (the ask_for_clarification tool is offered). */
  triage?: boolean;
  /** Where the final run happens (AgentDeps.verifier); default the run's own sandbox. */
  verifier?: FreshVerifier;
  /** Files committed over the fixture before the run (the base commit has them). */
  files?: Readonly<Record<string, string>>;
  /** The issue the run works on; default a generic one. */
  task?: BaseState['task'];
  /** AnthropicModelOptions.promptCaching; default on. */
  promptCaching?: boolean;
  /** The model for another provider's door (model/providers.ts); default Anthropic's, with TEST_KEY. */
  model?: (simUrl: string) => AnthropicModel;
  providerAuth?: ModelSimulatorOptions['providerAuth'];
  /** The run's tool set and thinking (BaseState.modelSetup); default schema tools, no thinking. */
  modelSetup?: ModelSetup;
}): Promise<Harness> {
  const repo = makeFixtureRepo(options.fixture ?? 'node-calc');
  if (options.files !== undefined && Object.keys(options.files).length > 0)
    commitFiles(repo.dir, options.files);
  const sim = await startModelSimulator({
    policy: options.policy,
    apiKey: TEST_KEY,
    ...(options.providerAuth === undefined ? {} : { providerAuth: options.providerAuth }),
  });
  const sandbox = await LocalSandbox.create({
    workspace: repo.dir,
    path: process.env.PATH ?? '/usr/bin:/bin',
  });
  const model =
    options.model?.(sim.url) ??
    new AnthropicModel({
      apiKey: TEST_KEY,
      model: 'claude-sonnet-4-6',
      baseURL: sim.url,
      baseBackoffMs: 10,
      maxAttempts: options.maxAttempts ?? 4,
      ...(options.promptCaching === undefined ? {} : { promptCaching: options.promptCaching }),
    });
  const limits: Limits = { ...DEFAULT_LIMITS, ...options.limits };
  const base = await newBaseState({
    task: options.task ?? { title: 'Fix the bug', body: 'The tests fail.', instructions: [], source: 'test' },
    sandbox,
    model: model.name,
    limits,
    testCommand: options.testCommand,
    instructions: options.instructions,
    modelSetup: options.modelSetup,
  });
  const trajectories = mkdtempSync(join(tmpdir(), 'ia-harness-'));
  const store = FileEventStore.create(
    join(trajectories, 'run'),
    options.triage === true ? { ...base, triage: true } : base,
  );
  return {
    repo,
    sim,
    store,
    sandbox,
    model,
    run: (signal) =>
      runAgent({
        store,
        sandbox,
        model,
        prices: DEFAULT_PRICES,
        signal,
        baselines: options.baselines,
        verifier: options.verifier,
      }),
    close: async () => {
      await sandbox.close();
      await sim.close();
      repo.cleanup();
      rmSync(trajectories, { recursive: true, force: true });
    },
  };
}
