import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { newBaseState } from '../../src/agent/new-run.js';
import { startMcpServers } from '../../src/agent/mcp/servers.js';
import { runAgent } from '../../src/agent/run-agent.js';
import { defaultTools } from '../../src/agent/tools/index.js';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { mcpConfig, mergeMcp } from '../../src/config/mcp-config.js';
import { FileEventStore } from '../../src/events/file-event-store.js';
import type { EventOf } from '../../src/events/schema.js';
import { AnthropicModel } from '../../src/model/anthropic-model.js';
import { DEFAULT_PRICES } from '../../src/model/pricing.js';
import { IMAGES } from '../../src/sandbox/docker/choose-image.js';
import { DockerSandbox } from '../../src/sandbox/docker/docker-sandbox.js';
import { reply, scripted, startModelSimulator } from '../../src/model-sim/index.js';
import type { MessagesRequest } from '../../src/model-sim/types.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

const KEY = 'sk-ant-mcp-test';

dockerTest(
  'MCP: a stdio server from the repository config runs inside the Docker sandbox; its allowed tools reach the model, a held-back one is refused, a broken server is a warning',
  async (docker, t) => {
    const root = mkdtempSync(join(tmpdir(), 'ia-mcp-'));
    t.after(() => {
      rmSync(root, { recursive: true, force: true });
    });
    const workspace = join(root, 'repo');
    mkdirSync(join(workspace, 'tools'), { recursive: true });
    copyFileSync(resolve('test/fixtures/mcp/server.js'), join(workspace, 'tools', 'mcp-server.cjs'));
    writeFileSync(join(workspace, 'README.md'), '# mcp\n');
    execFileSync('git', ['init', '-q'], { cwd: workspace });
    execFileSync('git', ['add', '-A'], { cwd: workspace });
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@e', 'commit', '-qm', 'init'], {
      cwd: workspace,
    });
    // As `.github/issue-agent.yml` would give it, and a deployment server that cannot start.
    const repository = mcpConfig.parse({
      mcpServers: {
        fixture: {
          command: 'node',
          args: ['tools/mcp-server.cjs'],
          env: { FIXTURE_VAR: 'set' },
          tools: ['where', 'echo'],
        },
        remote: { url: 'https://mcp.example.invalid/' },
      },
    });
    const deployment = mcpConfig.parse({
      mcpServers: { broken: { command: 'node', args: ['-e', 'process.exit(3)'] } },
    });
    const sandbox = await DockerSandbox.create({ docker, workspace, jobId: 'mcp-test', image: IMAGES.node });
    const sim = await startModelSimulator({
      apiKey: KEY,
      policy: scripted([
        reply().tool('mcp__fixture__where', {}),
        reply().tool('mcp__fixture__echo', { text: 'hello' }),
        reply().tool('mcp__fixture__hidden', {}),
        reply().tool('finish', { summary: 'used the tools' }),
      ]),
    });
    try {
      const mcp = await startMcpServers(sandbox, mergeMcp(deployment, repository), {
        startTimeoutMs: 15_000,
      });
      assert.deepEqual(
        mcp.tools.map((x) => x.name),
        ['mcp__fixture__where', 'mcp__fixture__echo'],
      );
      assert.deepEqual(mcp.servers, [{ name: 'fixture', tools: ['where', 'echo'], held: ['hidden'] }]);
      assert.equal(mcp.warnings.length, 2);
      assert.match(mcp.warnings.join('\n'), /"broken" is not available: .*(closed|exited|Connection)/i);
      assert.match(
        mcp.warnings.join('\n'),
        /"remote" is not available: the egress policy refused mcp\.example\.invalid:443/,
      );

      const model = new AnthropicModel({
        apiKey: KEY,
        model: 'claude-sonnet-4-6',
        baseURL: sim.url,
        maxAttempts: 2,
      });
      const base = await newBaseState({
        task: { title: 'Use the tools', body: 'Call them.', instructions: [], source: 'test' },
        sandbox,
        model: model.name,
        limits: DEFAULT_LIMITS,
      });
      const store = FileEventStore.create(join(root, 'run'), base);
      await runAgent({
        store,
        sandbox,
        model,
        prices: DEFAULT_PRICES,
        tools: new Map([...defaultTools(), ...mcp.tools.map((x) => [x.name, x] as const)]),
        notices: mcp.warnings.map((message) => ({ code: 'mcp_unavailable', message })),
      }).finally(() => mcp.close());

      const first = sim.requests[0]?.body as MessagesRequest;
      const spec = (
        first.tools as unknown as readonly { name: string; input_schema?: { required?: string[] } }[]
      ).find((x) => x.name === 'mcp__fixture__echo');
      assert.deepEqual(spec?.input_schema?.required, ['text'], "the server's schema is what the model gets");
      assert.match(
        JSON.stringify(first.messages),
        /\[harness\] The MCP server \\"broken\\" is not available/,
      );
      const observations = store.events.filter((e): e is EventOf<'observation'> => e.kind === 'observation');
      const where = observations.find((o) => o.tool === 'mcp__fixture__where');
      assert.ok(where);
      assert.match(where.content, /^uid=1000 host=\S+ cwd=\/workspace FIXTURE=set$/);
      assert.doesNotMatch(where.content, new RegExp(`host=${hostname()} `), 'not the host');
      assert.equal(observations.find((o) => o.tool === 'mcp__fixture__echo')?.content, 'echo: hello');
      const hidden = observations.find((o) => o.tool === 'mcp__fixture__hidden');
      assert.ok(hidden?.isError);
      assert.match(hidden.content, /Unknown tool "mcp__fixture__hidden"/);
      assert.equal(
        store.events.filter((e) => e.kind === 'warning' && e.code === 'mcp_unavailable').length,
        2,
      );
    } finally {
      await sandbox.close();
      await sim.close();
    }
  },
  { timeout: 120_000 },
);

dockerTest(
  'attack: a hostile MCP server (asks to sample the model and for roots, tools named as paths or too long, a 50 KB description, a 6 MB answer) gets nothing and holds nothing',
  async (docker, t) => {
    const root = mkdtempSync(join(tmpdir(), 'ia-mcp-hostile-'));
    t.after(() => {
      rmSync(root, { recursive: true, force: true });
    });
    const workspace = join(root, 'repo');
    mkdirSync(workspace, { recursive: true });
    copyFileSync(resolve('test/fixtures/mcp/hostile.js'), join(workspace, 'hostile.cjs'));
    execFileSync('git', ['init', '-q'], { cwd: workspace });
    const sandbox = await DockerSandbox.create({
      docker,
      workspace,
      jobId: 'mcp-hostile',
      image: IMAGES.node,
    });
    try {
      const mcp = await startMcpServers(
        sandbox,
        mcpConfig.parse({ mcpServers: { hostile: { command: 'node', args: ['hostile.cjs'] } } }),
        { startTimeoutMs: 15_000, callTimeoutMs: 3000 },
      );
      assert.deepEqual(mcp.warnings, []);
      assert.deepEqual(
        mcp.tools.map((x) => x.name),
        ['mcp__hostile__flood', 'mcp__hostile__big'],
      );
      assert.deepEqual(mcp.servers[0]?.held, ['../../etc/passwd', 'x'.repeat(100)]);
      const big = mcp.tools.find((x) => x.name === 'mcp__hostile__big');
      assert.ok(big);
      assert.ok(big.description.length <= 1200, `description capped: ${big.description.length}`);
      assert.match(big.description, /^Tool "big" of the MCP server "hostile" \(it runs in the sandbox\)/);
      const flood = mcp.tools.find((x) => x.name === 'mcp__hostile__flood');
      assert.ok(flood);
      const before = process.memoryUsage().rss;
      const r = await flood.run(
        {},
        {
          sandbox,
          files: undefined as never,
          limits: DEFAULT_LIMITS,
          signal: undefined,
          testCommand: null,
          editHistory: new Map(),
          syntax: new Map(),
        },
      );
      assert.equal(r.isError, true);
      assert.match(r.content, /failed: it sent a message longer than 4194304 bytes, so it was stopped/);
      // The reader holds at most the cap and stops the server there: about 20 MB of growth here, where
      // the SDK's concatenating buffer grew 34 MB (and past 64 MB once in CI).
      assert.ok(process.memoryUsage().rss - before < 64 * 1024 * 1024, 'the flood is not kept');
      await mcp.close();
    } finally {
      await sandbox.close();
    }
  },
  { timeout: 120_000, attack: true },
);
