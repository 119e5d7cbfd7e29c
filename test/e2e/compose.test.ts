import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { COMPOSE_IMAGES, composeMissing } from '../support/compose.js';
import { ROOT } from '../support/pipeline.js';
import { dockerEngine } from '../sandbox/docker/docker-test-support.js';

/** Set in CI: a missing engine, docker-compose or image is a failure, not a skip. */
const required = process.env.ISSUE_AGENT_REQUIRE_DOCKER === '1';
const engine = dockerEngine();
const missing = 'reason' in engine ? engine.reason : await composeMissing();

function composeContainers(project: string): string[] {
  return execFileSync(
    'docker',
    ['ps', '--all', '--quiet', '--filter', `label=com.docker.compose.project=${project}`],
    { encoding: 'utf8' },
  )
    .split('\n')
    .filter((l) => l !== '');
}

test(
  "the README's demo flow against compose.yaml: the production image (App and a worker, as its non-root user), Redis and PostgreSQL built offline, brought up, a labelled issue becomes a pull request, the run served from PostgreSQL; everything taken down after",
  { timeout: 900_000, skip: missing !== null && !required ? missing : false },
  async () => {
    assert.equal(missing, null, `ISSUE_AGENT_REQUIRE_DOCKER=1 but ${missing ?? ''}`);
    const user = execFileSync(
      'docker',
      ['image', 'inspect', '--format', '{{.Config.User}}', COMPOSE_IMAGES.app],
      {
        encoding: 'utf8',
      },
    );
    assert.equal(user.trim(), 'issue-agent');
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'scripts', 'demo.ts'), '--compose'],
      {
        cwd: ROOT,
        env: { ...process.env, ANTHROPIC_API_KEY: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0, out);
    assert.match(out, /pull request #\d+: "Fix #1: average\(\) rounds/);
    assert.match(out, /run r\d+-i1-\w+: \w+, outcome resolved, \d+ steps \(from PostgreSQL\)/);
    const project = /compose: project (\w+) up/.exec(out)?.[1];
    assert.ok(project, out);
    // Taken down: no container of the project is left, nor a volume.
    assert.deepEqual(composeContainers(project), []);
    const volumes = execFileSync('docker', ['volume', 'ls', '--quiet', '--filter', `name=${project}_`], {
      encoding: 'utf8',
    });
    assert.equal(volumes.trim(), '');
  },
);
