import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { buildWeb } from '../../scripts/build-web.js';
import type { RunSummary } from '../../src/server/web/types.js';
import { hang, oracle, reply, type Policy } from '../../src/model-sim/index.js';
import { startStack, type Stack } from '../support/pipeline.js';
import { routeByTag } from '../support/pipeline-fixtures.js';
import { redisSkipReason } from '../support/redis-server.js';
import { browserSkipReason, launchBrowser, screenshot, signInWithToken, watchPage } from './support.js';

const skip = browserSkipReason() || redisSkipReason();
const OWNER = 'acme';
const REPO = 'calc';
const MAINTAINER = 'maria';
const MODEL_KEY = 'sk-ant-browser-model-key-0123456789abcdef';

/**
 * The browser client against the real pipeline: the App (which mounts the run server) and a worker
 * as processes, the GitHub and model simulators, Redis. One run finishes; another is held inside its
 * first step by a command waiting for a file the test creates, so the test decides when the model is
 * asked (and answers) the next turn; its third turn hangs until the run is cancelled from the page.
 */
describe(
  'browser client: runs list, live run view and cancel (real pipeline)',
  { skip, timeout: 600_000 },
  () => {
    let stack: Stack | undefined;
    let browser: Browser | undefined;
    let page: Page;
    let watched: { readonly problems: string[] };
    let gateDir: string;
    let gate: string;
    let hung = false;
    let doneRun: RunSummary;
    let liveRun: RunSummary;

    const api = async <T>(path: string): Promise<T> => {
      assert.ok(stack);
      const res = await fetch(`${stack.pipeline.appUrl}${path}`, {
        headers: { authorization: `Bearer ${stack.pipeline.adminToken}` },
      });
      assert.equal(res.status, 200, `${path}: HTTP ${res.status}`);
      return (await res.json()) as T;
    };
    const runOf = async (issue: number): Promise<RunSummary | undefined> =>
      (await api<{ runs: RunSummary[] }>('/api/runs?limit=50')).runs.find((r) => r.issue === issue);
    const waitForRun = async (
      issue: number,
      ok: (r: RunSummary) => boolean,
      what: string,
    ): Promise<RunSummary> => {
      assert.ok(stack);
      let found: RunSummary | undefined;
      await stack.sim.waitFor(
        async () => {
          found = await runOf(issue);
          return found !== undefined && ok(found);
        },
        120_000,
        () => `${what}\n${stack?.pipeline.logs() ?? ''}`,
      );
      assert.ok(found);
      return found;
    };

    before(async () => {
      // The App serves the client from <package>/dist/web: build it as it is now.
      await buildWeb();
      gateDir = mkdtempSync(join(tmpdir(), 'ia-browser-gate-'));
      gate = join(gateDir, 'open');
      const held: Policy = (request) => {
        const turn = request.messages.filter((m) => m.role === 'assistant').length;
        if (turn === 0) {
          return reply()
            .text('First I wait until the reviewer opens the gate.')
            .tool('bash', { command: `while [ ! -e '${gate}' ]; do sleep 0.1; done; echo gate open` });
        }
        if (turn === 1)
          return reply()
            .text('The gate is open. A look at the sources next.')
            .tool('bash', { command: 'ls src' });
        hung = true;
        return hang();
      };
      stack = await startStack({
        owner: OWNER,
        repo: REPO,
        maintainer: { login: MAINTAINER, permission: 'write' },
        modelKey: MODEL_KEY,
        policy: (fixture) => routeByTag({ '[held]': held }, oracle(fixture.patch)),
      });
      browser = await launchBrowser();
      page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      watched = watchPage(page);
    });

    after(async () => {
      await browser?.close();
      await stack?.stop();
      rmSync(gateDir, { recursive: true, force: true });
    });

    it('the runs list shows a finished and a live run', async () => {
      assert.ok(stack);
      const { sim, pipeline } = stack;
      const done = sim.createIssue(OWNER, REPO, {
        title: 'Average rounds wrong [done]',
        body: 'average([1, 2, 2]) should be 1.67.',
        author: MAINTAINER,
      }).number;
      await sim.label(OWNER, REPO, done, 'agent', MAINTAINER);
      doneRun = await waitForRun(done, (r) => r.state === 'finished', 'the first run to finish');
      assert.equal(doneRun.outcome, 'resolved');
      const live = sim.createIssue(OWNER, REPO, {
        title: 'Average rounds wrong [held]',
        body: 'average([1, 2, 2]) should be 1.67.',
        author: MAINTAINER,
      }).number;
      await sim.label(OWNER, REPO, live, 'agent', MAINTAINER);
      liveRun = await waitForRun(
        live,
        (r) => r.state === 'active' && r.steps === 1,
        'the held run to be inside its first step',
      );

      await page.goto(`${pipeline.appUrl}/`);
      await page.locator('main.sign-in').waitFor();
      // This App has no GitHub sign-in configured: only the token form is offered.
      assert.equal(await page.locator('a.github').count(), 0);
      await screenshot(page, 'pipeline-sign-in');
      await signInWithToken(page, pipeline.adminToken);
      const finishedRow = page.locator(`tr[data-run-id="${doneRun.id}"][data-state=finished]`);
      const liveRow = page.locator(`tr[data-run-id="${liveRun.id}"][data-state=active]`);
      await finishedRow.waitFor();
      await liveRow.waitFor();
      assert.equal(await finishedRow.locator('.c-outcome').textContent(), 'resolved');
      assert.equal(await finishedRow.locator('.c-repo').textContent(), `${OWNER}/${REPO}`);
      assert.equal(await finishedRow.locator('.c-ref').textContent(), `#${done}`);
      assert.ok(Number(await finishedRow.locator('.c-steps').textContent()) > 0);
      assert.equal(await liveRow.locator('.c-outcome').textContent(), '—');
      await screenshot(page, 'pipeline-runs-list');
    });

    it("the live run's view gains a step without reload when the model answers", async () => {
      assert.ok(stack);
      await Promise.all([
        page.waitForURL(`**/runs/${liveRun.id}`),
        page.locator(`tr[data-run-id="${liveRun.id}"] a.run-link`).click(),
      ]);
      const view = page.locator('main.run-view[data-ia-ready]');
      await view.waitFor();
      assert.equal(await view.getAttribute('data-steps'), '1');
      assert.match(
        (await page.locator('#step-1').textContent()) ?? '',
        /wait until the reviewer opens the gate/,
      );
      assert.equal(
        (await page.locator('#step-1 .status.running').count()) > 0,
        true,
        'the gate command is still running',
      );
      await page.evaluate('window.__iaSamePage = true');
      await screenshot(page, 'pipeline-run-live');

      writeFileSync(gate, '');
      await page.locator('main.run-view[data-steps="2"]').waitFor({ timeout: 60_000 });
      await page.locator('#step-2').waitFor();
      assert.match((await page.locator('#step-2 .said').textContent()) ?? '', /The gate is open/);
      assert.match((await page.locator('#step-1 .item.call pre.output').textContent()) ?? '', /gate open/);
      assert.equal(await page.evaluate('window.__iaSamePage'), true, 'the page was not reloaded');
      await screenshot(page, 'pipeline-run-new-step');
    });

    it('cancel from the page ends the run `cancelled`', async () => {
      assert.ok(stack);
      const { sim } = stack;
      await sim.waitFor(() => hung, 60_000, 'the third model call to hang');
      page.once('dialog', (d) => {
        void d.accept();
      });
      await page.locator('button.cancel').click();
      await page.locator('[data-fact=outcome] .value', { hasText: 'cancelled' }).waitFor({ timeout: 60_000 });
      await page.locator('[data-fact=state] .value', { hasText: 'finished' }).waitFor();
      assert.equal(await page.locator('button.cancel').count(), 0, 'no cancel button on a finished run');
      const after = await waitForRun(
        liveRun.issue,
        (r) => r.state === 'finished',
        'the cancelled run to finish',
      );
      assert.equal(after.outcome, 'cancelled');
      // The view followed the run to its end: back to the top, where the facts are.
      await page.evaluate('window.scrollTo(0, 0)');
      await screenshot(page, 'pipeline-run-cancelled');
      assert.deepEqual(watched.problems, []);
    });
  },
);
