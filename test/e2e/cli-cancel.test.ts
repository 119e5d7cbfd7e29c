import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import Docker from 'dockerode';
import { reply, scripted, startModelSimulator } from '../../src/model-sim/index.js';
import { LABEL_OWNER, ownerId } from '../../src/sandbox/docker/owner.js';
import { isolationSupport } from '../../src/sandbox/local/launch.js';
import { descendantsOf } from '../../src/sandbox/local/proc-tree.js';
import { cliEnv, startCli, type CliResult } from '../support/cli.js';
import { commitFiles, makeFixtureRepo } from '../support/fixture-repo.js';
import { containerRuns, dockerTest, waitFor } from '../sandbox/docker/docker-test-support.js';

const KEY = 'sk-ant-cli-cancel-0123456789abcdef';

/** What the issue allows between Ctrl-C and the end of a run cancelled during setup. */
const CANCEL_BOUND_MS = 5_000;

/** Processes whose command line is exactly `argv` (the host's whole /proc, sandboxes included). */
function processesRunning(argv: readonly string[]): number[] {
  const want = `${argv.join('\0')}\0`;
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8') === want) found.push(Number(name));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

interface HangingRun {
  readonly child: ReturnType<typeof startCli>;
  /** The CLI's owner label (docker/owner.ts): what every container it makes carries. */
  readonly owner: string;
  /** The setup command's argv: `sleep <n>` with an n of this run's own. */
  readonly sleep: readonly string[];
  /** The CLI's TMPDIR: every host folder the run makes is below it. */
  readonly tmp: string;
  stderr(): string;
}

/**
 * `issue-agent resolve` on a checkout whose committed setup hangs (`sleep <n>`), in `sandbox`,
 * returned once that command runs in the sandbox: a process of that command line below the CLI
 * (the local sandbox), or in a container of the CLI's (Docker).
 */
async function startHangingSetup(t: TestContext, sandbox: 'docker' | 'local'): Promise<HangingRun> {
  const sleep = ['sleep', String(600 + Math.floor(Math.random() * 99_000))];
  const repo = makeFixtureRepo('node-calc');
  t.after(() => {
    repo.cleanup();
  });
  commitFiles(repo.dir, { '.github/issue-agent.yml': `setup:\n  - ${sleep.join(' ')}\n` });
  const sim = await startModelSimulator({
    apiKey: KEY,
    policy: scripted([reply().tool('finish', { summary: 'never reached' })]),
  });
  t.after(() => sim.close());
  const work = mkdtempSync(join(tmpdir(), 'ia-cli-cancel-'));
  const tmp = join(work, 'tmp');
  t.after(() => {
    rmSync(work, { recursive: true, force: true });
  });
  mkdirSync(tmp);
  const child = startCli(
    ['resolve', repo.dir, '--task', 'Never runs', '--out', join(work, 'run'), '--json', '--sandbox', sandbox],
    cliEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: sim.url, TMPDIR: tmp }),
  );
  let stderr = '';
  child.stderr?.on('data', (d: string) => (stderr += d));
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const pid = child.pid;
  assert.ok(pid !== undefined);
  const owner = ownerId(pid);
  const exited = (): boolean => child.exitCode !== null || child.signalCode !== null;
  const docker = new Docker();
  await waitFor(
    async () => {
      if (exited()) throw new Error(`the CLI ended before its setup ran:\n${stderr}`);
      if (sandbox === 'local') {
        const below = new Set(await descendantsOf(pid));
        return processesRunning(sleep).some((p) => below.has(p));
      }
      const [c] = await docker.listContainers({ filters: { label: [`${LABEL_OWNER}=${owner}`] } });
      if (c === undefined) return false;
      return containerRuns(docker, c.Id, sleep.join(' '));
    },
    120_000,
    `the setup command ${sleep.join(' ')} to run`,
  );
  return { child, owner, sleep, tmp, stderr: () => stderr };
}

/** Sends `signal` and measures until the CLI has exited. */
async function interrupt(
  run: HangingRun,
  signals: readonly NodeJS.Signals[],
): Promise<{ readonly result: CliResult; readonly ms: number }> {
  const t0 = performance.now();
  const [first, ...more] = signals;
  run.child.kill(first);
  for (const s of more) {
    // The next signal once the first was handled (its line is on stderr): two signals sent at
    // once may reach the process as one.
    await waitFor(
      () => /cancelling the run/.test(run.stderr()) || run.child.exitCode !== null,
      5_000,
      'the first signal',
    );
    run.child.kill(s);
  }
  const result = await run.child.result;
  return { result, ms: Math.round(performance.now() - t0) };
}

/** Nothing of the run is left: no container of its owner, no process of its setup, no host folder. */
async function assertNothingLeft(run: HangingRun, docker: Docker | null): Promise<void> {
  const stderr = `\nthe CLI's stderr:\n${run.stderr()}`;
  if (docker !== null) {
    const left = await docker.listContainers({
      all: true,
      filters: { label: [`${LABEL_OWNER}=${run.owner}`] },
    });
    assert.deepEqual(
      left.map((c) => `${c.Names.join(',')} ${c.State}`),
      [],
      `no container of the run is left${stderr}`,
    );
  }
  assert.deepEqual(processesRunning(run.sleep), [], 'the setup command is not running any more');
  // The CLI's copies live in one private root kept across runs (workspace-copy.ts): it may stay, empty.
  const root = `issue-agent-${String(process.getuid?.() ?? 'user')}`;
  // tsx-*: the TypeScript loader's cache (tests run the CLI from source), not the run's.
  const left = readdirSync(run.tmp)
    .filter((name) => !name.startsWith('tsx-'))
    .flatMap((name) => (name === root ? readdirSync(join(run.tmp, name)).map((n) => join(name, n)) : [name]));
  assert.deepEqual(left, [], 'no host folder of the run is left');
}

const measured: string[] = [];
test.after(() => {
  if (measured.length > 0) console.log(`# cancel times: ${measured.join('; ')}`);
});

for (const sandbox of ['docker', 'local'] as const) {
  const register = (name: string, fn: (t: TestContext, docker: Docker | null) => Promise<void>): void => {
    if (sandbox === 'docker') {
      dockerTest(name, (docker, t) => fn(t, docker), { timeout: 240_000 });
      return;
    }
    test(name, { timeout: 240_000 }, async (t) => {
      const isolation = await isolationSupport();
      if (!isolation.ok) {
        t.skip(`no isolation here: ${isolation.reason}`);
        return;
      }
      await fn(t, null);
    });
  };

  register(
    `CLI --sandbox ${sandbox}: Ctrl-C during a hanging setup ends the run within 5 s, nothing left`,
    async (t, docker) => {
      const run = await startHangingSetup(t, sandbox);
      const { result, ms } = await interrupt(run, ['SIGINT']);
      measured.push(`${sandbox} one Ctrl-C ${ms} ms`);
      assert.equal(result.code, 130, result.stderr);
      assert.match(result.stderr, /SIGINT: cancelling the run/);
      assert.match(
        result.stderr,
        /^issue-agent: cancelled during setup; everything the run had started is removed$/m,
      );
      assert.ok(
        ms <= CANCEL_BOUND_MS,
        `the run ended ${ms} ms after Ctrl-C (at most ${CANCEL_BOUND_MS})\n${result.stderr}`,
      );
      await assertNothingLeft(run, docker);
    },
  );

  register(
    `CLI --sandbox ${sandbox}: a second Ctrl-C during the cleanup removes everything at once`,
    async (t, docker) => {
      const run = await startHangingSetup(t, sandbox);
      const { result, ms } = await interrupt(run, ['SIGINT', 'SIGINT']);
      const forced = /SIGINT again: removing everything this run started, then exiting/.test(result.stderr);
      measured.push(
        `${sandbox} two Ctrl-C ${ms} ms (${forced ? 'the second one forced the removal' : 'gone before the second one'})`,
      );
      assert.equal(result.code, 130, result.stderr);
      // The second signal found the cleanup under way (Docker's container removal always takes that
      // long); a local sandbox may be gone before it arrives, which is as good.
      if (sandbox === 'docker' || !/cancelled during setup/.test(result.stderr))
        assert.ok(forced, result.stderr);
      assert.ok(ms <= CANCEL_BOUND_MS, `the run ended ${ms} ms after the first Ctrl-C\n${result.stderr}`);
      await assertNothingLeft(run, docker);
    },
  );
}
