import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { startMcpServers } from '../../src/agent/mcp/servers.js';
import { mergeMcp } from '../../src/config/mcp-config.js';
import { parseRepoConfig, RepoConfigError } from '../../src/config/repo-config.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { tallied } from '../support/attack-log.js';

/**
 * A repository's remote MCP server pointed at the worker's own network, in every spelling of a
 * loopback or reserved address a URL allows: IPv4 shorthands (hex, octal, integer), IPv6 forms of an
 * IPv4 address (mapped, compatible, NAT64), unspecified and link-local addresses, cloud metadata
 * addresses, and names that resolve to the host itself. Each is refused before anything is sent:
 * by the repository config's own checks, or by the egress address policy (never by a failed
 * connection, which would mean the policy let it through). The deployment has opened loopback for its
 * own servers (`allowCidrs`), which a repository's server never gets.
 */
const FORMS: readonly (readonly [string, string])[] = [
  ['loopback', 'http://127.0.0.1/mcp'],
  ['loopback, shorthand', 'http://127.1/mcp'],
  ['loopback, one hex number', 'http://0x7f000001/mcp'],
  ['loopback, hex octets', 'http://0x7f.0x0.0x0.0x1/mcp'],
  ['loopback, one decimal number', 'http://2130706433/mcp'],
  ['loopback, octal octets', 'http://0177.0.0.1/mcp'],
  ['loopback, one octal number', 'http://017700000001/mcp'],
  ['loopback over https', 'https://127.0.0.1/mcp'],
  ['the unspecified address, as 0', 'http://0/mcp'],
  ['the unspecified address', 'http://0.0.0.0/mcp'],
  ['IPv6 loopback', 'http://[::1]/mcp'],
  ['IPv6 unspecified', 'http://[::]/mcp'],
  ['IPv4-mapped loopback', 'http://[::ffff:127.0.0.1]/mcp'],
  ['IPv4-mapped loopback, in hex', 'http://[::ffff:7f00:1]/mcp'],
  ['IPv4-compatible loopback', 'http://[::127.0.0.1]/mcp'],
  ['NAT64 of loopback', 'http://[64:ff9b::7f00:1]/mcp'],
  ['NAT64 of the metadata address', 'http://[64:ff9b::a9fe:a9fe]/mcp'],
  ['local-use NAT64 of a private address', 'http://[64:ff9b:1::a00:1]/mcp'],
  ['the metadata address', 'http://169.254.169.254/latest/meta-data/'],
  ['IPv6 link-local', 'http://[fe80::1]/mcp'],
  ['a private address', 'http://10.0.0.1/mcp'],
  ['a shared (CGNAT) address, a metadata service on some clouds', 'http://100.100.100.200/mcp'],
  ['a unique-local IPv6 metadata address', 'http://[fd00:ec2::254]/mcp'],
  ['localhost', 'http://localhost/mcp'],
  ['localhost, upper case with a trailing dot', 'http://LOCALHOST./mcp'],
  ["the host's own name", `http://${hostname()}/mcp`],
];

const LOOPBACK = ['127.0.0.0/8'];

test('attack battery: remote MCP URLs at loopback or reserved addresses, in every spelling', async (t) => {
  const workspace = mkdtempSync(join(tmpdir(), 'ia-mcp-ssrf-'));
  const sandbox = await LocalSandbox.create({ workspace, path: '/usr/bin:/bin' });
  t.after(async () => {
    await sandbox.close();
    rmSync(workspace, { recursive: true, force: true });
  });
  for (const [name, url] of FORMS) {
    await t.test(`attack: a repository's remote MCP server at ${name} (${url})`, () =>
      tallied(`mcp ssrf: ${name}`, async () => {
        let config;
        try {
          config = parseRepoConfig(
            { mcp: { mcpServers: { probe: { url } } } },
            { label: 'agent', handle: '@agent' },
          );
        } catch (error) {
          // Refused by the repository config's own checks: held.
          if (error instanceof RepoConfigError) return;
          throw error;
        }
        const log: { readonly status?: number; readonly reason?: string }[] = [];
        const logger = pino(
          { level: 'debug' },
          { write: (line: string) => log.push(JSON.parse(line) as never) },
        );
        const mcp = await startMcpServers(sandbox, mergeMcp(null, config.mcp), {
          startTimeoutMs: 10_000,
          allowCidrs: LOOPBACK,
          trusted: new Set(['docs']),
          logger,
        });
        await mcp.close();
        assert.deepEqual(mcp.tools, []);
        assert.match(mcp.warnings.join('\n'), /"probe" is not available/);
        // The proxy's own record: refused by the address policy (403), never tried (a 502).
        const asked = log.filter((l) => l.status !== undefined);
        assert.ok(asked.length > 0, 'the egress proxy was asked');
        for (const l of asked) {
          assert.equal(l.status, 403, `the egress proxy let it through: ${JSON.stringify(l)}`);
          assert.match(l.reason ?? '', /refused \(/);
        }
      }),
    );
  }
});
