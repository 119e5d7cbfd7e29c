import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { PgRunStore } from '../../src/events/pg-event-store.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { hang, oracle, reply, type MessagesRequest, type ModelSimulator } from '../../src/model-sim/index.js';
import { dockerEngine } from '../sandbox/docker/docker-test-support.js';
import { readSse } from '../server/helpers.js';
import type { GitHubSim } from '../support/github-sim/index.js';
import { KILL_LOCK, startStack, type Pipeline, type Proc, type Stack } from '../support/pipeline.js';
import {
  answeredTurns,
  faultOnceAt,
  requestText,
  routeByTag,
  taskText,
  workerThatStarted,
} from '../support/pipeline-fixtures.js';
import { postgresSkipReason, startPostgres, type TestPostgres } from '../support/postgres-server.js';
import { redisSkipReason } from '../support/redis-server.js';

const OWNER = 'acme';
const REPO = 'calc';
const MODEL_KEY = 'sk-ant-multi-host-key-0123456789';
const MAINTAINER = 'maria';
const SUMMARY = 'Rounded the mean to two places (round one of the multi-host test).';

function skipReason(): string | false {
  const engine = dockerEngine();
  if ('reason' in engine && !engine.required) return engine.reason;
  return redisSkipReason() || postgresSkipReason();
}

/**
 * Worker hosts that share nothing but Redis and one PostgreSQL run store
 * (ISSUE_AGENT_STORE_URL): each worker has its own work directory, the sandboxes are Docker.
 */
describe(
  'GitHub App on many hosts: one PostgreSQL run store',
  { skip: skipReason(), timeout: 900_000 },
  () => {
    let stack: Stack | undefined;
    let pg: TestPostgres | undefined;
    let runs: PgRunStore | undefined;
    let sim: GitHubSim;
    let model: ModelSimulator;
    let pipeline: Pipeline;
    let crash: ReturnType<typeof faultOnceAt>;

    const hosts = mkdtempSync(join(tmpdir(), 'ia-hosts-'));
    const hostDir = (proc: Proc): string => join(hosts, `host-${pipeline.workers.indexOf(proc)}`);

    before(async () => {
      const engine = dockerEngine();
      if ('reason' in engine) throw new Error(`ISSUE_AGENT_REQUIRE_DOCKER=1 but ${engine.reason}`);
      pg = await startPostgres();
      runs = await PgRunStore.connect(pg.url);
      const storeUrl = pg.url;
      stack = await startStack({
        owner: OWNER,
        repo: REPO,
        maintainer: { login: MAINTAINER, permission: 'admin' },
        modelKey: MODEL_KEY,
        workers: 2,
        sandbox: 'docker',
        env: { ...KILL_LOCK, ISSUE_AGENT_STORE_URL: storeUrl },
        // Each worker a host of its own: its own work directory (clones, workspaces, job folders).
        workerEnv: (n) => ({ ISSUE_AGENT_WORK_DIR: join(hosts, `host-${n}`) }),
        policy: (fixture) => {
          crash = faultOnceAt(3, hang, oracle(fixture.patch, { summary: SUMMARY }));
          return routeByTag(
            {
              '[followup]': () => reply().text('Nothing more to change here.'),
              '[crash]': crash.policy,
            },
            oracle(fixture.patch),
          );
        },
      });
      ({ sim, model, pipeline } = stack);
    });

    after(async () => {
      await stack?.stop();
      await runs?.close();
      await pg?.stop();
      rmSync(hosts, { recursive: true, force: true });
    });

    const prFor = (issue: number) =>
      sim.pulls(OWNER, REPO).filter((p) => p.head.ref === `issue-agent/issue-${issue}`);
    const jobOf = (issue: number): string => {
      const id = /job=([A-Za-z0-9-]+)/.exec(
        sim.comments(OWNER, REPO, issue).find((c) => c.body.includes('issue-agent:progress'))?.body ?? '',
      )?.[1];
      assert.ok(id !== undefined, 'the progress comment names the job');
      return id;
    };

    it('1–3. a worker SIGKILLed mid-run: a worker on another host resumes it from the store (workspace rebuilt from the checkpoint diff, no answered call repeated, one PR); the run server, with no job folder, streams it live and serves it after; a follow-up round on a third host sees round one', async () => {
      assert.ok(runs);
      const n = sim.createIssue(OWNER, REPO, {
        title: 'Average rounds wrong [crash]',
        body: 'average([1,2,2]) should be 1.67',
        author: MAINTAINER,
      }).number;
      await sim.label(OWNER, REPO, n, 'agent', MAINTAINER);
      await sim.waitFor(
        () =>
          /job=/.test(
            sim.comments(OWNER, REPO, n).find((c) => c.body.includes('issue-agent:progress'))?.body ?? '',
          ),
        60_000,
        () => `the job to be queued\n${pipeline.logs()}`,
      );
      // The run server (the App's; its work directory holds no job folder: the workers have their
      // own) streams the run live from the store, across the kill, to its end.
      const auth = { authorization: `Bearer ${pipeline.adminToken}` };
      await sim.waitFor(
        async () =>
          (await fetch(`${pipeline.appUrl}/api/runs/${jobOf(n)}`, { headers: auth })).status === 200,
        30_000,
        'the run server to know the run',
      );
      const live = new AbortController();
      let beforePr = 0;
      const streamed = fetch(`${pipeline.appUrl}/api/runs/${jobOf(n)}/stream`, {
        headers: { authorization: `Bearer ${pipeline.adminToken}` },
        signal: live.signal,
      }).then((res) => {
        assert.equal(res.status, 200);
        return readSse(
          res,
          (messages) => {
            const last = messages.at(-1);
            if (last?.event === 'agent-event' && prFor(n).length === 0) beforePr += 1;
            return last?.event === 'end';
          },
          live,
        );
      });
      await sim.waitFor(
        () => crash.fired(),
        120_000,
        () => `the job to reach turn 3\n${pipeline.logs()}`,
      );
      const victim = workerThatStarted(pipeline.workers, n);
      const survivor = pipeline.workers.find((w) => w !== victim);
      assert.ok(victim && survivor);
      const job = jobOf(n);
      // Before the kill: the run is in the store, with an edit checkpointed.
      const before = await runs.open(job);
      assert.ok(
        reduceState(before.events).lastCheckpoint !== null,
        'an edit was checkpointed before the kill',
      );
      victim.child.kill('SIGKILL');
      await victim.exited();

      await sim.waitFor(
        () => prFor(n).length > 0,
        180_000,
        () => `a PR after the resume\n${pipeline.logs()}`,
      );
      assert.equal(await pipeline.jobsEnded(n), 1);
      assert.equal(prFor(n).length, 1, 'exactly one PR');
      const turns = answeredTurns(model.requests, '[crash]');
      assert.deepEqual(turns, [...new Set(turns)], `a turn was asked twice: ${turns.join(',')}`);

      // The other host continued the same log: one resume, one outcome, read from PostgreSQL.
      const run = await runs.open(job);
      assert.equal(run.events.filter((e) => e.kind === 'run_resumed').length, 1);
      assert.equal(run.events.filter((e) => e.kind === 'outcome').length, 1);
      assert.equal(reduceState(run.events).outcome?.outcome, 'resolved');
      // It rebuilt the workspace on its own disk from the base commit and the checkpoint's diff, and
      // checked the result is the checkpoint's tree, file for file.
      const survivorLog = readFileSync(survivor.log, 'utf8');
      assert.match(survivorLog, /"from":"diff"[^\n]*workspace restored to the last checkpoint/);
      // The stream had every event once, in order, many of them while the job ran; the API serves
      // the whole trajectory after.
      const messages = await Promise.race([
        streamed,
        delay(60_000).then(() => {
          live.abort();
          throw new Error('the stream did not end');
        }),
      ]);
      const ids = messages.filter((m) => m.event === 'agent-event').map((m) => Number(m.id));
      assert.deepEqual(
        ids,
        run.events.map((e) => e.id),
      );
      assert.ok(beforePr > 3, `events streamed while the job ran: ${beforePr}`);
      const one = (await (await fetch(`${pipeline.appUrl}/api/runs/${job}`, { headers: auth })).json()) as {
        run: { state: string; outcome: string | null };
        base: { conversationId: string } | null;
      };
      assert.equal(one.run.state, 'finished');
      assert.equal(one.run.outcome, 'resolved');
      assert.equal(one.base?.conversationId, job);
      const page = (await (
        await fetch(`${pipeline.appUrl}/api/runs/${job}/events?limit=1000`, { headers: auth })
      ).json()) as { events: { id: number; kind: string }[] };
      assert.deepEqual(
        page.events.map((e) => e.kind),
        run.events.map((e) => e.kind),
      );
      const list = (await (await fetch(`${pipeline.appUrl}/api/runs`, { headers: auth })).json()) as {
        runs: { id: string }[];
      };
      assert.ok(
        list.runs.some((r) => r.id === job),
        'the run is listed',
      );
      assert.ok(!existsSync(join(pipeline.workDir, 'work', 'jobs', job)), 'the App has no folder of the job');

      // Neither host keeps a trajectory folder: the log lives only in the store.
      for (const w of [victim, survivor]) {
        const jobs = join(hostDir(w), 'jobs');
        for (const d of existsSync(jobs) ? readdirSync(jobs) : [])
          assert.ok(!existsSync(join(jobs, d, 'trajectory')), `${w.log}: ${d} has a trajectory folder`);
      }

      // A follow-up on the PR, taken by a worker on a third host (the other two are gone): its task
      // holds round one's summary, read from the store.
      const third = await pipeline.startWorker();
      survivor.child.kill('SIGKILL');
      await survivor.exited();
      const pr = prFor(n)[0];
      assert.ok(pr);
      await sim.comment(
        OWNER,
        REPO,
        pr.number,
        MAINTAINER,
        '@agent please double-check the rounding [followup]',
      );
      await sim.waitFor(
        () => model.requests.some((r) => taskText(r.body as MessagesRequest).includes('[followup]')),
        120_000,
        () => `the follow-up round to start\n${pipeline.logs()}`,
      );
      const first = model.requests.find((r) => taskText(r.body as MessagesRequest).includes('[followup]'));
      assert.ok(first);
      assert.match(
        taskText(first.body as MessagesRequest),
        new RegExp(`Round 1 \\(resolved\\): ${SUMMARY.replace(/[().]/g, '\\$&')}`),
      );
      assert.ok(readFileSync(third.log, 'utf8').includes('"job started"'), 'the third host took the round');
    });

    it('5. PostgreSQL restarted mid-job: the job finishes with one PR, its log whole and nothing in it twice', async () => {
      assert.ok(pg && runs);
      const n = sim.createIssue(OWNER, REPO, {
        title: 'Average rounds wrong [pg-restart]',
        body: 'average([1,2,2]) should be 1.67',
        author: MAINTAINER,
      }).number;
      await sim.label(OWNER, REPO, n, 'agent', MAINTAINER);
      await sim.waitFor(
        () => model.requests.some((r) => requestText(r.body).includes('[pg-restart]')),
        120_000,
        () => `the job's first model call\n${pipeline.logs()}`,
      );
      assert.equal(prFor(n).length, 0, 'the job is still running when PostgreSQL goes away');
      await pg.restart(1500);
      await sim.waitFor(
        () => prFor(n).length > 0,
        180_000,
        () => `a PR after the restart\n${pipeline.logs()}\n==== postgres\n${pg?.log() ?? ''}`,
      );
      assert.equal(await pipeline.jobsEnded(n), 1);
      assert.equal(prFor(n).length, 1);
      const turns = answeredTurns(model.requests, '[pg-restart]');
      assert.deepEqual(turns, [...new Set(turns)], `a turn was asked twice: ${turns.join(',')}`);
      // Opening checks the ids are 1..n without a gap; each answered call is recorded once.
      const run = await runs.open(jobOf(n));
      assert.equal(run.events.filter((e) => e.kind === 'model_response').length, turns.length);
      assert.equal(run.events.filter((e) => e.kind === 'outcome').length, 1);
    });
  },
);
