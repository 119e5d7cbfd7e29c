import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { reply, scripted, startModelSimulator } from '../../src/model-sim/index.js';
import type { MessagesRequest } from '../../src/model-sim/types.js';
import { cliEnv, runCli } from '../support/cli.js';
import { gitOutput, makeFixtureRepo } from '../support/fixture-repo.js';

const KEY = 'sk-ant-test-key';

test("CLI: the checkout's AGENTS.md files (not links, not node_modules) reach the model and the base state", async (t) => {
  const repo = makeFixtureRepo('node-calc');
  const out = mkdtempSync(join(tmpdir(), 'ia-cli-instr-'));
  const sim = await startModelSimulator({
    apiKey: KEY,
    policy: scripted([reply().tool('finish', { summary: 'read the instructions' })]),
  });
  t.after(async () => {
    await sim.close();
    repo.cleanup();
    rmSync(out, { recursive: true, force: true });
  });
  writeFileSync(join(repo.dir, 'AGENTS.md'), 'CLI-ROOT: prefer small changes.\n');
  writeFileSync(join(repo.dir, 'src', 'AGENTS.md'), 'CLI-SRC\n');
  mkdirSync(join(repo.dir, 'node_modules', 'dep'), { recursive: true });
  writeFileSync(join(repo.dir, 'node_modules', 'dep', 'AGENTS.md'), 'DEPENDENCY\n');
  symlinkSync('/etc/passwd', join(repo.dir, 'CLAUDE.md'));
  gitOutput(repo.dir, 'add', '-A');
  gitOutput(repo.dir, '-c', 'user.name=t', '-c', 'user.email=t@e', 'commit', '-qm', 'instructions');
  const traj = join(out, 'run');
  const r = await runCli(
    ['resolve', repo.dir, '--task', 'Look around', '--out', traj, '--json', '--sandbox', 'unconfined'],
    cliEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: sim.url }),
  );
  assert.ok(r.code !== null, r.stderr);
  const base = FileEventStore.open(traj).base;
  assert.deepEqual(
    base.instructions?.files.map((f) => f.path),
    ['AGENTS.md', 'src/AGENTS.md'],
  );
  const first = JSON.stringify((sim.requests[0]?.body as MessagesRequest).messages);
  assert.match(first, /CLI-ROOT: prefer small changes/);
  assert.doesNotMatch(first, /CLI-SRC|DEPENDENCY|root:x:0/);
});
