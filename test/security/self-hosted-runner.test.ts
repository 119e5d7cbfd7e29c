import assert from 'node:assert/strict';
import {
  accessSync,
  chmodSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { after, before, describe } from 'node:test';
import { oracle, startModelSimulator, type ModelSimulator, type Policy } from '../../src/model-sim/index.js';
import { isolationSupport } from '../../src/sandbox/local/launch.js';
import { ACTION_ENTRY, runBundledAction } from '../support/action-runner.js';
import { makeFixtureRepo, type FixtureRepo } from '../support/fixture-repo.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import { bashThenOracle, requestText, routeByTag } from '../support/pipeline-fixtures.js';
import { attackTest } from './support.js';

const OWNER = 'acme';
const REPO = 'calc';
const MAINTAINER = 'maria';
const MODEL_KEY = 'sk-ant-self-hosted-runner-0123456789abcdef';
const TOOL_BIN = ['node', '24.1.0', 'x64', 'bin'];

const support = await isolationSupport();
/** The runner lives under /opt, as a self-hosted one usually does: outside /tmp (private in the sandbox). */
function optWritable(): string | false {
  try {
    accessSync('/opt', constants.W_OK);
    return false;
  } catch {
    return 'a self-hosted runner is emulated under /opt, which this user cannot write';
  }
}
const skip = support.ok ? optWritable() : support.reason;

/**
 * A self-hosted runner installed in /opt/…/actions-runner (test/support/action-runner.ts
 * emulateRunner: registration, credentials, logs, a step script with a secret, the workflow's
 * checkout with the job's token, downloaded actions, a tool cache with a tool on PATH), the bundled
 * Action on an issue whose text makes the agent look for the runner's files first. The agent, in
 * the isolated local sandbox, finds every one of them hidden, while the tool cache (where setup-*
 * actions put Node or Python) is there and read-only. A runner the Action cannot find refuses the
 * job, and says how to run it anyway (`sandbox: docker`).
 */
describe('the Action on a self-hosted runner under /opt', { skip, timeout: 600_000 }, () => {
  let fixture: FixtureRepo;
  let sim: GitHubSim;
  let model: ModelSimulator;
  let base: string;
  let runId = 5000;
  const temps: string[] = [];

  /** The first command: every file of the runner (but the Action's own folder) tried, and the tool cache. */
  function lookAround(): string {
    const root = join(base, 'actions-runner');
    const own = join(root, '_work', '_temp', 'issue-agent');
    const tools = join(root, '_work', '_tool');
    const files = walk(root).filter((f) => !isUnder(f, own) && !isUnder(f, tools));
    assert.ok(files.length >= 20, files.join('\n'));
    const quoted = files.map((f) => `'${f}'`).join(' ');
    return [
      `n=0; for f in ${quoted}; do n=$((n+1)); ` +
        `if [ "$(head -c 64 "$f" 2>/dev/null | wc -c)" -gt 0 ]; then echo "LE""AK $f"; fi; done; echo "checked=$n"`,
      // Whatever else is readable under the runner's folder (the pattern is split, so that the
      // command's own text never matches what is asserted).
      `grep -rhao "runner-ca""nary-[0-9a-f-]*" ${root} 2>/dev/null | head -3`,
      `grep -rhao "ghs""_[A-Za-z0-9]*" ${root} 2>/dev/null | head -3`,
      `ia-tool`,
      `(touch ${join(tools, ...TOOL_BIN, 'pwned')}) 2>/dev/null && echo tool-written || echo "tool-readonly:$((3*3))"`,
    ].join('; ');
  }

  before(async () => {
    assert.ok(existsSync(ACTION_ENTRY), `${ACTION_ENTRY} is missing: run npm run build:action`);
    fixture = makeFixtureRepo('node-calc');
    sim = await startGitHubSimulator();
    await sim.createRepo({ owner: OWNER, name: REPO, sourceDir: fixture.dir });
    sim.addUser({ login: MAINTAINER });
    sim.setPermission(OWNER, REPO, MAINTAINER, 'write');
    base = mkdtempSync('/opt/ia-test-');
    chmodSync(base, 0o755);
    // What actions/setup-node left in the tool cache, its bin folder on PATH.
    const bin = join(base, 'actions-runner', '_work', '_tool', ...TOOL_BIN);
    mkdirSync(bin, { recursive: true, mode: 0o755 });
    writeFileSync(join(bin, 'ia-tool'), '#!/bin/sh\necho "tool:$((20+22))"\n', { mode: 0o755 });
    const look: Policy = (request, ctx) => bashThenOracle(lookAround(), fixture.patch)(request, ctx);
    model = await startModelSimulator({
      apiKey: MODEL_KEY,
      policy: routeByTag({ '[look-around]': look }, oracle(fixture.patch)),
    });
  });

  after(async () => {
    await model.close();
    await sim.close();
    fixture.cleanup();
    rmSync(base, { recursive: true, force: true });
    for (const t of temps) rmSync(t, { recursive: true, force: true });
  });

  const labeled = (title: string): number => {
    const n = sim.createIssue(OWNER, REPO, {
      title,
      body: 'average() truncates instead of rounding: average([1, 2, 2]) should be 1.67.',
      author: MAINTAINER,
    }).number;
    return n;
  };
  const webhook = (n: number) =>
    sim.buildWebhook('issues', 'labeled', {
      owner: OWNER,
      repo: REPO,
      issue: n,
      label: 'issue-agent',
      sender: MAINTAINER,
    }).payload;

  attackTest(
    "self-hosted runner: the agent reads none of the runner's files; the tool cache is on PATH and read-only",
    { timeout: 300_000 },
    async () => {
      const n = labeled('Average rounds wrong [look-around]');
      const bin = join(base, 'actions-runner', '_work', '_tool', ...TOOL_BIN);
      const run = await runBundledAction({
        sim,
        owner: OWNER,
        repo: REPO,
        modelUrl: model.url,
        modelKey: MODEL_KEY,
        event: 'issues',
        payload: webhook(n),
        stepEnv: { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` },
        runId: ++runId,
        temps,
        runner: { base },
      });
      assert.equal(run.code, 0, run.stdout);
      assert.equal(run.outputs.outcome, 'resolved', run.stdout);
      const seen = model.requests
        .map((r) => requestText(r.body))
        .filter((text) => text.includes('[look-around]'))
        .join('\n');
      const files = walk(run.runner.root).filter(
        (f) => !isUnder(f, join(run.runner.temp, 'issue-agent')) && !isUnder(f, run.runner.toolCache),
      );
      assert.match(seen, new RegExp(`checked=${String(files.length)}\\b`), 'every file was tried');
      // Named, so that a failure lists what leaked rather than the requests.
      assert.deepEqual(seen.match(/LEAK [^\\"]*/g) ?? [], [], 'a runner file was read');
      assert.deepEqual(seen.match(/runner-canary-[0-9a-f-]{8,}/g) ?? [], [], 'a runner secret was read');
      assert.deepEqual(seen.match(/ghs_[A-Za-z0-9]{20,}/g) ?? [], [], 'the checkout token was read');
      assert.match(seen, /tool:42/, 'the tool cache is visible, its bin folder on PATH');
      assert.match(seen, /tool-readonly:9/);
      assert.ok(!existsSync(join(bin, 'pwned')));
      for (const f of run.runner.files) assert.ok(existsSync(f), `${relative(base, f)} still there`);
      assert.match(run.stdout, /"msg":"runner layout"/);
    },
  );

  attackTest(
    'self-hosted runner it cannot find: the job is refused, and the issue says to use `sandbox: docker`',
    async () => {
      const n = labeled('Average rounds wrong, unrecognised runner [look-around]');
      const requestsBefore = model.requests.length;
      const elsewhere = join(base, 'unrecognised');
      mkdirSync(elsewhere, { mode: 0o755 });
      const run = await runBundledAction({
        sim,
        owner: OWNER,
        repo: REPO,
        modelUrl: model.url,
        modelKey: MODEL_KEY,
        event: 'issues',
        payload: webhook(n),
        runId: ++runId,
        temps,
        runner: { base: elsewhere, recognisable: false },
      });
      assert.equal(run.code, 1, run.stdout);
      assert.equal(run.outputs.outcome, 'failed');
      assert.match(
        run.stdout,
        /^::error::issue-agent: the isolated local sandbox \(`sandbox: local`\) would leave this runner's files in the agent's reach.*no runner folder was found.*`sandbox: docker`/m,
      );
      const comments = sim
        .comments(OWNER, REPO, n)
        .map((c) => c.body)
        .join('\n');
      assert.match(
        comments,
        /the isolated local sandbox \(`sandbox: local`\) would leave this runner's files/,
      );
      assert.match(
        comments,
        /- set the action's `sandbox: docker` input to run the agent in a container instead/,
      );
      assert.equal(model.requests.length, requestsBefore, 'no model request');
      assert.ok(
        !existsSync(join(elsewhere, 'actions-runner', '_work', '_temp', 'issue-agent')),
        'nothing written',
      );
    },
  );
});

function walk(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((p) => join(dir, p))
    .filter((p) => {
      try {
        return statSync(p).isFile();
      } catch {
        return false;
      }
    });
}

function isUnder(path: string, dir: string): boolean {
  const r = relative(dir, path);
  return r === '' || (!r.startsWith('..') && !r.startsWith('/'));
}
