import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { FileEventStore } from '../../src/events/file-event-store.js';
import type { EventOf } from '../../src/events/schema.js';
import { cliEnv, runCli } from '../support/cli.js';
import { commitFiles, makeFixtureRepo } from '../support/fixture-repo.js';
import { reply, scripted, startModelSimulator } from '../../src/model-sim/index.js';

const KEY = 'sk-ant-cli-mcp-0123456789';

test("CLI: the checkout's stdio MCP server runs inside the isolated local sandbox (its user, its copy of the workspace), not on the host", async (t) => {
  const repo = makeFixtureRepo('node-calc');
  const out = mkdtempSync(join(tmpdir(), 'ia-cli-mcp-'));
  const sim = await startModelSimulator({
    apiKey: KEY,
    policy: scripted([
      reply().tool('mcp__fixture__where', {}),
      reply().tool('mcp__fixture__hidden', {}),
      reply().tool('finish', { summary: 'asked the server where it runs' }),
    ]),
  });
  t.after(async () => {
    await sim.close();
    repo.cleanup();
    rmSync(out, { recursive: true, force: true });
  });
  mkdirSync(join(repo.dir, 'tools'), { recursive: true });
  copyFileSync(resolve('test/fixtures/mcp/server.js'), join(repo.dir, 'tools', 'mcp-server.cjs'));
  commitFiles(repo.dir, {
    '.github/issue-agent.yml': [
      'mcp:',
      '  mcpServers:',
      '    fixture:',
      '      command: node',
      '      args: [tools/mcp-server.cjs]',
      '      env: { FIXTURE_VAR: from-config }',
      '      tools: [where]',
      '    crashes:',
      '      command: node',
      "      args: ['-e', 'process.exit(4)']",
      '',
    ].join('\n'),
  });
  const traj = join(out, 'run');
  const r = await runCli(
    ['resolve', repo.dir, '--task', 'Ask the server', '--out', traj, '--json', '--setup', 'off'],
    cliEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: sim.url }),
  );
  assert.ok(r.code !== null, r.stderr);
  assert.match(r.stdout + r.stderr, /mcp_unavailable: The MCP server "crashes" is not available/);
  const events = FileEventStore.open(traj).events;
  const observations = events.filter((e): e is EventOf<'observation'> => e.kind === 'observation');
  const where = observations.find((o) => o.tool === 'mcp__fixture__where');
  assert.ok(where, JSON.stringify(observations));
  const m = /^uid=(\d+) host=\S+ cwd=(\S+) FIXTURE=from-config$/.exec(where.content);
  assert.ok(m, where.content);
  assert.notEqual(Number(m[1]), process.getuid?.(), "not the host user's uid");
  assert.notEqual(m[2], repo.dir, "the sandbox's copy of the checkout, not the checkout");
  const hidden = observations.find((o) => o.tool === 'mcp__fixture__hidden');
  assert.ok(hidden?.isError);
  assert.ok(events.some((e) => e.kind === 'warning' && e.code === 'mcp_unavailable'));
});
