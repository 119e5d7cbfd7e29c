/**
 * `npm run bench -- --run-view`: how soon the run view of a 1,000-step run is interactive in headless
 * Chromium (issue 7). A synthetic 1,000-step trajectory (FileEventStore, with long outputs, ANSI
 * colours, edits, checkpoints with diffs, test runs) is written into a work folder; the real run
 * server serves it on its own (no Redis, no App) with the built client; each sample opens
 * /runs/<id> in a fresh page of a signed-in browser.
 *
 * Time to interactive = navigation start → the client's `ia:interactive` mark: every step's header
 * and body is in the page and a frame has been painted. Then a click on a step's toggle (step 500,
 * scrolled into view) is timed to the next frame that shows it collapsed. Long tasks (> 50 ms) during
 * the load are recorded too: the page draws in slices, so none should be long. The first sample is
 * the server's first read of the run (events parsed and redacted), reported apart; the median is
 * over the rest. No assertion on time.
 *
 * Also runnable alone: `node --import tsx bench/run-view.ts [--samples N]`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildWeb } from '../scripts/build-web.js';
import { ADMIN_TOKEN, startStandaloneServer } from '../test/browser/standalone-server.js';
import { browserSkipReason, launchBrowser } from '../test/browser/support.js';
import { writeSyntheticJob } from '../test/browser/synthetic-run.js';

const STEPS = 1000;
const RUN_ID = 'bench-run-view-1000';

interface Sample {
  readonly interactive: number;
  readonly runLoaded: number;
  readonly eventsLoaded: number;
  readonly firstStep: number;
  readonly clickToFrame: number;
  readonly longestTask: number;
  readonly steps: number;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

/** Installed before the page's own script: records long tasks from the start of the load. */
const OBSERVE_LONG_TASKS = `
  window.__iaLongTasks = [];
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__iaLongTasks.push(e.duration);
  }).observe({ type: 'longtask', buffered: true });
`;

const READ_MARKS = `(() => {
  const mark = (n) => performance.getEntriesByName(n)[0]?.startTime ?? NaN;
  return {
    interactive: mark('ia:interactive'),
    runLoaded: mark('ia:run-loaded'),
    eventsLoaded: mark('ia:events-loaded'),
    firstStep: mark('ia:first-step'),
    longestTask: Math.max(0, ...window.__iaLongTasks),
    steps: document.querySelectorAll('section.step').length,
  };
})()`;

const CLICK_TO_FRAME = `new Promise((resolve) => {
  const step = document.getElementById('step-500');
  step.scrollIntoView();
  requestAnimationFrame(() => requestAnimationFrame(() => {
    const t = performance.now();
    step.querySelector('.step-toggle').click();
    requestAnimationFrame(() => {
      resolve(step.classList.contains('collapsed') ? performance.now() - t : NaN);
    });
  }));
})`;

export async function runViewBench(samples = 8): Promise<void> {
  const skip = browserSkipReason();
  if (skip !== false) {
    console.log(`\nrun view: skipped (${skip})`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'ia-bench-view-'));
  const browser = await launchBrowser();
  try {
    const t0 = performance.now();
    writeSyntheticJob(join(dir, 'work'), RUN_ID, { steps: STEPS, issue: 1000, title: 'A 1,000-step run' });
    const written = performance.now() - t0;
    const web = await buildWeb(join(dir, 'web'));
    const server = await startStandaloneServer(join(dir, 'work'), web);
    try {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const signIn = await context.request.post(`${server.url}/auth/token`, {
        data: { token: ADMIN_TOKEN },
        headers: { origin: server.url },
      });
      if (!signIn.ok()) throw new Error(`sign-in failed: HTTP ${signIn.status()}`);
      const events = (await (await context.request.get(`${server.url}/api/runs/${RUN_ID}`)).json()) as {
        run: { lastEventId: number };
      };
      const results: Sample[] = [];
      for (let i = 0; i < samples; i++) {
        const page = await context.newPage();
        await page.addInitScript(OBSERVE_LONG_TASKS);
        await page.goto(`${server.url}/runs/${RUN_ID}`);
        await page.locator('main.run-view[data-ia-ready]').waitFor({ timeout: 60_000 });
        const marks = await page.evaluate<Omit<Sample, 'clickToFrame'>>(READ_MARKS);
        const clickToFrame = await page.evaluate<number>(CLICK_TO_FRAME);
        results.push({ ...marks, clickToFrame });
        await page.close();
      }
      await context.close();
      const [cold, ...warm] = results;
      if (cold === undefined) return;
      const row = (label: string, pick: (s: Sample) => number, unit = 'ms'): string =>
        `| ${label} | ${pick(cold).toFixed(0)} ${unit} | ${median(warm.map(pick)).toFixed(0)} ${unit} | ${Math.max(...warm.map(pick)).toFixed(0)} ${unit} |`;
      const load = loadavg()
        .map((x) => x.toFixed(1))
        .join(' / ');
      console.log(
        `\nRun view, ${STEPS} steps (${events.run.lastEventId} events; steps in the page: ${cold.steps}; trajectory written in ${(written / 1000).toFixed(1)} s), ${warm.length} warm samples, load average ${load}:\n`,
      );
      console.log('| measure | first open (cold server) | median | max |\n| --- | --- | --- | --- |');
      console.log(row('navigation → run summary read (`ia:run-loaded`)', (s) => s.runLoaded));
      console.log(row('navigation → first step drawn (`ia:first-step`)', (s) => s.firstStep));
      console.log(row('navigation → all events read (`ia:events-loaded`)', (s) => s.eventsLoaded));
      console.log(
        row('**navigation → interactive (`ia:interactive`)**, target < 1000 ms', (s) => s.interactive),
      );
      console.log(row('click on a step toggle → next frame, collapsed', (s) => s.clickToFrame));
      console.log(row('longest task during the load', (s) => s.longestTask));
    } finally {
      await server.close();
    }
  } finally {
    await browser.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const at = process.argv.indexOf('--samples');
  await runViewBench(at === -1 ? undefined : Number(process.argv[at + 1]));
}
