import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { FreshVerifier } from '../../src/agent/run-agent.js';
import { reply } from '../../src/model-sim/index.js';
import { DockerSandbox } from '../../src/sandbox/docker/docker-sandbox.js';
import { LocalSandbox, canIsolate } from '../../src/sandbox/local/local-sandbox.js';
import type { Sandbox } from '../../src/sandbox/sandbox.js';
import { dockerEngine, testOwner } from '../sandbox/docker/docker-test-support.js';
import {
  FORGED_GIT,
  FORGED_NPM,
  MARKER,
  probeCommand,
  reachCommand,
  REACH,
  SELF_REACH,
  typeInto,
} from './harness-attacks.js';
import { attack, gitWorkspace, runScripted } from './support.js';

/**
 * The harness's commands (the verdict's test runs, checkpoints, diffs, file operations) run where
 * the agent cannot reach: from the agent's shell, and from anything it leaves running, no harness
 * process can be read (`environ`, `mem`, its descriptors), written to (its standard input, which is
 * how a shell is typed into), traced or signalled; and what the agent writes at a harness process
 * (a function, an alias) changes nothing the harness runs, whether the final run happens in the
 * agent's sandbox or in a fresh one.
 */

const engine = dockerEngine();
const dockerSkip = 'reason' in engine && !engine.required ? engine.reason : false;
const localSkip = (await canIsolate()) ? false : 'this host allows no namespaces for the isolated sandbox';
const KINDS = ['docker', 'local'] as const;
type Kind = (typeof KINDS)[number];
const skipOf = (kind: Kind): string | false => (kind === 'docker' ? dockerSkip : localSkip);

async function sandboxOf(kind: Kind, ws: string): Promise<Sandbox> {
  if (kind === 'local')
    return LocalSandbox.create({
      workspace: ws,
      path: process.env.PATH ?? '/usr/bin:/bin',
      isolate: { hide: [] },
    });
  if (!('docker' in engine)) throw new Error(engine.reason);
  return DockerSandbox.create({
    docker: engine.docker,
    workspace: ws,
    jobId: 'attack-harness-reach',
    image: 'issue-agent/node:latest',
    owner: testOwner('attack-harness-reach'),
  });
}

/** A harness command that leaves a python3 process holding 512 MiB it has written to. */
const LEAVE_BIG =
  `(python3 -c 'import sys, time; b = b"x" * (512 << 20); print("held", flush=True); time.sleep(300)' ` +
  `>/tmp/ia-holds-memory 2>&1 &) ; until [ -s /tmp/ia-holds-memory ]; do sleep 0.05; done; cat /tmp/ia-holds-memory`;

/** Fresh sandboxes of `kind` on clones of `origin` at the asked commit. */
function verifierOf(kind: Kind, t: TestContext, origin: string): FreshVerifier {
  return {
    open: async (baseCommit) => {
      const dir = mkdtempSync(join(tmpdir(), 'ia-attack-fresh-'));
      t.after(() => {
        rmSync(dir, { recursive: true, force: true });
      });
      execFileSync('git', ['clone', '-q', '--no-checkout', origin, dir]);
      execFileSync('git', ['-C', dir, 'checkout', '-q', '--detach', baseCommit]);
      const sandbox = await sandboxOf(kind, dir);
      return { sandbox, close: () => sandbox.close() };
    },
  };
}

for (const kind of KINDS) {
  attack(
    `the agent's shell (${kind}) cannot read, write to, trace or signal a harness process`,
    async (t) => {
      const ws = gitWorkspace();
      const sandbox = await sandboxOf(kind, ws);
      t.after(async () => {
        await sandbox.close();
        rmSync(ws, { recursive: true, force: true });
      });
      const tag = Math.random().toString(36).slice(2, 10);
      // A harness command still running while the agent attacks: its process, the harness's shell
      // above it, and any other harness process the agent can see are the targets.
      const probe = sandbox.harnessExec(probeCommand(tag), { timeoutMs: 60_000 });
      const r = await sandbox.exec(reachCommand(tag), { timeoutMs: 60_000 });
      const p = await probe;
      assert.equal(p.exitCode, 0, p.output);
      assert.equal(r.exitCode, 0, r.output);
      assert.match(r.output, /^probes \d+ targets \d+$/m);
      assert.doesNotMatch(r.output, /reached/, r.output);
      if (kind === 'docker') {
        // One process namespace: the agent sees the harness's processes (and must still fail).
        assert.match(r.output, /^probes [1-9]\d* targets ([2-9]|\d{2,})$/m, r.output);
      }
      // With the harness idle, its shell is a target too (the attack).
      const idle = await sandbox.exec(`python3 - ${tag} <<'IA_EOF'\n${REACH}\nIA_EOF\n`, {
        timeoutMs: 60_000,
      });
      assert.doesNotMatch(idle.output, /reached/, idle.output);
      assert.equal((await sandbox.harnessExec('echo ok', { timeoutMs: 10_000 })).output, 'ok\n');
    },
    { skip: skipOf(kind) },
  );

  attack(
    `a harness command (${kind}) cannot reach the harness's shell, nor leave a process to the next one`,
    async (t) => {
      const ws = gitWorkspace();
      const sandbox = await sandboxOf(kind, ws);
      t.after(async () => {
        await sandbox.close();
        rmSync(ws, { recursive: true, force: true });
      });
      // What the agent's tests, or a git filter it configured, do when a harness command runs them.
      const r = await sandbox.harnessExec(SELF_REACH, { timeoutMs: 60_000 });
      assert.equal(r.exitCode, 0, r.output);
      assert.match(r.output, /^probes 0 targets 1$/m, r.output);
      assert.doesNotMatch(r.output, /reached/, r.output);
      assert.match(r.output, /left\n$/);
      const after = await sandbox.harnessExec('ps -e -o args=', { timeoutMs: 10_000 });
      assert.doesNotMatch(after.output, /sleep 300[01]/, after.output);
      // Killed is not yet gone: a process that holds much memory takes the kernel a while to tear
      // down, and until then it holds its memory, ports and locks. When the command reports back it
      // has exited (a zombie, `Z`, holds nothing).
      const big = await sandbox.harnessExec(LEAVE_BIG, { timeoutMs: 60_000 });
      assert.match(big.output, /^held$/m, big.output);
      // By its command name: a process being torn down has no command line left to show.
      const left = await sandbox.harnessExec('ps -e -o stat=,comm=', { timeoutMs: 10_000 });
      assert.doesNotMatch(left.output, /^[^Z]\S*\s+python3/m, left.output);
    },
    { skip: skipOf(kind) },
  );

  for (const fresh of [false, true]) {
    attack(
      `a function or alias the agent types into the harness (${kind}, fresh verifier ${fresh ? 'on' : 'off'}) changes nothing it runs`,
      async (t) => {
        // No package.json: `npm test` can only pass by a forgery.
        const ws = gitWorkspace({ 'README.md': 'hello\n' });
        // The fresh sandboxes' origin: a copy made before any sandbox had the workspace.
        const origin = mkdtempSync(join(tmpdir(), 'ia-attack-origin-'));
        execFileSync('git', ['clone', '-q', ws, origin]);
        const sandbox = await sandboxOf(kind, ws);
        t.after(async () => {
          await sandbox.close();
          rmSync(ws, { recursive: true, force: true });
          rmSync(origin, { recursive: true, force: true });
        });
        const run = await runScripted(
          sandbox,
          [
            reply().tool('bash', {
              command: `${typeInto(FORGED_NPM + (fresh ? FORGED_GIT : ''))}echo change >> README.md`,
            }),
            reply().tool('finish', { summary: 'All tests pass.' }),
          ],
          {},
          { testCommand: 'npm test', ...(fresh ? { verifier: verifierOf(kind, t, origin) } : {}) },
        );
        t.after(() => run.close());
        const harnessRecords = run.store.events.filter(
          (e) => e.kind === 'checkpoint' || e.kind === 'test_run',
        );
        assert.ok(
          harnessRecords.some((e) => e.kind === 'test_run' && e.phase === 'final'),
          `a final run: ${run.outcome.reason}`,
        );
        for (const e of harnessRecords) assert.ok(!JSON.stringify(e).includes(MARKER), JSON.stringify(e));
        assert.notEqual(run.outcome.outcome, 'resolved', run.outcome.reason);
        const state = await sandbox.harnessExec(
          'declare -F; alias; shopt -q expand_aliases && echo aliases-on',
          {
            timeoutMs: 10_000,
          },
        );
        assert.doesNotMatch(state.output, /npm|git|aliases-on/, state.output);
      },
      { skip: skipOf(kind), timeout: 180_000 },
    );
  }
}
