import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { oracle, startModelSimulator } from '../../src/model-sim/index.js';
import { cliEnv, lastJson, runCli } from '../support/cli.js';
import { gitOutput, makeFixtureRepo } from '../support/fixture-repo.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';
import { LABEL_JOB } from '../../src/sandbox/docker/owner.js';

const KEY = 'sk-ant-docker';

// One fixture with each tool set (issue 36): Anthropic's text editor and bash tools (the default for
// Claude 4 models, with thinking), and the harness's own schema tools.
for (const [name, tools] of [
  ['node-calc', 'native'],
  ['python-inventory', 'schema'],
] as const) {
  dockerTest(
    `issue-agent resolve --sandbox docker reaches resolved: ${name}, ${tools} tools`,
    async (docker) => {
      const repo = makeFixtureRepo(name);
      const sim = await startModelSimulator({ policy: oracle(repo.patch), apiKey: KEY });
      const out = mkdtempSync(join(tmpdir(), 'ia-docker-traj-'));
      try {
        const traj = join(out, 'run');
        const r = await runCli(
          [
            'resolve',
            repo.dir,
            '--sandbox',
            'docker',
            '--task',
            'Fix the failing test',
            '--out',
            traj,
            '--json',
          ],
          cliEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: sim.url, ISSUE_AGENT_TOOLS: tools }),
        );
        assert.equal(r.code, 0, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
        assert.equal(lastJson(r.stdout).outcome, 'resolved');
        const store = FileEventStore.open(traj);
        assert.equal(store.base.sandbox, 'docker');
        assert.equal(store.base.modelSetup?.tools, tools);
        const edits = store.events.filter((e) => e.kind === 'action' && e.tool === 'editor');
        assert.ok(edits.length > 0);
        for (const e of edits)
          assert.equal(
            e.kind === 'action' ? e.calledAs : null,
            tools === 'native' ? 'str_replace_based_edit_tool' : undefined,
          );
        const state = reduceState(store.events);
        assert.notEqual(state.baseline?.exitCode, 0);
        assert.equal(state.finalTest?.exitCode, 0);
        // What the container wrote is in the host's working tree, and the container is gone.
        assert.match(gitOutput(repo.dir, 'status', '--porcelain'), /\?\? /);
        // This run's containers only: other tests' CLIs may be running theirs.
        const left = await docker.listContainers({
          all: true,
          filters: { label: [`${LABEL_JOB}=cli-${store.base.conversationId}`] },
        });
        assert.deepEqual(left, []);
      } finally {
        await sim.close();
        repo.cleanup();
        rmSync(out, { recursive: true, force: true });
      }
    },
    { timeout: 180_000 },
  );
}
