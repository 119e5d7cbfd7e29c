import assert from 'node:assert/strict';
import { attackTest } from '../security/support.js';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import {
  checkPolicy,
  GITLINK_MODE,
  parseRawNumstat,
  type FileChange,
  type PolicyResult,
} from '../../src/publish/policy.js';
import { repoPolicySchema } from '../../src/config/repo-policy.js';

/**
 * A branch the App pushes into the base repository runs its `push` and same-repository
 * `pull_request` workflows with the repository's secrets. These tests pin the default policy that
 * keeps such a push from changing what those workflows run or who must review them.
 */
const defaults = repoPolicySchema.parse({});
const change = (path: string, extra: Partial<FileChange> = {}): FileChange => ({
  path,
  mode: '100644',
  added: 1,
  deleted: 0,
  ...extra,
});
const rules = (r: PolicyResult): string[] =>
  r.ok ? [] : r.violations.map((v) => `${v.rule}:${v.path ?? ''}`);

attackTest(
  'by default nothing under .github/ and no CODEOWNERS may change, only with allowGithubChanges',
  () => {
    const sensitive = [
      '.github/actions/x/action.yml',
      '.github/CODEOWNERS',
      '.github/dependabot.yml',
      '.GitHub/dependabot.yml',
      '.github/issue-agent.yml',
      '.github',
      'CODEOWNERS',
      'docs/CODEOWNERS',
      'docs/codeowners',
    ];
    for (const path of sensitive) {
      const r = checkPolicy([change(path)], defaults);
      assert.deepEqual(rules(r), [`github_config:${path}`], path);
      assert.ok(!r.ok && r.violations[0]?.detail.includes('allowGithubChanges'), path);
    }
    // Either side of a rename counts: moving a local action out disables what a workflow runs.
    assert.deepEqual(
      rules(checkPolicy([change('tools/action.yml', { oldPath: '.github/actions/x/action.yml' })], defaults)),
      ['github_config:.github/actions/x/action.yml'],
    );
    // Only the root .github/ and the places GitHub reads CODEOWNERS from.
    assert.deepEqual(
      checkPolicy(
        [change('src/.github/x.yml'), change('lib/CODEOWNERS'), change('.githubx/a'), change('github/a')],
        defaults,
      ),
      { ok: true },
    );
    const allowed = { ...defaults, allowGithubChanges: true };
    assert.deepEqual(
      checkPolicy(
        sensitive.map((p) => change(p)),
        allowed,
      ),
      { ok: true },
    );
  },
);

test('workflows keep their own switch: allowGithubChanges does not allow them, allowWorkflowChanges alone does', () => {
  const workflow = [change('.github/workflows/ci.yml')];
  assert.deepEqual(rules(checkPolicy(workflow, defaults)), ['workflow:.github/workflows/ci.yml']);
  assert.deepEqual(rules(checkPolicy(workflow, { ...defaults, allowGithubChanges: true })), [
    'workflow:.github/workflows/ci.yml',
  ]);
  assert.deepEqual(checkPolicy(workflow, { ...defaults, allowWorkflowChanges: true }), { ok: true });
  assert.deepEqual(
    rules(
      checkPolicy([...workflow, change('.github/CODEOWNERS')], { ...defaults, allowWorkflowChanges: true }),
    ),
    ['github_config:.github/CODEOWNERS'],
  );
});

attackTest('a gitlink that is added, moved or retargeted is refused by default; removing one is not', () => {
  const added = change('vendor/lib', { mode: GITLINK_MODE });
  const r = checkPolicy([added], defaults);
  assert.deepEqual(rules(r), ['gitlink:vendor/lib']);
  assert.ok(!r.ok && r.violations[0]?.detail.includes('allowGitlinks'));
  assert.deepEqual(rules(checkPolicy([change('b', { oldPath: 'a', mode: GITLINK_MODE })], defaults)), [
    'gitlink:b',
  ]);
  assert.deepEqual(checkPolicy([change('vendor/old', { mode: '000000', added: 0, deleted: 1 })], defaults), {
    ok: true,
  });
  assert.deepEqual(checkPolicy([added], { ...defaults, allowGitlinks: true }), { ok: true });
});

test('the policy is strict: a misspelt key is an error that names it, not a silent default', () => {
  const r = repoPolicySchema.safeParse({ allowWorkflowChange: true, blockedPath: ['x'] });
  assert.ok(!r.success);
  const text = r.error.issues.map((i) => i.message).join('; ');
  assert.match(text, /allowWorkflowChange\b/);
  assert.match(text, /blockedPath\b/);
  assert.equal(repoPolicySchema.safeParse({ allowGitlinks: 'no' }).success, false);
});

test('parseRawNumstat pairs raw and numstat records and refuses output it cannot pair', () => {
  const text = [
    ':100644 100644 975fbec 2795c87 M',
    '.github/CODEOWNERS',
    ':100644 100644 587be6b 587be6b R100',
    'f',
    'g',
    ':000000 160000 0000000 e9207f9 A',
    'sub',
    ':100644 000000 1234567 0000000 D',
    ':odd name',
    '1\t0\t.github/CODEOWNERS',
    '0\t0\t',
    'f',
    'g',
    '1\t0\tsub',
    '0\t3\t:odd name',
    '',
  ].join('\0');
  assert.deepEqual(parseRawNumstat(text), [
    { path: '.github/CODEOWNERS', mode: '100644', added: 1, deleted: 0, binary: false },
    { path: 'g', oldPath: 'f', mode: '100644', added: 0, deleted: 0, binary: false },
    { path: 'sub', mode: '160000', added: 1, deleted: 0, binary: false },
    { path: ':odd name', mode: '000000', added: 0, deleted: 3, binary: false },
  ]);
  assert.deepEqual(parseRawNumstat(''), []);
  const refuse = (t: string): void => {
    assert.throws(() => parseRawNumstat(t), { name: 'NumstatParseError' }, JSON.stringify(t));
  };
  refuse('1\t0\ta\0'); // numstat without --raw: the modes are unknown
  refuse(':000000 160000 0000000 e9207f9 A\0sub\0'); // --raw without --numstat
  refuse(':000000 160000 0000000 e9207f9 A\0sub\0' + '1\t0\tother\0'); // they disagree
  refuse(':100644 100644 587be6b 587be6b R100\0f\0'); // cut short
  refuse(':000000 160000 0000000 e9207f9 A\0sub\0' + '1\t0\tsub'); // no final NUL
});

function git(cwd: string, args: string[], input?: string): string {
  const r = spawnSync(
    'git',
    ['-c', 'user.email=t@example.com', '-c', 'user.name=t', '-c', 'core.autocrlf=false', ...args],
    { cwd, encoding: 'utf8', ...(input === undefined ? {} : { input }) },
  );
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

attackTest(
  'from a diff applied to the index as publish() does: a new submodule and .github files are refused',
  () => {
    const dir = mkdtempSync(join(tmpdir(), 'ia-policy-'));
    try {
      const work = join(dir, 'work');
      const pristine = join(dir, 'pristine');
      const write = (p: string, content: string): void => {
        mkdirSync(dirname(join(work, p)), { recursive: true });
        writeFileSync(join(work, p), content);
      };
      mkdirSync(work);
      git(work, ['init', '-q']);
      write('src/a.ts', 'a\n');
      write('.github/CODEOWNERS', '* @maintainers\n');
      git(work, ['add', '-A']);
      git(work, ['commit', '-qm', 'base']);
      const base = git(work, ['rev-parse', 'HEAD']).trim();
      git(dir, ['clone', '-q', work, pristine]);
      // The agent's side: edits, a local action, and a gitlink to a commit the diff never shows.
      write('src/a.ts', 'a\nb\n');
      write('.github/CODEOWNERS', '* @agent\n');
      write('.github/actions/x/action.yml', 'runs: {using: node20, main: x.js}\n');
      write('.github/dependabot.yml', 'version: 2\n');
      git(work, ['add', '-A']);
      git(work, ['update-index', '--add', '--cacheinfo', `160000,${base},vendor/lib`]);
      const diff = git(work, ['diff', '--cached', '--binary', base]);
      assert.match(diff, /new file mode 160000/);

      git(pristine, ['apply', '--index', '--binary', '--whitespace=nowarn', '-'], diff);
      const changes = parseRawNumstat(
        git(pristine, ['diff', '--cached', '--raw', '--numstat', '-z', '-M', base]),
      );
      assert.equal(changes.find((c) => c.path === 'vendor/lib')?.mode, GITLINK_MODE);
      assert.deepEqual(rules(checkPolicy(changes, defaults)).sort(), [
        'github_config:.github/CODEOWNERS',
        'github_config:.github/actions/x/action.yml',
        'github_config:.github/dependabot.yml',
        'gitlink:vendor/lib',
      ]);
      assert.deepEqual(checkPolicy(changes, { ...defaults, allowGithubChanges: true, allowGitlinks: true }), {
        ok: true,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
