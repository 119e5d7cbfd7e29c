import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { buildWeb } from '../../scripts/build-web.js';
import { ADMIN_TOKEN, startStandaloneServer, type StandaloneServer } from './standalone-server.js';
import { browserSkipReason, launchBrowser, screenshot, signInWithToken, watchPage } from './support.js';
import { HOSTILE, SYNTHETIC_THINKING, writeSyntheticJob } from './synthetic-run.js';

const skip = browserSkipReason();

/**
 * The run view against the real run server (standalone, over a folder of synthetic trajectories):
 * how a run reads — collapsed long outputs, ANSI colours, edits as diffs, test tables, totals — and
 * that nothing in the log is ever taken as markup or script.
 */
describe(
  'browser client: the run view (real server, synthetic trajectories)',
  { skip, timeout: 180_000 },
  () => {
    let dir: string;
    let server: StandaloneServer;
    let browser: Browser;
    let page: Page;
    let watched: { readonly problems: string[] };

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'ia-browser-'));
      const web = await buildWeb(join(dir, 'web'));
      writeSyntheticJob(join(dir, 'work'), 'run-story', {
        steps: 60,
        issue: 12,
        title: 'Average <b>rounds</b> wrong',
      });
      server = await startStandaloneServer(join(dir, 'work'), web);
      browser = await launchBrowser();
      page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      watched = watchPage(page);
    });

    after(async () => {
      await browser.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('asks to sign in first; a wrong token is refused; the admin token opens the run', async () => {
      await page.goto(`${server.url}/runs/run-story`);
      await page.locator('main.sign-in').waitFor();
      const github = await page.locator('a.github').getAttribute('href');
      assert.equal(github, `/auth/github/login?next=${encodeURIComponent('/runs/run-story')}`);
      await screenshot(page, 'standalone-sign-in');
      await page.fill('input[name=token]', 'wrong-token-wrong-token-wrong');
      await page.click('form.token-form button[type=submit]');
      await page.locator('.form-error', { hasText: 'not accepted' }).waitFor();
      await signInWithToken(page, ADMIN_TOKEN);
      await page.locator('main.run-view[data-ia-ready]').waitFor();
      assert.equal(new URL(page.url()).pathname, '/runs/run-story');
    });

    it('shows every step with its cost and running totals, and the run facts', async () => {
      assert.equal(await page.locator('section.step').count(), 61, 'step 0 (baseline) and 60 steps');
      assert.equal(await page.locator('main.run-view').getAttribute('data-steps'), '60');
      const title = await page.locator('h1.run-title').textContent();
      assert.equal(title, 'acme/calc#12 Average <b>rounds</b> wrong', 'the title is text, not markup');
      assert.equal(await page.locator('h1.run-title b').count(), 0);
      const head = await page.locator('#step-3 .step-title').textContent();
      assert.match(head ?? '', /Step 3/);
      assert.match(head ?? '', /\$0\.\d+/);
      assert.match(head ?? '', /Σ [\d.]+k tokens/);
      assert.equal(await page.locator('[data-fact=outcome] .value').textContent(), 'resolved');
      assert.match((await page.locator('.banner').textContent()) ?? '', /resolved/);
      await screenshot(page, 'standalone-run-view');
    });

    it('collapses a long output to a head and a tail; "show all" shows every line', async () => {
      // Step 21 ran a build printing 400 lines.
      const call = page.locator('#step-21 .item.call');
      await call.scrollIntoViewIfNeeded();
      const button = call.locator('button.show-all');
      assert.match((await button.textContent()) ?? '', /show all \(400 lines/);
      assert.ok(((await call.locator('pre.output').first().textContent()) ?? '').split('\n').length < 20);
      await button.click();
      const all = (await call.locator('pre.output').first().textContent()) ?? '';
      assert.equal(all.split('\n').length, 400);
      assert.ok(!all.includes('\u001b'), 'no escape character reaches the page');
      assert.ok((await call.locator('pre.output span.a-fg-2.a-b').count()) > 0, 'colours become classes');
    });

    it('shows edits as coloured diffs and test runs as pass/fail tables', async () => {
      const edit = page.locator('#step-5 .item.call[data-tool=editor]');
      await edit.scrollIntoViewIfNeeded();
      assert.equal(await edit.locator('.dl-del').count(), 2);
      assert.equal(await edit.locator('.dl-add').count(), 2);
      assert.match(
        (await edit.locator('.dl-add').first().textContent()) ?? '',
        /^\+ {2}const v = fixed\(5\);/,
      );
      // Step 7 ran the tests: two failing.
      const tests = page.locator('#step-7 table.tests');
      await tests.scrollIntoViewIfNeeded();
      assert.equal(await tests.locator('tr.fail').count(), 2);
      assert.ok((await tests.locator('tr.pass').count()) > 0);
      assert.match((await tests.locator('caption').textContent()) ?? '', /40 passed, 2 failed, 0 skipped/);
    });

    it('never runs or renders markup from the log', async () => {
      // Step 8 printed HOSTILE (an img with onerror and a script tag).
      const out = page.locator('#step-8 pre.output');
      await out.scrollIntoViewIfNeeded();
      assert.ok(((await out.textContent()) ?? '').includes(HOSTILE));
      assert.equal(await page.locator('section.step img, section.step script').count(), 0);
      assert.equal(await page.evaluate('typeof window.__iaXss'), 'undefined');
    });

    it("folds a turn's thinking under its step; opened, it is text", async () => {
      const step = page.locator('#step-4');
      await step.scrollIntoViewIfNeeded();
      assert.equal(await step.locator('.said.thinking').count(), 0, 'folded until asked for');
      await step.locator('button.link', { hasText: 'thinking, 40 tokens' }).click();
      assert.equal(await step.locator('.said.thinking').textContent(), SYNTHETIC_THINKING);
      assert.equal(await step.locator('.said.thinking i').count(), 0);
      assert.equal(await page.locator('#step-3 button.link', { hasText: 'thinking' }).count(), 0);
    });

    it('says under a turn what the API cleared from its prompt', async () => {
      const step = page.locator('#step-6');
      await step.scrollIntoViewIfNeeded();
      const note = step.locator('.note.condensation');
      assert.match(
        (await note.textContent()) ?? '',
        /The API cleared 12 old tool results \(41000 input tokens\) from what the model read/,
      );
      assert.equal(await page.locator('#step-5 .note.condensation').count(), 0);
    });

    it('a step header collapses and expands its step', async () => {
      const step = page.locator('#step-2');
      await step.locator('.step-toggle').click();
      assert.equal(await step.getAttribute('class'), 'step collapsed');
      assert.equal(await step.locator('.step-body').isVisible(), false);
      await step.locator('.step-toggle').click();
      assert.equal(await step.locator('.step-body').isVisible(), true);
    });

    it('kept to the content security policy: no inline script or style, no page error', () => {
      assert.deepEqual(watched.problems, []);
    });
  },
);
