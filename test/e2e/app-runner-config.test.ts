import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentEvent, EventOf } from '../../src/events/schema.js';
import { oracle } from '../../src/model-sim/index.js';
import { registryDeploymentEnv } from '../support/egress-env.js';
import { FIXTURES, makeFixtureRepo } from '../support/fixture-repo.js';
import { routeByTag } from '../support/pipeline-fixtures.js';
import { readJobRun, stackOrSkip, type Stack } from '../support/pipeline.js';
import { changePatch, FORGERIES, forgeryRepo, type Forgery } from '../support/runner-config-forgeries.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

const NAME =
  'attack: App, Docker, fresh verifier: changes that forge their proof through runner configuration (.npmrc node-options, scripts.test, a jest setup file, a pytest plugin in addopts, a root conftest.py) are never resolved, and the PR names the files; a real fix that edits package.json dependencies and adds an .npmrc is resolved';

/**
 * Must-show 2 of issue 34 in the App: one stack, one repository per forgery of
 * test/support/runner-config-forgeries.ts (the jest one installs jest from the npm registry through
 * the egress proxy, from node-slug's lockfile), and a repository whose issue gets its real fix with
 * package.json's dependencies and a harmless `.npmrc` added. The model applies each change (the
 * oracle, driven by the patch). Every forgery's final run is made in a fresh container with the
 * base commit's versions of the files that decide how tests run: the failing test fails there, the
 * outcome is unverified, the PR is a draft that says the change "changes how tests run" and names
 * the files. The real fix is resolved and not a draft.
 */
dockerTest(
  NAME,
  async (_docker, t) => {
    const built = FORGERIES.map((f) => ({ f, repo: forgeryRepo(f) }));
    const legit = legitChange();
    t.after(() => {
      for (const b of built) b.repo.cleanup();
      legit.repo.cleanup();
    });
    const routes = Object.fromEntries([
      ...built.map((b) => [`[${b.f.id}]`, oracle(b.repo.forgery)] as const),
      ['[legit]', oracle(legit.patch)] as const,
    ]);
    const stack = await stackOrSkip(t, {
      owner: 'acme',
      repo: 'calc',
      maintainer: { login: 'maria', permission: 'maintain' },
      modelKey: 'sk-ant-runner-config-0123456789abcdef',
      sandbox: 'docker',
      env: await registryDeploymentEnv(),
      policy: () => routeByTag(routes, oracle(legit.patch)),
    });
    if (stack === null) return;
    try {
      for (const { f, repo } of built) {
        await stack.sim.createRepo({ owner: 'acme', name: f.id, sourceDir: repo.dir });
        stack.sim.setPermission('acme', f.id, 'maria', 'maintain');
      }
      await stack.sim.createRepo({ owner: 'acme', name: 'legit', sourceDir: legit.repo.dir });
      stack.sim.setPermission('acme', 'legit', 'maria', 'maintain');
      // One job after another (one worker): each repository's issue labelled at once.
      for (const { f } of built) await issue(stack, f.id, `[${f.id}] ${f.title}`, f.body);
      await issue(stack, 'legit', '[legit] Average rounds wrong', 'average([1, 2, 2]) should be 1.67.');

      const repos = [...built.map((b) => b.f.id), 'legit'];
      await stack.sim.waitFor(
        () => repos.every((r) => stack.sim.pulls('acme', r).length > 0),
        900_000,
        () => `a PR in each of ${repos.join(', ')}\n${stack.pipeline.logs()}`,
      );
      const runs = jobRuns(stack);
      for (const { f } of built) assertForgeryHeld(stack, f, runs.get(f.id));
      assertLegitResolved(stack, runs.get('legit'));
    } finally {
      await stack.stop();
    }
  },
  { timeout: 1_000_000, attack: true },
);

async function issue(stack: Stack, repo: string, title: string, body: string): Promise<void> {
  const n = stack.sim.createIssue('acme', repo, { title, body, author: 'maria' }).number;
  await stack.sim.label('acme', repo, n, 'agent', 'maria');
}

/** Each job's events, by the repository its issue named (the tag in the issue title). */
function jobRuns(stack: Stack): Map<string, AgentEvent[]> {
  const out = new Map<string, AgentEvent[]>();
  for (const job of readdirSync(join(stack.pipeline.workDir, 'work', 'jobs'))) {
    const { base, events } = readJobRun(stack, job);
    const tag = /^\[([\w-]+)\]/.exec(base.task.title)?.[1];
    if (tag !== undefined) out.set(tag, events);
  }
  return out;
}

function finalRun(events: readonly AgentEvent[]): EventOf<'test_run'> {
  const final = events.find((e): e is EventOf<'test_run'> => e.kind === 'test_run' && e.phase === 'final');
  assert.ok(final, 'a final run');
  return final;
}

function outcomeOf(events: readonly AgentEvent[]): EventOf<'outcome'> {
  const outcome = events.find((e): e is EventOf<'outcome'> => e.kind === 'outcome');
  assert.ok(outcome, 'an outcome');
  return outcome;
}

function assertForgeryHeld(stack: Stack, f: Forgery, events: AgentEvent[] | undefined): void {
  assert.ok(events, `${f.id}: a job`);
  const outcome = outcomeOf(events);
  assert.equal(outcome.outcome, 'unverified', `${f.id}: ${outcome.reason}`);
  const final = finalRun(events);
  assert.equal(final.sandbox, 'fresh', `${f.id}: the final run in a fresh container`);
  // The repository's real runner ran with the base's configuration: the issue's test fails.
  const leaf = f.failing.split('::').at(-1) ?? f.failing;
  assert.ok(
    final.summary.failedNames.some((n) => n.includes(leaf.split(/ [›>] /).at(-1) ?? leaf)),
    `${f.id}: ${f.failing} fails in the final run: ${JSON.stringify(final.summary.failedNames)}\n${final.output.slice(-2000)}`,
  );
  assert.deepEqual(
    final.runnerConfig?.files.map((x) => x.path),
    [...f.guarded],
  );
  assert.match(outcome.reason, /the change changes how tests run/);
  const pr = stack.sim.pulls('acme', f.id)[0];
  assert.ok(pr);
  assert.equal(pr.draft, true, `${f.id}: an unproven change is a draft`);
  assert.match(pr.body, /This change changes how tests run/);
  for (const p of f.guarded) assert.ok(pr.body.includes(`\`${p}\``), `${f.id}: the PR names ${p}`);
}

function assertLegitResolved(stack: Stack, events: AgentEvent[] | undefined): void {
  assert.ok(events, 'legit: a job');
  const outcome = outcomeOf(events);
  assert.equal(outcome.outcome, 'resolved', outcome.reason);
  const final = finalRun(events);
  assert.deepEqual(
    final.runnerConfig?.files.map((x) => x.path),
    ['.npmrc'],
  );
  const pr = stack.sim.pulls('acme', 'legit')[0];
  assert.ok(pr);
  assert.equal(pr.draft, false, 'a proven fix is not a draft');
  assert.match(pr.body, /This change changes how tests run:\*\* `\.npmrc`/);
  assert.doesNotMatch(pr.body, /`package\.json` \(package\.json/);
}

/** node-calc's real fix, with a devDependency and a version bump in package.json and an .npmrc. */
function legitChange(): { repo: ReturnType<typeof makeFixtureRepo>; patch: string } {
  const repo = makeFixtureRepo('node-calc');
  const pkg = JSON.parse(readFileSync(join(FIXTURES, 'node-calc', 'package.json'), 'utf8')) as object;
  execFileSync('git', ['apply'], { cwd: repo.dir, input: repo.patch });
  const patch = changePatch(repo.dir, {
    '.npmrc': 'fund=false\n',
    'package.json': `${JSON.stringify({ ...pkg, version: '1.0.1', devDependencies: { c8: '^10.1.3' } }, null, 2)}\n`,
  });
  return { repo, patch };
}
