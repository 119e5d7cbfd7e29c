import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import {
  checkPolicy,
  matchesGlob,
  parseNumstat,
  parseRawNumstat,
  type FileChange,
  type PolicyResult,
} from '../../src/publish/policy.js';
import { repoPolicySchema } from '../../src/config/repo-policy.js';

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

test('the policy schema has documented defaults and refuses nonsense', () => {
  assert.deepEqual(defaults, {
    blockedPaths: [],
    allowWorkflowChanges: false,
    allowGithubChanges: false,
    allowGitlinks: false,
    maxChangedLines: 2000,
    maxChangedFiles: 50,
  });
  assert.equal(repoPolicySchema.safeParse({ maxChangedLines: -1 }).success, false);
  assert.equal(repoPolicySchema.safeParse({ blockedPaths: ['/'] }).success, false);
  assert.equal(repoPolicySchema.safeParse({ allowWorkflowChanges: 'yes' }).success, false);
});

test('workflow changes are blocked, by either side of a rename and whatever the case of .github', () => {
  assert.deepEqual(checkPolicy([change('src/a.ts')], defaults), { ok: true });
  assert.deepEqual(rules(checkPolicy([change('.github/workflows/ci.yml')], defaults)), [
    'workflow:.github/workflows/ci.yml',
  ]);
  assert.deepEqual(rules(checkPolicy([change('.GitHub/workflows/x.yaml')], defaults)), [
    'workflow:.GitHub/workflows/x.yaml',
  ]);
  assert.deepEqual(rules(checkPolicy([change('.github/workflows')], defaults)), [
    'workflow:.github/workflows',
  ]);
  const moveOut = checkPolicy([change('ci-old.yml', { oldPath: '.github/workflows/ci.yml' })], defaults);
  assert.deepEqual(rules(moveOut), ['workflow:.github/workflows/ci.yml']);
  assert.ok(!moveOut.ok && moveOut.violations[0]?.detail.includes('source of a rename'));
  const moveIn = checkPolicy([change('.github/workflows/evil.yml', { oldPath: 'docs/evil.yml' })], defaults);
  assert.deepEqual(rules(moveIn), ['workflow:.github/workflows/evil.yml']);
  assert.deepEqual(
    checkPolicy([change('.github/workflows/ci.yml')], { ...defaults, allowWorkflowChanges: true }),
    { ok: true },
  );
  assert.deepEqual(
    checkPolicy([change('.github/dependabot.yml'), change('src/.github/workflows/x.yml')], {
      ...defaults,
      allowGithubChanges: true,
    }),
    { ok: true },
  );
});

test('glob semantics: * in a segment, ** across, trailing / for directories, unanchored names', () => {
  const cases: [pattern: string, path: string, expected: boolean][] = [
    ['*.pem', 'key.pem', true],
    ['*.pem', 'deep/dir/key.pem', true],
    ['*.pem', 'key.pem.txt', false],
    ['config/*.yml', 'config/a.yml', true],
    ['config/*.yml', 'config/sub/a.yml', false],
    ['config/*.yml', 'x/config/a.yml', false],
    ['/config/*.yml', 'config/a.yml', true],
    ['docs/**/*.md', 'docs/a.md', true],
    ['docs/**/*.md', 'docs/x/y/a.md', true],
    ['docs/**/*.md', 'docs/x/y/a.txt', false],
    ['docs/**', 'docs/a', true],
    ['docs/**', 'docs', false],
    ['**/secret.txt', 'secret.txt', true],
    ['**/secret.txt', 'a/b/secret.txt', true],
    ['secrets/', 'secrets/prod.env', true],
    ['secrets/', 'app/secrets/prod.env', true],
    ['secrets/', 'secrets', false],
    ['secrets', 'secrets', true],
    ['secrets', 'secrets/a/b', true],
    ['infra/prod/', 'infra/prod/main.tf', true],
    ['infra/prod/', 'other/infra/prod/main.tf', false],
    ['file?.txt', 'file1.txt', true],
    ['file?.txt', 'file/.txt', false],
    ['a.b', 'aXb', false],
    ['src/(x)+[y].ts', 'src/(x)+[y].ts', true],
    ['Makefile', 'makefile', false],
    ['.github/CODEOWNERS', '.GITHUB/CODEOWNERS', true],
    ['.github/CODEOWNERS', '.github/codeowners', false],
    ['**', 'anything/at/all', true],
  ];
  for (const [pattern, path, expected] of cases) {
    assert.equal(matchesGlob(path, pattern), expected, `${pattern} vs ${path}`);
  }
  const policy = { ...defaults, blockedPaths: ['*.pem', 'infra/'] };
  const r = checkPolicy(
    [
      change('a/key.pem'),
      change('infra/x.tf'),
      change('new.txt', { oldPath: 'infra/old.txt' }),
      change('ok.ts'),
    ],
    policy,
  );
  assert.deepEqual(rules(r), [
    'blocked_path:a/key.pem',
    'blocked_path:infra/x.tf',
    'blocked_path:infra/old.txt',
  ]);
  assert.ok(!r.ok && r.violations[0]?.detail.includes('"*.pem"'));
});

test('max lines and max files count every change, binary files as zero lines', () => {
  const policy = { ...defaults, maxChangedLines: 100, maxChangedFiles: 3 };
  assert.deepEqual(checkPolicy([change('a', { added: 60, deleted: 40 })], policy), { ok: true });
  assert.deepEqual(rules(checkPolicy([change('a', { added: 60, deleted: 41 })], policy)), ['max_lines:']);
  const four = ['a', 'b', 'c', 'd'].map((p) => change(p, { added: 0, deleted: 0, binary: true }));
  const r = checkPolicy(four, policy);
  assert.deepEqual(rules(r), ['max_files:']);
  assert.ok(!r.ok && r.violations[0]?.detail === '4 files changed, more than the limit of 3');
  const both = checkPolicy([...four, change('.github/workflows/x.yml', { added: 500 })], policy);
  assert.deepEqual(rules(both), ['workflow:.github/workflows/x.yml', 'max_lines:', 'max_files:']);
});

test('parseNumstat reads plain, renamed and binary records, and odd file names', () => {
  const text = [
    '3\t1\tsrc/a.ts',
    '-\t-\tassets/logo.png',
    '1\t1\t\0.github/workflows/ci.yml\0ci.yml',
    '-\t-\t\0img/old.bin\0img/new.bin',
    '0\t0\twith\ttab and\nnewline.txt',
    '',
  ].join('\0');
  assert.deepEqual(parseNumstat(text), [
    { path: 'src/a.ts', added: 3, deleted: 1, binary: false },
    { path: 'assets/logo.png', added: 0, deleted: 0, binary: true },
    { path: 'ci.yml', oldPath: '.github/workflows/ci.yml', added: 1, deleted: 1, binary: false },
    { path: 'img/new.bin', oldPath: 'img/old.bin', added: 0, deleted: 0, binary: true },
    { path: 'with\ttab and\nnewline.txt', added: 0, deleted: 0, binary: false },
  ]);
  assert.deepEqual(parseNumstat(''), []);
});

test('parseNumstat refuses output that is cut short or not from -z', () => {
  assert.throws(() => parseNumstat('3\t1\tsrc/a.ts\n'), { name: 'NumstatParseError' });
  assert.throws(() => parseNumstat('3\t1\tsrc/a.ts'), { name: 'NumstatParseError' });
  assert.throws(() => parseNumstat('1\t1\t\0old\0'), { name: 'NumstatParseError' });
  assert.throws(() => parseNumstat('x\t1\ta\0'), { name: 'NumstatParseError' });
  assert.throws(() => parseNumstat('-\t3\ta\0'), { name: 'NumstatParseError' });
});

function git(cwd: string, ...args: string[]): string {
  const r = spawnSync(
    'git',
    ['-c', 'user.email=t@example.com', '-c', 'user.name=t', '-c', 'core.autocrlf=false', ...args],
    {
      cwd,
      encoding: 'utf8',
    },
  );
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

test('the output of real git feeds straight into checkPolicy', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-numstat-'));
  try {
    const write = (p: string, content: string | Buffer): void => {
      mkdirSync(dirname(join(dir, p)), { recursive: true });
      writeFileSync(join(dir, p), content);
    };
    git(dir, 'init', '-q');
    const workflow = Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n');
    write('.github/workflows/ci.yml', `${workflow}\n`);
    write('logo.png', Buffer.from([0, 1, 2, 3, 0, 255]));
    write('src/a.ts', 'a\n');
    write('tab\there.txt', 'x\n');
    git(dir, 'add', '-A');
    git(dir, 'commit', '-qm', 'base');
    const base = git(dir, 'rev-parse', 'HEAD').trim();
    git(dir, 'mv', '.github/workflows/ci.yml', 'ci-disabled.yml');
    write('logo.png', Buffer.from([0, 9, 9, 9, 0, 255]));
    write('src/a.ts', 'a\nb\nc\n');
    write('tab\there.txt', 'y\n');
    git(dir, 'add', '-A');
    git(dir, 'commit', '-qm', 'change');
    const changes = parseRawNumstat(git(dir, 'diff', '--raw', '--numstat', '-z', '-M', base, 'HEAD'));
    const byPath = new Map(changes.map((c) => [c.path, c]));
    assert.deepEqual(byPath.get('ci-disabled.yml'), {
      path: 'ci-disabled.yml',
      oldPath: '.github/workflows/ci.yml',
      mode: '100644',
      added: 0,
      deleted: 0,
      binary: false,
    });
    assert.equal(byPath.get('logo.png')?.binary, true);
    assert.deepEqual(byPath.get('src/a.ts'), {
      path: 'src/a.ts',
      mode: '100644',
      added: 2,
      deleted: 0,
      binary: false,
    });
    assert.deepEqual(byPath.get('tab\there.txt'), {
      path: 'tab\there.txt',
      mode: '100644',
      added: 1,
      deleted: 1,
      binary: false,
    });
    assert.deepEqual(rules(checkPolicy(changes, defaults)), ['workflow:.github/workflows/ci.yml']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
