import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FileEventStore } from '../../src/events/file-event-store.js';
import {
  oracle,
  reply,
  scripted,
  startModelSimulator,
  type ModelSimulator,
} from '../../src/model-sim/index.js';
import { isolationSupport } from '../../src/sandbox/local/launch.js';
import { secretForms } from '../../src/secrets/forms.js';
import { cliEnv, lastJson, runCli } from '../support/cli.js';
import { registryDeploymentEnv } from '../support/egress-env.js';
import { commitFiles, gitOutput, makeFixtureRepo, type FixtureRepo } from '../support/fixture-repo.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

const KEY = 'sk-ant-cli-setup-0123456789abcdef';

function commitConfig(repo: FixtureRepo, config: string): void {
  commitFiles(repo.dir, { '.github/issue-agent.yml': config });
}

/**
 * The CLI's setup phase: `issue-agent resolve` on a checkout whose tests need jest from the npm
 * registry, in a Docker sandbox (with the environment cache in a folder of the test's) and in the
 * isolated local sandbox (the host's Node and npm, inside namespaces); setup from
 * `.github/issue-agent.yml`, a failing setup, an invalid config, and `--setup off`.
 */
dockerTest(
  'CLI --setup: npm ci through the proxy in Docker and in the local sandbox; config, failures and --setup off',
  async (_docker, t) => {
    const deployment = await registryDeploymentEnv();
    const repo = makeFixtureRepo('node-slug');
    t.after(() => {
      repo.cleanup();
    });
    const sim: ModelSimulator = await startModelSimulator({ policy: oracle(repo.patch), apiKey: KEY });
    t.after(() => sim.close());
    const work = mkdtempSync(join(tmpdir(), 'ia-cli-setup-'));
    t.after(() => {
      rmSync(work, { recursive: true, force: true });
    });
    const env = cliEnv({
      ANTHROPIC_API_KEY: KEY,
      ANTHROPIC_BASE_URL: sim.url,
      ISSUE_AGENT_ENV_CACHE: 'on',
      ISSUE_AGENT_ENV_CACHE_DIR: join(work, 'env-cache'),
      ...deployment,
    });
    const resolve = (name: string, ...flags: string[]) =>
      runCli(
        [
          'resolve',
          repo.dir,
          '--task',
          'Runs of dashes should collapse',
          '--out',
          join(work, name),
          '--json',
          ...flags,
        ],
        env,
      );

    // Docker: npm ci detected from the lockfile, Node 20 from .nvmrc; the fix is applied to the checkout.
    const docker = await resolve('docker', '--sandbox', 'docker');
    assert.equal(docker.code, 0, `stdout:\n${docker.stdout}\nstderr:\n${docker.stderr}`);
    assert.equal(lastJson(docker.stdout).outcome, 'resolved');
    assert.match(
      docker.stderr,
      /^setup: npm ci --no-audit --no-fund \(detected npm: package-lock\.json is present\)$/m,
    );
    assert.match(
      docker.stderr,
      /^environment: issue-agent\/node:20 \(node 20 from \.nvmrc\); setup: npm ci --no-audit --no-fund \(exit 0, [\d.]+ s\); \d+ request\(s\) through the egress proxy, 0 refused$/m,
    );
    const recorded = FileEventStore.open(join(work, 'docker')).base.environment;
    assert.equal(recorded?.setup.cache.status, 'stored');
    assert.match(gitOutput(repo.dir, 'diff', '--stat'), /src\/slugify\.js/);
    assert.ok(!existsSync(join(repo.dir, 'node_modules')), 'what setup installed stays in the sandbox');
    execFileSync('git', ['checkout', '-q', '.'], { cwd: repo.dir });

    // The same checkout again: the cached environment, no network.
    const again = await resolve('again', '--sandbox', 'docker');
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /setup: reused a cached environment/);
    execFileSync('git', ['checkout', '-q', '.'], { cwd: repo.dir });

    // The isolated local sandbox: the same setup with the host's npm, inside its namespaces.
    const local = await resolve('local', '--sandbox', 'local');
    assert.equal(local.code, 0, `stdout:\n${local.stdout}\nstderr:\n${local.stderr}`);
    assert.equal(lastJson(local.stdout).outcome, 'resolved');
    assert.match(local.stderr, /^environment: local .*setup: npm ci --no-audit --no-fund \(exit 0/m);
    execFileSync('git', ['checkout', '-q', '.'], { cwd: repo.dir });

    // --setup off: jest is missing, so the outcome says the environment is broken, not "tests fail".
    const off = await resolve('off', '--sandbox', 'docker', '--setup', 'off');
    assert.equal(off.code, 1, off.stderr);
    assert.equal(lastJson(off.stdout).outcome, 'unverified');
    assert.equal(lastJson(off.stdout).cause, 'environment');
    execFileSync('git', ['checkout', '-q', '.'], { cwd: repo.dir });
    assert.match((await resolve('bad-flag', '--setup', 'maybe')).stderr, /--setup must be on or off/);

    // setup: from the config, failing: exit 3 with the command's output; nothing applied.
    commitConfig(repo, 'setup:\n  - \'echo "codegen: schema.graphql not found" >&2; exit 4\'\n');
    const failed = await resolve('failed', '--sandbox', 'docker');
    assert.equal(failed.code, 3, failed.stderr);
    assert.match(failed.stderr, /setup failed: the setup command .* exited with 4/);
    assert.match(failed.stderr, /codegen: schema\.graphql not found/);
    assert.match(failed.stderr, /--setup off/);
    assert.equal(gitOutput(repo.dir, 'status', '--porcelain'), '');

    // An invalid config: exit 2, the problem named, before any sandbox.
    commitConfig(repo, 'setup: npm ci\n');
    const invalid = await resolve('invalid', '--sandbox', 'docker');
    assert.equal(invalid.code, 2, invalid.stderr);
    assert.match(invalid.stderr, /\.github\/issue-agent\.yml is invalid:\n {2}- setup: /);
  },
  { timeout: 600_000 },
);

const isolation = await isolationSupport();

/** Every file under `dir`, as text. */
function filesUnder(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) {
      const path = join(entry.parentPath, entry.name);
      out.set(path, readFileSync(path, 'utf8'));
    }
  }
  return out;
}

test(
  'CLI: a setup secret printed in any form (by setup, by a command the agent runs) never reaches the trajectory',
  { skip: isolation.ok ? false : `no isolation here: ${isolation.reason}`, timeout: 120_000 },
  async (t) => {
    const secret = 'npm_cliSetupSecret_0123456789abcdef';
    const repo = makeFixtureRepo('node-calc');
    t.after(() => {
      repo.cleanup();
    });
    // The repository holds the secret in a disguise no scan knows (XOR), and a script that prints
    // it reversed, in hex, base64 and base32: what the scan cannot catch, the redactor must.
    const xored = [...Buffer.from(secret)].map((b) => b ^ 0x5a);
    commitFiles(repo.dir, {
      'tools/show.py': [
        'import base64',
        `s = bytes(b ^ 0x5a for b in ${JSON.stringify(xored)})`,
        'r = s[::-1]',
        'print("reversed", r.decode())',
        'print("hex", s.hex(), r.hex().upper())',
        'print("base64", base64.b64encode(b"k=" + s).decode(), base64.urlsafe_b64encode(b"x" + r).decode())',
        'print("base32", base64.b32encode(b"ab" + s).decode(), base64.b32encode(r).decode().lower())',
        '',
      ].join('\n'),
      '.github/issue-agent.yml': [
        'setupSecrets: [NPM_TOKEN]',
        'setup:',
        '  - \'printf "%s\\n" "$NPM_TOKEN" | rev; printf "%s" "$NPM_TOKEN" | base64; echo setup-printed\'',
        '',
      ].join('\n'),
    });
    const sim = await startModelSimulator({
      apiKey: KEY,
      policy: scripted([
        reply().tool('bash', { command: 'python3 tools/show.py' }),
        reply().tool('finish', { summary: 'printed what the repository holds' }),
      ]),
    });
    t.after(() => sim.close());
    const work = mkdtempSync(join(tmpdir(), 'ia-cli-secret-'));
    t.after(() => {
      rmSync(work, { recursive: true, force: true });
    });
    const out = join(work, 'run');
    const r = await runCli(
      ['resolve', repo.dir, '--task', 'Print the notes', '--out', out, '--json', '--sandbox', 'local'],
      cliEnv({
        ANTHROPIC_API_KEY: KEY,
        ANTHROPIC_BASE_URL: sim.url,
        ISSUE_AGENT_SETUP_SECRET_NPM_TOKEN: secret,
      }),
    );
    assert.ok(r.code !== null, r.stderr);
    const files = filesUnder(out);
    const base = files.get(join(out, 'base_state.json')) ?? '';
    // Setup ran with the secret and printed it; the agent's command printed every form.
    assert.match(base, /setup-printed/, base);
    const observation = [...files.entries()].find(
      ([p, text]) => p.includes('observation') && text.includes('reversed'),
    );
    assert.ok(observation !== undefined, [...files.keys()].join('\n'));
    assert.match(observation[1], /reversed \[REDACTED\]/);
    assert.match(observation[1], /hex \[REDACTED\] \[REDACTED\]/);
    files.set("the CLI's output", r.stdout + r.stderr);
    for (const [path, text] of files) {
      for (const form of [secret, ...secretForms(secret)]) {
        assert.ok(!text.includes(form), `${path} holds a form of the secret: ${form}`);
      }
    }
  },
);
