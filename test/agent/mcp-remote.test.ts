import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startMcpServers } from '../../src/agent/mcp/servers.js';
import { runAgent } from '../../src/agent/run-agent.js';
import { defaultTools } from '../../src/agent/tools/index.js';
import { ConfigError, readAgentEnv } from '../../src/config/agent-env.js';
import { expandDeploymentMcp, mcpConfig, mergeMcp } from '../../src/config/mcp-config.js';
import { parseRepoConfig, RepoConfigError, type RepoConfig } from '../../src/config/repo-config.js';
import type { EventOf } from '../../src/events/schema.js';
import { Redactor } from '../../src/publish/redact.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { tallied } from '../support/attack-log.js';
import { startMcpHttpServer } from '../support/mcp-http-server.js';
import { reply, scripted, type Policy } from '../../src/model-sim/index.js';
import type { MessagesRequest } from '../../src/model-sim/types.js';
import { startHarness } from '../support/agent-harness.js';

const TOKEN = 'mcp-deploy-token-5f2e9c7a1b';
const LOOPBACK = ['127.0.0.0/8'];
/** The deployment's server names: only they may use the deployment's private ranges. */
const DOCS = new Set(['docs']);

function deployment(url: string, tools?: string[]): ReturnType<typeof expandDeploymentMcp> {
  return expandDeploymentMcp(
    mcpConfig.parse({
      mcpServers: {
        docs: {
          url,
          headers: { Authorization: 'Bearer ${DOCS_MCP_TOKEN}' },
          ...(tools === undefined ? {} : { tools }),
        },
      },
    }),
    { DOCS_MCP_TOKEN: TOKEN },
  );
}

/** `.github/issue-agent.yml` as the App reads it: the config, or the problems it names. */
function repoConfig(raw: unknown): { ok: true; config: RepoConfig } | { ok: false; message: string } {
  try {
    return { ok: true, config: parseRepoConfig(raw, { label: 'agent', handle: '@agent' }) };
  } catch (error) {
    if (error instanceof RepoConfigError) return { ok: false, message: error.message };
    throw error;
  }
}

/** Every file under a folder, as text. */
function allText(dir: string): string {
  let out = '';
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    out += statSync(p).isDirectory() ? allText(p) : readFileSync(p, 'utf8');
  }
  return out;
}

test('a remote MCP server from the deployment: reached by the worker through the egress proxy with its secret header; tools and results in the trajectory; the secret in none of it', async (t) => {
  const server = await startMcpHttpServer({ token: TOKEN });
  t.after(() => server.close());
  const deploy = deployment(server.url, ['lookup', 'whoami']);
  assert.ok(deploy.secrets.includes(TOKEN));
  const h = await startHarness({
    policy: scripted([
      reply().tool('mcp__docs__lookup', { word: 'harness' }),
      reply().tool('mcp__docs__whoami', {}),
      reply().tool('mcp__docs__hidden', {}),
      reply().tool('bash', { command: 'env; cat ~/.netrc 2>/dev/null; true' }),
      reply().tool('finish', { summary: 'used the remote tools' }),
    ]) satisfies Policy,
  });
  t.after(() => h.close());
  const mcp = await startMcpServers(h.sandbox, mergeMcp(deploy.config, undefined), {
    allowCidrs: LOOPBACK,
    trusted: DOCS,
    startTimeoutMs: 10_000,
  });
  assert.deepEqual(mcp.warnings, []);
  assert.deepEqual(mcp.servers, [{ name: 'docs', tools: ['lookup', 'whoami'], held: ['hidden'] }]);
  const redactor = new Redactor([...deploy.secrets]);
  await runAgent({
    store: h.store,
    sandbox: h.sandbox,
    model: h.model,
    prices: (await import('../../src/model/pricing.js')).DEFAULT_PRICES,
    tools: new Map([...defaultTools(), ...mcp.tools.map((x) => [x.name, x] as const)]),
    notices: mcp.warnings.map((message) => ({ code: 'mcp_unavailable', message })),
    scrub: (text) => redactor.redact(text),
  }).finally(() => mcp.close());

  // The server got the deployment's header on every request; the sandbox's shell never saw it.
  assert.ok(server.requests.length >= 3);
  assert.ok(server.requests.every((r) => r.authorization === `Bearer ${TOKEN}`));
  const observations = h.store.events.filter((e): e is EventOf<'observation'> => e.kind === 'observation');
  assert.equal(
    observations.find((o) => o.tool === 'mcp__docs__lookup')?.content,
    'lookup: harness is a word',
  );
  const whoami = observations.find((o) => o.tool === 'mcp__docs__whoami');
  assert.match(whoami?.content ?? '', /^you sent: \[redacted\]$/, 'a server echoing its token');
  const hidden = observations.find((o) => o.tool === 'mcp__docs__hidden');
  assert.ok(hidden?.isError);
  assert.match(hidden.content, /Unknown tool "mcp__docs__hidden"/);
  const shell = observations.find((o) => o.tool === 'bash');
  assert.ok(shell !== undefined);
  assert.doesNotMatch(shell.content, /DOCS_MCP_TOKEN|5f2e9c7a1b/);
  const first = h.sim.requests[0]?.body as MessagesRequest;
  const lookup = (first.tools as unknown as readonly { name: string; description: string }[]).find(
    (x) => x.name === 'mcp__docs__lookup',
  );
  assert.match(lookup?.description ?? '', /remote server at 127\.0\.0\.1:\d+/);
  // Not in the event log, not in anything the model was sent.
  assert.doesNotMatch(allText(h.store.location), new RegExp(TOKEN));
  assert.doesNotMatch(JSON.stringify(h.sim.requests), new RegExp(TOKEN));
});

const SSRF =
  "attack: a repository's remote MCP server on the worker's own network (loopback, metadata) is refused by the egress policy; nothing reaches it";
test(SSRF, (t) =>
  tallied(SSRF, async () => {
    const server = await startMcpHttpServer({ token: TOKEN });
    t.after(() => server.close());
    const sandbox = await LocalSandbox.create({
      workspace: mkdtempSync(join(tmpdir(), 'ia-mcp-r-')),
      path: '/usr/bin:/bin',
    });
    t.after(() => sandbox.close());
    const repo = repoConfig({
      mcp: {
        mcpServers: {
          internal: { url: server.url },
          metadata: { url: 'http://169.254.169.254/latest/meta-data/' },
        },
      },
    });
    assert.ok(repo.ok, repo.ok ? '' : repo.message);
    // The deployment opened loopback (for its own servers, or a mirror): a repository's server still
    // may not use it.
    const mcp = await startMcpServers(sandbox, mergeMcp(null, repo.config.mcp), {
      startTimeoutMs: 10_000,
      allowCidrs: LOOPBACK,
      trusted: DOCS,
    });
    await mcp.close();
    assert.deepEqual(mcp.tools, []);
    assert.equal(mcp.warnings.length, 2);
    assert.match(mcp.warnings[0] ?? '', /"internal" is not available: .*port 443 or 80, not \d+/);
    assert.match(
      mcp.warnings[1] ?? '',
      /"metadata" is not available: .*egress policy refused 169\.254\.169\.254:80/,
    );
    // Nor on 80 at a loopback address: the address policy refuses it, and says nothing about why.
    const onLoopback = await startMcpServers(
      sandbox,
      mergeMcp(null, { mcpServers: { lo: { url: 'http://127.0.0.1/mcp', headers: {} } } }),
      { startTimeoutMs: 10_000, allowCidrs: LOOPBACK, trusted: DOCS },
    );
    await onLoopback.close();
    assert.match(
      onLoopback.warnings.join('\n'),
      /"lo" is not available: .*egress policy refused 127\.0\.0\.1:80/,
    );
    assert.doesNotMatch(onLoopback.warnings.join('\n'), /\(loopback\)|resolves to/);
    assert.equal(server.requests.length, 0);
  }),
);

const REDIRECT = 'attack: a remote MCP server that redirects elsewhere is not followed';
test(REDIRECT, (t) =>
  tallied(REDIRECT, async () => {
    const target = await startMcpHttpServer({ token: TOKEN });
    t.after(() => target.close());
    const redirector = await startMcpHttpServer({
      token: TOKEN,
      redirectTo: target.url.replace('127.0.0.1', 'localhost'),
    });
    t.after(() => redirector.close());
    const sandbox = await LocalSandbox.create({
      workspace: mkdtempSync(join(tmpdir(), 'ia-mcp-r-')),
      path: '/usr/bin:/bin',
    });
    t.after(() => sandbox.close());
    const mcp = await startMcpServers(sandbox, deployment(redirector.url).config, {
      allowCidrs: LOOPBACK,
      trusted: DOCS,
      startTimeoutMs: 10_000,
    });
    await mcp.close();
    assert.deepEqual(mcp.tools, []);
    assert.match(mcp.warnings.join('\n'), /"docs" is not available/);
    assert.doesNotMatch(mcp.warnings.join('\n'), new RegExp(TOKEN));
    assert.ok(redirector.requests.length >= 1);
    assert.equal(target.requests.length, 0, 'the redirect target got nothing');
  }),
);

test('a remote server over TLS: trusted through the deployment CA setting, refused without it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-mcp-tls-'));
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1'].concat([
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ]),
    { stdio: 'ignore' },
  );
  const cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
  const server = await startMcpHttpServer({
    token: TOKEN,
    tls: { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert },
  });
  t.after(() => server.close());
  const sandbox = await LocalSandbox.create({
    workspace: mkdtempSync(join(tmpdir(), 'ia-mcp-r-')),
    path: '/usr/bin:/bin',
  });
  t.after(() => sandbox.close());
  const untrusted = await startMcpServers(sandbox, deployment(server.url).config, {
    allowCidrs: LOOPBACK,
    trusted: DOCS,
    startTimeoutMs: 10_000,
  });
  await untrusted.close();
  assert.match(untrusted.warnings.join('\n'), /"docs" is not available: .*(self-signed|certificate)/i);
  const trusted = await startMcpServers(sandbox, deployment(server.url).config, {
    allowCidrs: LOOPBACK,
    trusted: DOCS,
    extraCaPem: cert,
    startTimeoutMs: 10_000,
  });
  const lookup = trusted.tools.find((x) => x.name === 'mcp__docs__lookup');
  await trusted.close();
  assert.deepEqual(trusted.warnings, []);
  assert.ok(lookup);
});

test('secrets in MCP headers: only the deployment may name variables; an unset one is a clear error', () => {
  const docs = (server: Record<string, unknown>): unknown => ({ mcp: { mcpServers: { docs: server } } });
  const repo = repoConfig(
    docs({
      url: 'https://mcp.example.org/',
      headers: { Authorization: 'Bearer ${ISSUE_AGENT_APP_PRIVATE_KEY}' },
    }),
  );
  assert.ok(!repo.ok);
  assert.match(repo.message, /cannot name deployment variables/);
  assert.ok(repoConfig(docs({ url: 'https://mcp.example.org/', headers: { 'X-Team': 'docs' } })).ok);
  assert.equal(repoConfig(docs({ url: 'file:///etc/passwd' })).ok, false);
  assert.match(
    JSON.stringify(repoConfig(docs({ url: 'https://u:p@mcp.example.org/' }))),
    /no credentials in the URL/,
  );

  const env = {
    ANTHROPIC_API_KEY: 'k',
    ISSUE_AGENT_MCP_CONFIG: JSON.stringify({
      mcpServers: {
        docs: { url: 'https://mcp.example.org/', headers: { Authorization: 'Bearer ${DOCS_TOKEN}' } },
      },
    }),
  };
  assert.throws(
    () => readAgentEnv(env),
    (e: unknown) =>
      e instanceof ConfigError && /DOCS_TOKEN \(in docs's Authorization header\)/.test(e.message),
  );
  const settings = readAgentEnv({ ...env, DOCS_TOKEN: 'tok-123456' });
  const deploymentMcp = settings.mcp;
  assert.ok(deploymentMcp !== null);
  assert.deepEqual(deploymentMcp.secrets, ['tok-123456', 'Bearer tok-123456']);
  const server = deploymentMcp.config.mcpServers.docs;
  assert.ok(server !== undefined && 'url' in server);
  assert.equal(server.headers.Authorization, 'Bearer tok-123456');
});

const ENDLESS = 'attack: a remote MCP server that never stops sending is cut off, not buffered';
test(ENDLESS, (t) =>
  tallied(ENDLESS, async () => {
    const { createServer } = await import('node:http');
    const { startHostEgress } = await import('../../src/sandbox/egress/host-egress.js');
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = Buffer.alloc(64 * 1024, 'a');
      const pump = (): void => {
        while (res.write(chunk)) if (res.destroyed) return;
        res.once('drain', pump);
      };
      pump();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.after(() => {
      server.closeAllConnections();
      server.close();
    });
    const { port } = server.address() as import('node:net').AddressInfo;
    const egress = await startHostEgress({
      allowHosts: ['127.0.0.1'],
      allowedPorts: [port],
      allowCidrs: LOOPBACK,
      maxResponseBytes: 1024 * 1024,
    });
    t.after(() => egress.close());
    const res = await egress.fetch(`http://127.0.0.1:${port}/mcp`);
    assert.equal(res.status, 200);
    await assert.rejects(res.text(), /passed 1048576 bytes/);
  }),
);
