import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadBackend } from '../../src/sandbox/backends.js';
import { readAgentEnv } from '../../src/config/agent-env.js';
import { openTestPlace } from '../../src/eval/grade.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

dockerTest(
  "grading's sandbox runs the harness's shell alone: no agent shell is started in it",
  async (_docker, t) => {
    const root = mkdtempSync(join(tmpdir(), 'ia-grade-place-'));
    t.after(() => {
      rmSync(root, { recursive: true, force: true });
    });
    const repo = join(root, 'repo');
    mkdirSync(repo);
    const git = (...args: string[]): string =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@e', ...args], {
        cwd: repo,
        encoding: 'utf8',
      });
    writeFileSync(join(repo, 'pytest.ini'), '[pytest]\n');
    git('init', '-q', '-b', 'main');
    git('add', '-A');
    git('commit', '-qm', 'base');
    const place = await openTestPlace({
      sandbox: { backend: await loadBackend('docker'), home: process.env.HOME ?? null, setupOff: null },
      env: readAgentEnv({ PATH: process.env.PATH, HOME: process.env.HOME, ISSUE_AGENT_ENV_CACHE: 'off' }),
      setup: true,
      folder: join(root, 'out'),
      key: 'grade-place',
      hide: [],
      cacheKey: 'eval:grade-place',
      repo,
      base: git('rev-parse', 'HEAD').trim(),
    });
    try {
      const r = await place.sandbox.harnessExec(
        // The agent's shells are `bash`; the harness's runs its own copy (`harness-bash`).
        'a=0; h=0; for f in /proc/[0-9]*/comm; do c=$(cat "$f" 2>/dev/null); [ "$c" = bash ] && a=$((a+1)); [ "$c" = harness-bash ] && h=$((h+1)); done; echo "$a $h"',
        { timeoutMs: 10_000 },
      );
      assert.equal(r.output.trim(), '0 1');
    } finally {
      await place.close();
    }
  },
  { timeout: 120_000 },
);
