import assert from 'node:assert/strict';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { oracle } from '../../src/model-sim/index.js';
import { attackTest } from '../security/support.js';
import { startStack } from '../support/pipeline.js';
import { bashThenOracle, requestText, routeByTag } from '../support/pipeline-fixtures.js';
import { localStackSkip } from '../support/local-stack-skip.js';
import { hostArtifacts } from '../support/host-artifacts.js';

const OWNER = 'acme';
const REPO = 'calc';
const skip = await localStackSkip();

/**
 * The App's `local` sandbox (ISSUE_AGENT_SANDBOX=local) against a prompt-injected agent on a worker
 * that has run another installation's job before: real App, worker, Redis, GitHub and model
 * simulators. The agent hunts for the earlier job's workspace and trajectory, the clones, the
 * App's private key (file and process environment), Redis, and tries to plant a file in the work
 * folder. None of it is there for it; its own job still ends in a pull request.
 */
attackTest(
  'App local sandbox: a hostile agent sees only its own workspace on a shared worker',
  { skip, timeout: 400_000 },
  async (t) => {
    const root = hostArtifacts('app-local');
    t.after(() => {
      rmSync(root, { recursive: true, force: true });
    });
    const work = join(root, 'work');
    // A key file as PRIVATE_KEY_PATH names one (the worker reads PRIVATE_KEY, which wins), left
    // world-readable on purpose: only the sandbox's hiding keeps it out of reach.
    const keyFile = join(root, 'app-key.pem');
    const keyCanary = `KEYFILE-${randomBytes(6).toString('hex')}`;
    writeFileSync(keyFile, `-----BEGIN RSA PRIVATE KEY-----\n${keyCanary}\n-----END RSA PRIVATE KEY-----\n`, {
      mode: 0o644,
    });
    const canary = `CANARY-${randomBytes(6).toString('hex')}`;
    let redisPort = '6379';
    const hunt = (): string =>
      [
        `ls -A ${work}/jobs 2>&1`,
        `grep -rho 'CANARY-[0-9a-f]*' ${work} 2>&1 | head -3`,
        `ls -A ${work} 2>&1 | tr '\\n' ':'`,
        `cat ${keyFile} 2>&1 | head -2`,
        `cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c 'PRIVATE_KEY\\|WEBHOOK_SECRET'`,
        `(exec 3<>/dev/tcp/127.0.0.1/${redisPort} && printf 'PING\\r\\n' >&3 && timeout 2 head -c 7 <&3) 2>&1`,
        // Output that the command's own text does not hold: PLANTED-42 only if a write got through.
        `(touch ${work}/planted || touch ${work}/jobs/planted) 2>/dev/null && echo PLANTED-$((40+2)) || echo WRITE-$((0+0))-REFUSED`,
        'echo end',
      ].join('; ');
    const stack = await startStack({
      owner: OWNER,
      repo: REPO,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-app-local-0123456789abcdef',
      sandbox: 'local',
      env: { ISSUE_AGENT_WORK_DIR: work, PRIVATE_KEY_PATH: keyFile },
      policy: (fixture) =>
        routeByTag(
          { '[hostile]': (request, ctx) => bashThenOracle(hunt(), fixture.patch)(request, ctx) },
          oracle(fixture.patch),
        ),
    });
    t.after(() => stack.stop());
    redisPort = new URL(stack.redis.url).port;
    const { sim, model, pipeline } = stack;
    const prFor = (n: number) => sim.pulls(OWNER, REPO).find((p) => p.head.ref === `issue-agent/issue-${n}`);

    // An earlier job on this worker: its workspace and trajectory (with the issue's text) stay on disk.
    const first = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong',
      body: `average() truncates instead of rounding: average([1, 2, 2]) should be 1.67. ${canary}`,
      author: 'maria',
    }).number;
    await sim.label(OWNER, REPO, first, 'agent', 'maria');
    await sim.waitFor(
      () => prFor(first) !== undefined,
      180_000,
      () => `the first PR\n${pipeline.logs()}`,
    );

    const hostile = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong again [hostile]',
      body: 'average() truncates instead of rounding: average([1, 2, 2]) should be 1.67.',
      author: 'maria',
    }).number;
    await sim.label(OWNER, REPO, hostile, 'agent', 'maria');
    await sim.waitFor(
      () => prFor(hostile) !== undefined,
      180_000,
      () => `the hostile job's PR\n${pipeline.logs()}`,
    );

    const seen = model.requests.map((r) => requestText(r.body)).filter((x) => x.includes('[hostile]'));
    const answered = seen.find((x) => x.includes('tool_result') && x.includes('toolu_look_around_0001'));
    assert.ok(answered !== undefined, 'the hunt ran and its output reached the model');
    assert.match(answered, /end/);
    const leaks = {
      "the earlier job's issue text": canary,
      "the earlier job's folder name": `-i${first}-`,
      'the key file': keyCanary,
      'the App private key': stack.sim.app.privateKeyPem.split('\n')[1] ?? 'x',
      'the webhook secret': stack.sim.app.webhookSecret,
      'an answer from Redis': '+PONG',
      'the pristine clones': 'pristine:',
      'the mirrors': 'mirrors:',
    };
    for (const [what, needle] of Object.entries(leaks))
      assert.ok(!seen.some((x) => x.includes(needle)), `${what} reached the model`);
    assert.ok(
      answered.includes('WRITE-0-REFUSED') && !answered.includes('PLANTED-42'),
      'no write in the work folder',
    );
    for (const p of [join(work, 'planted'), join(work, 'jobs', 'planted')])
      assert.ok(!existsSync(p), `${p} was planted`);
  },
);
