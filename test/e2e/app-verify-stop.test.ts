import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { oracle } from '../../src/model-sim/index.js';
import { emptyChangeBranch } from '../support/person-branch.js';
import { startStack } from '../support/pipeline.js';
import { redisSkipReason } from '../support/redis-server.js';

const OWNER = 'acme';
const REPO = 'calc';

/**
 * `@agent stop` on a pull request stops a verification running there (`@agent verify`), as it
 * stops a fix, a review or an evaluation: the test command in the sandbox is ended, the reply says
 * who stopped it, and nothing is put on the check run. The repository's test command signals that
 * it started, then waits for a file nobody writes.
 */
test(
  'App: @agent stop ends a running @agent verify; the reply says so and no check run is made',
  { skip: redisSkipReason(), timeout: 300_000 },
  async (t) => {
    const marks = mkdtempSync(join(tmpdir(), 'ia-verify-stop-'));
    t.after(() => {
      rmSync(marks, { recursive: true, force: true });
    });
    const started = join(marks, 'started');
    const command = `touch ${started}; while [ ! -e ${join(marks, 'never')} ]; do sleep 0.2; done`;
    const stack = await startStack({
      owner: OWNER,
      repo: REPO,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-verify-stop-0123456789',
      appPermissions: { checks: 'write' },
      files: { '.github/issue-agent.yml': `testCommand: ${JSON.stringify(command)}\n` },
      policy: (fixture) => oracle(fixture.patch),
    });
    t.after(() => stack.stop());
    const { sim, pipeline } = stack;
    // A person's branch with one commit of its own (the same tree: the command never gets past its wait).
    const commit = emptyChangeBranch(sim.bareRepoPath(OWNER, REPO), 'alice/change');
    const pr = await sim.openPull(OWNER, REPO, { head: 'alice/change', title: 'A change', author: 'maria' });
    const replies = (): string[] =>
      sim
        .comments(OWNER, REPO, pr.number)
        .filter((c) => c.user === sim.app.botLogin && c.body.includes('Issue Agent: verification'))
        .map((c) => c.body);

    await sim.comment(OWNER, REPO, pr.number, 'maria', '@agent verify');
    await sim.waitFor(
      () => existsSync(started),
      180_000,
      () => `the verification's test command to start\n${pipeline.logs()}`,
    );
    await sim.comment(OWNER, REPO, pr.number, 'maria', '@agent stop');
    await sim.waitFor(
      () => replies().some((b) => b.includes('Stopped')),
      120_000,
      () => `the verification to stop\n${replies().join('\n---\n')}\n${pipeline.logs()}`,
    );
    const said = replies().join('\n');
    assert.match(said, /Stopped \(stopped by maria\) before the verification finished/, said);
    assert.doesNotMatch(said, /Matches|Differs/, said);
    assert.equal(await pipeline.jobsEnded(pr.number), 1);
    assert.equal(
      sim.checkRuns(OWNER, REPO).filter((r) => r.headSha === commit).length,
      0,
      'no check run on the head',
    );
  },
);
