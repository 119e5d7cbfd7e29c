/**
 * Host git against a hostile repository config. Each attack plants a payload that would `touch` a
 * marker file, and is checked three ways:
 * - live: plain git with the pins the host used before (hooks, fsmonitor, file protocol only) runs
 *   the payload during the publish sequence, so the attack is real and not a vacuous pass;
 * - sealed: the host notices that the clone's `.git/config` is not what it wrote and refuses every
 *   command with PristineTamperedError, before any git runs (marker absent, nothing pushed);
 * - seal forged too (the attacker rewrote the seal as well): where a pin covers the key, the pins
 *   alone still keep the payload from running. Filter drivers cannot be pinned; there the seal and
 *   the clone's location are the defence, and the test says so by not claiming otherwise.
 * The remote is the GitHub simulator's smart-HTTP server on loopback (http, allowed because the
 * remote URL is http), the sequence is the one publish() runs.
 */
import { attackTest } from '../security/support.js';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import {
  baseGitEnv,
  HostGit,
  HostGitError,
  pinnedConfig,
  PristineTamperedError,
} from '../../src/github/host-git.js';
import { pristineDir, pristineRoot, sealClone, sealPath } from '../../src/github/pristine-clone.js';
import { git, installationToken, makeSourceRepo, tempDir, type TempDir } from '../github-sim/helpers.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';

const run = promisify(execFile);
const BOT = { name: 'issue-agent[bot]', email: '1+issue-agent[bot]@users.noreply.github.com' };
const AT = '2026-01-02T03:04:05Z';

let sim: GitHubSim;
let source: TempDir;
let work: TempDir;
let url: string;
let token: string;
let diff: string;
let diffWithAttributes: string;
let base: string;
const host = new HostGit(process.env.PATH ?? '/usr/bin:/bin', (t) => t);

before(async () => {
  sim = await startGitHubSimulator();
  source = await makeSourceRepo({ 'README.md': '# demo\n', 'src/a.js': 'export const a = 1;\n' });
  await sim.createRepo({ owner: 'acme', name: 'demo', sourceDir: source.dir });
  url = `${sim.url}/acme/demo.git`;
  token = (await installationToken(sim)).token;
  work = tempDir('host-git-');
  base = (await git(source.dir, ['rev-parse', 'HEAD'])).trim();
  diff = await diffOf({ 'src/a.js': 'export const a = 2;\n' });
  diffWithAttributes = await diffOf({
    'src/a.js': 'export const a = 3;\n',
    '.gitattributes': '* filter=x\n',
  });
});

after(async () => {
  await sim.close();
  source.cleanup();
  work.cleanup();
});

/** The agent's change as the event log holds it: a binary diff against the base commit. */
async function diffOf(files: Record<string, string>): Promise<string> {
  const dir = join(tempDir('host-git-diff-').dir, 'repo');
  cpSync(source.dir, dir, { recursive: true });
  for (const [path, text] of Object.entries(files)) writeFileSync(join(dir, path), text);
  await git(dir, ['add', '-A']);
  const d = await git(dir, ['diff', '--cached', '--binary']);
  rmSync(dirname(dir), { recursive: true, force: true });
  return d;
}

let n = 0;
/** A fresh sealed pristine clone, a marker path and a payload script that creates the marker. */
async function freshClone(): Promise<{ dir: string; marker: string; payload: string }> {
  n++;
  const dir = join(work.dir, 'pristine', `job-${n}`);
  assert.equal(
    await host.ensurePristine(dir, { url, branch: 'main', token: () => Promise.resolve(token) }),
    'cloned',
  );
  const marker = join(work.dir, `marker-${n}`);
  const payload = join(work.dir, `payload-${n}.sh`);
  writeFileSync(payload, `#!/bin/sh\ntouch '${marker}'\nexit 1\n`);
  chmodSync(payload, 0o755);
  return { dir, marker, payload };
}

/** What the host did before: git with only these pins, the clean environment, `-C dir`. */
async function oldGit(dir: string, args: readonly string[], input?: string): Promise<void> {
  const old = [
    '-c',
    'core.hooksPath=/dev/null',
    '-c',
    'core.fsmonitor=false',
    '-c',
    'protocol.file.allow=never',
  ];
  const child = execFile('git', [...old, '-C', dir, ...args], {
    env: {
      ...baseGitEnv(process.env.PATH ?? '/usr/bin:/bin'),
      XDG_CONFIG_HOME: undefined,
      GIT_ATTR_NOSYSTEM: undefined,
      GIT_AUTHOR_NAME: BOT.name,
      GIT_AUTHOR_EMAIL: BOT.email,
      GIT_COMMITTER_NAME: BOT.name,
      GIT_COMMITTER_EMAIL: BOT.email,
    },
  });
  child.stdin?.on('error', () => undefined);
  child.stdin?.end(input ?? '');
  await new Promise<void>((resolve) =>
    child.once('close', () => {
      resolve();
    }),
  );
}

/** The publish sequence as the host ran it before (every step attempted, failures ignored). */
async function oldPublish(dir: string, change: string): Promise<void> {
  await oldGit(dir, ['checkout', '--quiet', '--force', '-B', 'issue-agent/issue-1', base]);
  await oldGit(dir, ['clean', '-q', '-fdx']);
  await oldGit(dir, ['apply', '--index', '--binary', '--whitespace=nowarn', '-'], change);
  await oldGit(dir, ['diff', '--cached', '--raw', '--numstat', '-z', '-M', base]);
  await oldGit(dir, ['commit', '--quiet', '--no-verify', '--allow-empty-message', '-F', '-'], 'fix');
  await oldGit(dir, ['ls-remote', '--heads', 'origin', 'refs/heads/issue-agent/issue-1']);
}

/** The publish sequence as publish() runs it now (the first failure ends it, as in publish()). */
async function publishSequence(dir: string, change: string, branch = 'issue-agent/issue-1'): Promise<string> {
  await host.ensurePristine(dir, { url, branch: 'main', token: () => Promise.resolve(token) });
  await host.resetTo(dir, branch, base);
  await host.applyDiff(dir, change);
  await host.stagedChanges(dir, base);
  const head = await host.commit(dir, 'Fix #1\n', BOT, AT);
  const tip = await host.remoteBranch(dir, branch, token);
  await host.push(dir, branch, token, tip ?? undefined);
  return head;
}

/** Every host operation on the clone is refused with PristineTamperedError naming what changed. */
async function assertRefused(dir: string, what: RegExp): Promise<void> {
  const ops: [string, () => Promise<unknown>][] = [
    [
      'ensurePristine',
      () => host.ensurePristine(dir, { url, branch: 'main', token: () => Promise.resolve(token) }),
    ],
    ['resetTo', () => host.resetTo(dir, 'issue-agent/issue-1', base)],
    ['applyDiff', () => host.applyDiff(dir, diff)],
    ['stagedChanges', () => host.stagedChanges(dir, base)],
    ['commit', () => host.commit(dir, 'Fix #1\n', BOT, AT)],
    ['revParse', () => host.revParse(dir, 'HEAD')],
    ['remoteBranch', () => host.remoteBranch(dir, 'issue-agent/issue-1', token)],
    ['push', () => host.push(dir, 'issue-agent/issue-1', token)],
    ['copyForSandbox', () => host.copyForSandbox(dir, join(work.dir, `copy-${n}`), base, url)],
  ];
  for (const [name, op] of ops) {
    await assert.rejects(op, (error: unknown) => {
      assert.ok(error instanceof PristineTamperedError, `${name}: ${String(error)}`);
      assert.ok(error instanceof HostGitError && !error.transient, `${name}: a permanent failure`);
      assert.match(error.message, what, name);
      assert.match(error.message, /changed by something other than the host/, name);
      return true;
    });
  }
}

function gitConfig(dir: string, text: string): void {
  appendFileSync(join(dir, '.git', 'config'), text);
}

describe('pins and environment', () => {
  test('system, global and XDG config and system attributes are off; http only for an http remote', () => {
    const env = baseGitEnv('/usr/bin');
    assert.equal(env.GIT_CONFIG_NOSYSTEM, '1');
    assert.equal(env.GIT_CONFIG_GLOBAL, '/dev/null');
    assert.equal(env.GIT_ATTR_NOSYSTEM, '1');
    assert.equal(env.HOME, '/nonexistent');
    assert.equal(env.XDG_CONFIG_HOME, '/nonexistent');
    assert.ok(!existsSync('/nonexistent'), 'the home and XDG folders git is given do not exist');
    const https = pinnedConfig('https://github.com/a/b.git').join(' ');
    for (const pin of [
      'core.hooksPath=/dev/null',
      'core.fsmonitor=false',
      'core.sshCommand=/bin/false',
      'core.attributesFile=/dev/null',
      'diff.external=/bin/false',
      'commit.gpgSign=false',
      'gpg.program=/bin/false',
      'gpg.ssh.program=/bin/false',
      'gpg.x509.program=/bin/false',
      'credential.helper=',
      'protocol.allow=never',
      'protocol.ext.allow=never',
      'protocol.file.allow=never',
      'protocol.https.allow=always',
      'protocol.http.allow=never',
    ]) {
      assert.ok(https.includes(`-c ${pin}`), pin);
    }
    assert.ok(pinnedConfig(null).includes('protocol.http.allow=never'));
    assert.ok(pinnedConfig('http://127.0.0.1:9/a/b.git').includes('protocol.http.allow=always'));
  });

  attackTest(
    'a poisoned $HOME, XDG_CONFIG_HOME, system config path and GIT_CONFIG_* in the host process reach no host git',
    async () => {
      const poison = join(work.dir, 'poison');
      const marker = join(poison, 'marker');
      const payload = join(poison, 'payload.sh');
      mkdirSync(join(poison, 'xdg', 'git'), { recursive: true });
      writeFileSync(payload, `#!/bin/sh\ntouch '${marker}'\nexit 1\n`);
      chmodSync(payload, 0o755);
      const config = `[core]\n\tfsmonitor = ${payload}\n[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = ${payload}\n[filter "x"]\n\tclean = ${payload}\n\tsmudge = ${payload}\n`;
      writeFileSync(join(poison, '.gitconfig'), config);
      writeFileSync(join(poison, 'xdg', 'git', 'config'), config);
      writeFileSync(join(poison, 'xdg', 'git', 'attributes'), '* filter=x\n');
      writeFileSync(join(poison, 'system'), config);
      const poisoned: Record<string, string> = {
        HOME: poison,
        XDG_CONFIG_HOME: join(poison, 'xdg'),
        GIT_CONFIG_SYSTEM: join(poison, 'system'),
        GIT_CONFIG_GLOBAL: join(poison, '.gitconfig'),
        GIT_CONFIG_PARAMETERS: `'core.fsmonitor'='${payload}'`,
        GIT_CONFIG_COUNT: '1',
        GIT_CONFIG_KEY_0: 'gpg.program',
        GIT_CONFIG_VALUE_0: payload,
        GIT_EXTERNAL_DIFF: payload,
      };
      const saved = new Map(Object.keys(poisoned).map((k) => [k, process.env[k]]));
      Object.assign(process.env, poisoned);
      try {
        // Live: a git that inherits this environment runs the payload.
        const probe = join(work.dir, 'probe');
        await run('git', ['init', '-q', probe]);
        writeFileSync(join(probe, 'f'), 'x\n');
        await run('git', ['-C', probe, 'add', 'f']).catch(() => undefined);
        assert.ok(existsSync(marker), 'the poisoned environment is live for a git that inherits it');
        rmSync(marker);

        n++;
        const dir = join(work.dir, 'pristine', `env-${n}`);
        const head = await publishSequence(dir, diffWithAttributes, 'issue-agent/env');
        assert.match(head, /^[0-9a-f]{40}$/);
        assert.equal(await host.remoteBranch(dir, 'issue-agent/env', token), head, 'pushed');
      } finally {
        for (const [k, v] of saved) {
          if (v === undefined) Reflect.deleteProperty(process.env, k);
          else process.env[k] = v;
        }
      }
      assert.ok(!existsSync(marker), 'no payload ran');
    },
  );
});

describe('where the pristine clone lives', () => {
  test('beside the jobs folder, never inside a job folder; its seal outside the clone', () => {
    const jobsDir = join(work.dir, 'state', 'jobs');
    const dir = pristineDir(jobsDir, 'r1-i2-abc');
    assert.equal(dir, join(resolve(work.dir), 'state', 'pristine', 'r1-i2-abc'));
    assert.equal(pristineRoot(jobsDir), dirname(dir));
    assert.ok(relative(resolve(jobsDir), dir).startsWith('..'), 'not under the jobs folder');
    assert.ok(relative(dir, sealPath(dir)).startsWith('..'), 'the seal is not inside the clone');
    assert.throws(() => pristineDir(jobsDir, '../x'), /unexpected job id/);
  });
});

describe('publish sequence', () => {
  test('clones once, is found again after a crash, applies, commits deterministically and pushes', async () => {
    n++;
    const dir = join(work.dir, 'pristine', `ok-${n}`);
    const fetches = (): number => sim.requests.filter((r) => r.path === '/acme/demo.git/info/refs').length;
    assert.equal(
      await host.ensurePristine(dir, { url, branch: 'main', token: () => Promise.resolve(token) }),
      'cloned',
    );
    const afterClone = fetches();
    // A resumed job finds the clone (no token asked, no request to GitHub).
    assert.equal(
      await host.ensurePristine(dir, {
        url,
        branch: 'main',
        token: () => Promise.reject(new Error('no token needed')),
      }),
      'found',
    );
    assert.equal(fetches(), afterClone);
    await host.resetTo(dir, 'issue-agent/issue-9', base);
    await host.applyDiff(dir, diff);
    assert.match(await host.stagedChanges(dir, base), /src\/a\.js/);
    const head = await host.commit(dir, 'Fix #9\n', BOT, AT);
    // The same run again (a retry after a crash) makes the same commit.
    await host.resetTo(dir, 'issue-agent/issue-9', base);
    await host.applyDiff(dir, diff);
    assert.equal(await host.commit(dir, 'Fix #9\n', BOT, AT), head);
    assert.equal(await host.remoteBranch(dir, 'issue-agent/issue-9', token), null);
    await host.push(dir, 'issue-agent/issue-9', token);
    assert.equal(await host.remoteBranch(dir, 'issue-agent/issue-9', token), head);
    assert.ok(sim.pushes.some((p) => p.refs.includes('refs/heads/issue-agent/issue-9')));
    // Nothing the host ran changed the sealed files.
    await host.verifyPristine(dir);
  });

  test('a clone whose seal is missing (crash between clone and seal) is cloned again', async () => {
    const { dir } = await freshClone();
    rmSync(sealPath(dir));
    gitConfig(dir, '[core]\n\tfsmonitor = /bin/false\n');
    assert.equal(
      await host.ensurePristine(dir, { url, branch: 'main', token: () => Promise.resolve(token) }),
      'cloned',
    );
    await host.verifyPristine(dir);
    assert.doesNotMatch(readConfig(dir), /fsmonitor/, 'the replaced clone has the config git wrote');
  });
});

interface Attack {
  readonly name: string;
  /** Plants the payload in the clone (`payload` touches the marker). Returns the remote URL it sets, if any. */
  readonly plant: (dir: string, payload: string) => string | undefined;
  readonly change: () => string;
  /** Whether the publish sequence as the host ran it before runs the payload. */
  readonly liveBefore: boolean;
  /** Whether the pins alone (seal forged too) keep the payload from running. */
  readonly pinned: boolean;
}

const attacks: Attack[] = [
  {
    name: 'core.fsmonitor',
    plant: (dir, payload) => {
      gitConfig(dir, `[core]\n\tfsmonitor = ${payload}\n`);
      return undefined;
    },
    change: () => diff,
    // The old pins already covered fsmonitor; the seal now refuses the changed config as well.
    liveBefore: false,
    pinned: true,
  },
  {
    name: 'gpg.program with commit.gpgSign=true',
    plant: (dir, payload) => {
      gitConfig(dir, `[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = ${payload}\n`);
      return undefined;
    },
    change: () => diff,
    liveBefore: true,
    pinned: true,
  },
  {
    name: 'a filter driver named by a .gitattributes in the applied diff',
    plant: (dir, payload) => {
      gitConfig(dir, `[filter "x"]\n\tclean = ${payload}\n\tsmudge = ${payload}\n`);
      return undefined;
    },
    change: () => diffWithAttributes,
    liveBefore: true,
    pinned: false,
  },
  {
    name: 'diff.external',
    plant: (dir, payload) => {
      gitConfig(dir, `[diff]\n\texternal = ${payload}\n`);
      return undefined;
    },
    change: () => diff,
    // The publish sequence prints no patch, so this is not live there; the pin is for any that does.
    liveBefore: false,
    pinned: true,
  },
  {
    name: 'core.sshCommand with an ssh remote',
    plant: (dir, payload) => {
      const ssh = 'ssh://git@example.invalid/acme/demo.git';
      gitConfig(dir, `[core]\n\tsshCommand = ${payload}\n`);
      writeFileSync(join(dir, '.git', 'config'), readConfig(dir).replace(`url = ${url}`, `url = ${ssh}`));
      return ssh;
    },
    change: () => diff,
    liveBefore: true,
    pinned: true,
  },
  {
    name: 'include.path to a file that sets gpg.program and commit.gpgSign',
    plant: (dir, payload) => {
      const included = join(dirname(payload), `included-${n}.cfg`);
      writeFileSync(included, `[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = ${payload}\n`);
      gitConfig(dir, `[include]\n\tpath = ${included}\n`);
      return undefined;
    },
    change: () => diff,
    liveBefore: true,
    pinned: true,
  },
];

function readConfig(dir: string): string {
  return readFileSync(join(dir, '.git', 'config'), 'utf8');
}

describe('a pristine clone whose config was poisoned', () => {
  for (const attack of attacks) {
    attackTest(attack.name, async () => {
      const { dir, marker, payload } = await freshClone();
      const remote = attack.plant(dir, payload);
      const pushesBefore = sim.pushes.length;

      // Live: the same poisoned clone, copied, under the host's old pins.
      const copy = `${dir}-old`;
      cpSync(dir, copy, { recursive: true });
      await oldPublish(copy, attack.change());
      assert.equal(existsSync(marker), attack.liveBefore, 'the payload runs under the old pins');
      rmSync(marker, { force: true });

      // Sealed: refused before git runs.
      await assertRefused(dir, /\.git\/config was changed/);
      await assert.rejects(publishSequence(dir, attack.change()), PristineTamperedError);
      assert.ok(!existsSync(marker), 'no payload ran');
      assert.equal(sim.pushes.length, pushesBefore, 'nothing was pushed');

      // Seal forged as well: the pins alone.
      if (attack.pinned) {
        await sealClone(dir, remote ?? url);
        await publishSequence(dir, attack.change(), `issue-agent/forged-${n}`).catch((error: unknown) => {
          // An ssh remote is refused by protocol before any program would run.
          if (remote === undefined) throw error;
          assert.ok(error instanceof HostGitError);
          assert.match(error.message, /transport 'ssh' not allowed/);
        });
        assert.ok(!existsSync(marker), 'the pins alone keep the payload from running');
      }
    });
  }

  test('diff.external (seal forged) runs for a patch-printing diff under the old pins, never under the new ones', async () => {
    const { dir, marker, payload } = await freshClone();
    gitConfig(dir, `[diff]\n\texternal = ${payload}\n`);
    await sealClone(dir, url);
    await host.resetTo(dir, 'x', base);
    await host.applyDiff(dir, diff);
    await oldGit(dir, ['diff', '--cached', base]);
    assert.ok(existsSync(marker), 'live under the old pins');
    rmSync(marker);
    // Pinned to /bin/false: a diff that would print a patch without --no-ext-diff fails closed.
    await assert.rejects(host.inPristine(dir, ['diff', '--cached', base]), /external diff died/);
    assert.ok(!existsSync(marker));
    assert.match(await host.stagedChanges(dir, base), /src\/a\.js/);
    assert.ok(!existsSync(marker));
  });

  attackTest(
    'attributes in .git/info, a per-worktree config, a commondir or alternates are refused',
    async () => {
      const cases: [string, (dir: string) => void, RegExp][] = [
        [
          'info/attributes',
          (d) => {
            writeFileSync(join(d, '.git', 'info', 'attributes'), '* filter=x\n');
          },
          /\.git\/info\/attributes appeared/,
        ],
        [
          'config.worktree',
          (d) => {
            writeFileSync(join(d, '.git', 'config.worktree'), '[core]\n\tfsmonitor = x\n');
          },
          /\.git\/config\.worktree appeared/,
        ],
        [
          'commondir',
          (d) => {
            writeFileSync(join(d, '.git', 'commondir'), '/tmp\n');
          },
          /\.git\/commondir appeared/,
        ],
        [
          'alternates',
          (d) => {
            writeFileSync(join(d, '.git', 'objects', 'info', 'alternates'), '/tmp\n');
          },
          /alternates appeared/,
        ],
        [
          'config removed',
          (d) => {
            rmSync(join(d, '.git', 'config'));
          },
          /\.git\/config was removed/,
        ],
        [
          'config a symlink',
          (d) => {
            rmSync(join(d, '.git', 'config'));
            symlinkSync('/dev/null', join(d, '.git', 'config'));
          },
          /\.git\/config is a symbolic link/,
        ],
        [
          '.git a gitfile',
          (d) => {
            rmSync(join(d, '.git'), { recursive: true });
            writeFileSync(join(d, '.git'), `gitdir: ${work.dir}\n`);
          },
          /its \.git is not a plain folder/,
        ],
        [
          'seal garbled',
          (d) => {
            writeFileSync(sealPath(d), '{');
          },
          /not a valid seal/,
        ],
      ];
      for (const [name, tamper, what] of cases) {
        const { dir } = await freshClone();
        tamper(dir);
        await assert.rejects(host.applyDiff(dir, diff), (error: unknown) => {
          assert.ok(error instanceof PristineTamperedError, `${name}: ${String(error)}`);
          assert.match(error.message, what, name);
          return true;
        });
        await assert.rejects(
          host.ensurePristine(dir, { url, branch: 'main', token: () => Promise.resolve(token) }),
          PristineTamperedError,
          name,
        );
      }
    },
  );
});
