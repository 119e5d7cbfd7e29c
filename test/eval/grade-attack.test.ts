import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { loadBackend } from '../../src/sandbox/backends.js';
import { readAgentEnv } from '../../src/config/agent-env.js';
import { grade } from '../../src/eval/grade.js';
import { parseTasks } from '../../src/eval/tasks.js';
import { tallied } from '../support/attack-log.js';

const NAME =
  "attack: a model patch that turns the tests folder into a link to a host folder and rewrites the repository's setup config is graded without touching the host or running that setup";

/**
 * Grading applies the model's patch; the model is the attacker. Its patch replaces `tests/` by a
 * symlink to a host folder (so the harness's reset of the test files, or the test patch, would
 * delete or write there if done on the host) and adds a `.github/issue-agent.yml` whose setup fails
 * (so grading would fail if it prepared its environment from the patched tree).
 */
test(NAME, (t) =>
  tallied(NAME, async () => {
    const root = mkdtempSync(join(tmpdir(), 'ia-grade-attack-'));
    t.after(() => {
      rmSync(root, { recursive: true, force: true });
    });
    const host = join(root, 'host-folder');
    mkdirSync(host);
    writeFileSync(join(host, 'test_stats.py'), 'HOST FILE\n');
    const repo = join(root, 'repo');
    mkdirSync(join(repo, 'tests'), { recursive: true });
    const git = (...args: string[]): string =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@e', ...args], {
        cwd: repo,
        encoding: 'utf8',
      });
    writeFileSync(join(repo, 'pytest.ini'), '[pytest]\n');
    writeFileSync(join(repo, 'stats.py'), 'def one():\n    return 1\n');
    writeFileSync(
      join(repo, 'tests', 'test_stats.py'),
      'from stats import one\n\n\ndef test_one():\n    assert one() == 1\n',
    );
    git('init', '-q', '-b', 'main');
    git('add', '-A');
    git('commit', '-qm', 'base');
    const base = git('rev-parse', 'HEAD').trim();
    // The test patch: a new test in tests/test_stats.py.
    writeFileSync(
      join(repo, 'tests', 'test_stats.py'),
      'from stats import one\n\n\ndef test_one():\n    assert one() == 1\n\n\ndef test_two():\n    assert one() + one() == 2\n',
    );
    const testPatch = git('diff');
    git('checkout', '-q', '--', '.');
    // The model's patch: tests/ a link to the host folder, and a setup that fails.
    git('rm', '-rq', 'tests');
    execFileSync('ln', ['-s', host, join(repo, 'tests')]);
    mkdirSync(join(repo, '.github'));
    writeFileSync(join(repo, '.github', 'issue-agent.yml'), 'setup:\n  - exit 7\n');
    git('add', '-A');
    const modelPatch = git('diff', '--cached', '--binary');
    git('reset', '-q', '--hard');
    assert.match(modelPatch, /new file mode 120000/);

    const [task] = parseTasks(
      JSON.stringify({
        instance_id: 'attack',
        repo_path: repo,
        base_commit: base,
        problem_statement: 'x',
        test_patch: testPatch,
        FAIL_TO_PASS: ['tests/test_stats.py::test_two'],
        PASS_TO_PASS: ['tests/test_stats.py::test_one'],
      }),
      root,
    );
    assert.ok(task);
    const env = readAgentEnv({
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ISSUE_AGENT_ENV_CACHE: 'off',
    });
    const result = await grade({
      task,
      repo,
      patch: modelPatch,
      sandbox: { backend: await loadBackend('local'), home: process.env.HOME ?? null, setupOff: null },
      env,
      setup: true,
      folder: join(root, 'out'),
      key: 'grade-attack',
      hide: [],
      cacheKey: 'eval:attack',
      logger: pino({ level: 'silent' }),
    });
    // The host folder is as it was: nothing deleted, nothing written through the link.
    assert.equal(readFileSync(join(host, 'test_stats.py'), 'utf8'), 'HOST FILE\n');
    assert.deepEqual(execFileSync('ls', ['-A', host], { encoding: 'utf8' }).trim().split('\n'), [
      'test_stats.py',
    ]);
    assert.equal(existsSync(join(root, 'out', 'tests')), false);
    // Grading ran on an environment made from the base commit (the failing setup never ran), reset
    // the test files (the link is gone) and graded the tests.
    assert.equal(result.status, 'resolved', JSON.stringify(result));
  }),
);
