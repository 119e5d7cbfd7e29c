/**
 * One run as a story: its facts and totals at the top, then every step in order. Finished runs are
 * read in pages; live runs then follow the run's event stream (EventSource resumes with
 * Last-Event-ID by itself after a dropped connection).
 *
 * Fast on long runs: steps are drawn in slices between which the page stays responsive, each step's
 * bulky parts (whole outputs, checkpoint diffs, test output) are built only when opened, and
 * `content-visibility: auto` lets the browser skip layout of steps off screen. The client marks
 * `ia:steps-rendered` when every step known at load is in the page and `ia:interactive` after the
 * next frame (the benchmark reads them).
 */
import { ApiError, cancelRun, getEvents, getRun } from './api.js';
import { append, clear, h } from './dom.js';
import { formatDuration, formatInt, formatTokens, formatUsd } from './format.js';
import { renderItem, renderModelText, renderStepHeaderContent, stepTitle } from './render-step.js';
import { StepGrouper, type Step, type StepItem } from './steps.js';
import type { AgentEvent, BaseState, EventsPage, RunDetail, RunSummary } from './types.js';
import { outcomeClass, stateBadge } from './runs-list.js';

/** Steps drawn per slice before the page gets a turn. */
const SLICE_MS = 12;
/** Events per page: the most the API gives at once. */
export const RUN_PAGE_LIMIT = 1000;
const PAGE_LIMIT = RUN_PAGE_LIMIT;

function yieldToPage(): Promise<void> {
  return new Promise((resolve) => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => {
      resolve();
    };
    ch.port2.postMessage(null);
  });
}

function nextFrame(): Promise<void> {
  return new Promise((resolve) => {
    requestAnimationFrame(() => {
      setTimeout(resolve, 0);
    });
  });
}

class StepView {
  readonly el: HTMLElement;
  private readonly head: HTMLElement;
  private readonly body: HTMLElement;
  private readonly toggle: HTMLButtonElement;
  private readonly itemNodes: HTMLElement[] = [];
  /** Whether each drawn call item already had its observation. */
  private readonly itemDone: boolean[] = [];
  private textDrawn = false;
  private drawnVersion = -1;

  constructor(readonly step: Step) {
    const id = `step-${step.index}`;
    this.toggle = h('button', {
      type: 'button',
      class: 'step-toggle',
      aria: { expanded: 'true', controls: `${id}-body` },
      title: 'collapse or expand this step',
    });
    this.head = h('div', { class: 'step-head' });
    this.body = h('div', { class: 'step-body', id: `${id}-body` });
    this.el = h(
      'section',
      { class: 'step', id, data: { step: String(step.index) } },
      h('h3', { class: 'step-title' }, this.toggle, this.head),
      this.body,
    );
    this.toggle.addEventListener('click', () => {
      const collapsed = this.el.classList.toggle('collapsed');
      this.toggle.setAttribute('aria-expanded', String(!collapsed));
    });
    this.draw();
  }

  /** Draws what changed since the last call: the header, and items that are new or completed. */
  draw(): void {
    if (this.drawnVersion === this.step.version) return;
    this.drawnVersion = this.step.version;
    this.toggle.textContent = stepTitle(this.step);
    this.head.replaceChildren(...renderStepHeaderContent(this.step));
    if (!this.textDrawn) {
      this.textDrawn = true;
      const text = renderModelText(this.step);
      if (text !== null) this.body.appendChild(text);
    }
    this.step.items.forEach((item: StepItem, i) => {
      // A sub-agent's item grows until its delegate call has its result: drawn again each time.
      const done = item.kind === 'call' ? item.observation !== null : item.kind !== 'sub';
      const old = this.itemNodes[i];
      if (old === undefined) {
        const node = renderItem(item);
        this.itemNodes.push(node);
        this.itemDone.push(done);
        this.body.appendChild(node);
      } else if (done && this.itemDone[i] === false) {
        const node = renderItem(item);
        old.replaceWith(node);
        this.itemNodes[i] = node;
        this.itemDone[i] = true;
      }
    });
  }
}

interface Pane {
  readonly root: HTMLElement;
}

export class RunView implements Pane {
  readonly root: HTMLElement;
  private readonly facts = h('div', { class: 'facts' });
  private readonly banner = h('div', { class: 'banner', hidden: true });
  private readonly stepsEl = h('div', { class: 'steps', aria: { live: 'polite' } });
  private readonly status = h('div', { class: 'live-status' });
  private readonly actions = h('div', { class: 'run-actions' });
  private readonly title = h('h1', { class: 'run-title' });
  private readonly task = h('div', { class: 'task' });
  private readonly grouper = new StepGrouper();
  private readonly views = new Map<Step, StepView>();
  /** Steps created or changed and not drawn yet, in order. */
  private readonly dirty = new Set<Step>();
  private readonly pending = new Map<number, AgentEvent>();
  private run: RunSummary | null = null;
  private base: BaseState | null = null;
  private source: EventSource | null = null;
  private filling = false;
  private pumping = false;
  private initialLoaded = false;
  private marked = false;
  private cancelRequested = false;

  constructor(
    private readonly id: string,
    /** Requests started before the page knew who is signed in (they fail alone if nobody is). */
    private readonly prefetched: {
      readonly run: Promise<RunDetail>;
      readonly events: Promise<EventsPage>;
    } | null = null,
  ) {
    this.root = h(
      'main',
      { class: 'run-view' },
      h('nav', { class: 'crumbs' }, h('a', { href: '/' }, '← All runs')),
      h('header', { class: 'run-header' }, this.title, this.actions, this.facts, this.banner, this.task),
      this.status,
      this.stepsEl,
    );
  }

  async start(): Promise<void> {
    this.setStatus('Loading…');
    try {
      // The run and its first page at once; the rest once the summary says how many events there are.
      const first = this.prefetched?.events ?? getEvents(this.id, 0, PAGE_LIMIT);
      void first.catch(() => undefined);
      const detail = await (this.prefetched?.run ?? getRun(this.id));
      this.run = detail.run;
      this.base = detail.base;
      this.drawHeader();
      performance.mark('ia:run-loaded');
      // The summary says how many events there are: read those pages at once (each is drawn as it
      // arrives, in order), then whatever came after.
      const known = Math.ceil(detail.run.lastEventId / PAGE_LIMIT);
      const pages = [
        first,
        ...Array.from({ length: Math.max(0, known - 1) }, (_, i) =>
          getEvents(this.id, (i + 1) * PAGE_LIMIT, PAGE_LIMIT),
        ),
      ];
      // A failed page fails the load below; the others must not count as unhandled meanwhile.
      for (const p of pages) void p.catch(() => undefined);
      for (const page of pages) this.ingest((await page).events);
      const complete = detail.run.state === 'finished' && this.grouper.lastEventId >= detail.run.lastEventId;
      while (!complete) {
        const page = await getEvents(this.id, this.grouper.lastEventId, PAGE_LIMIT);
        this.ingest(page.events);
        if (page.next === null || page.events.length === 0) break;
      }
      performance.mark('ia:events-loaded');
      this.initialLoaded = true;
      this.schedule();
      if (this.run.state !== 'finished') this.follow();
      else this.setStatus('');
    } catch (error) {
      this.setStatus(
        error instanceof ApiError && error.status === 404
          ? 'No such run.'
          : `Could not load the run: ${(error as Error).message}`,
        true,
      );
      this.root.dataset.iaError = 'true';
    }
  }

  stop(): void {
    this.source?.close();
    this.source = null;
  }

  private setStatus(text: string, error = false): void {
    this.status.textContent = text;
    this.status.classList.toggle('error', error);
  }

  /** Live runs: new events and summary updates from the stream, until it says the run ended. */
  private follow(): void {
    // Starts after what the pages brought; a reconnect sends Last-Event-ID, which the server prefers.
    const es = new EventSource(
      `/api/runs/${encodeURIComponent(this.id)}/stream?after=${this.grouper.lastEventId}`,
    );
    this.source = es;
    this.setStatus('● Live: steps appear as they happen.');
    this.status.classList.add('live');
    es.addEventListener('agent-event', (m: MessageEvent<string>) => {
      this.ingest([JSON.parse(m.data) as AgentEvent]);
    });
    es.addEventListener('run', (m: MessageEvent<string>) => {
      this.run = JSON.parse(m.data) as RunSummary;
      this.drawHeader();
    });
    es.addEventListener('end', () => {
      es.close();
      this.source = null;
      this.status.classList.remove('live');
      this.setStatus('');
      // The summary may have changed with the last events; read it once more.
      void getRun(this.id).then(
        (d) => {
          this.run = d.run;
          this.drawHeader();
        },
        () => undefined,
      );
      this.fill();
    });
    es.addEventListener('open', () => {
      this.setStatus('● Live: steps appear as they happen.');
      // Anything appended between the last page and the stream's start.
      this.fill();
    });
    es.addEventListener('error', () => {
      if (es.readyState === EventSource.CLOSED) {
        this.setStatus('The live stream closed. Reload to continue following the run.', true);
        this.status.classList.remove('live');
      } else this.setStatus('Reconnecting…');
    });
  }

  /** Takes events in any order and with repeats; applies them in id order without gaps. */
  private ingest(events: readonly AgentEvent[]): void {
    for (const e of events) if (e.id > this.grouper.lastEventId) this.pending.set(e.id, e);
    for (let next = this.grouper.lastEventId + 1; this.pending.has(next); next++) {
      const e = this.pending.get(next);
      this.pending.delete(next);
      if (e === undefined) break;
      const changed = this.grouper.add(e);
      if (changed !== null) this.dirty.add(changed.step);
    }
    if (this.pending.size > 0 && this.initialLoaded) this.fill();
    this.schedule();
  }

  /** Reads the events after the last applied one (closes a gap, or catches up after a reconnect). */
  private fill(): void {
    if (this.filling) return;
    this.filling = true;
    void (async () => {
      try {
        for (;;) {
          const page = await getEvents(this.id, this.grouper.lastEventId, PAGE_LIMIT);
          this.ingest(page.events);
          if (page.next === null || page.events.length === 0) break;
        }
      } catch {
        // The stream or the next fill tries again.
      } finally {
        this.filling = false;
      }
    })();
  }

  private schedule(): void {
    if (this.pumping) return;
    this.pumping = true;
    void this.pump();
  }

  /** Draws dirty steps in slices of about SLICE_MS, giving the page a turn in between. */
  private async pump(): Promise<void> {
    try {
      while (this.dirty.size > 0) {
        // Reading the scroll height forces a layout: only for live runs past their first load.
        const follow = this.initialLoaded && this.run?.state !== 'finished' && this.atBottom();
        const until = performance.now() + SLICE_MS;
        for (const step of this.dirty) {
          this.dirty.delete(step);
          this.drawStep(step);
          if (performance.now() > until) break;
        }
        if (this.views.size > 0 && !performance.getEntriesByName('ia:first-step').length)
          performance.mark('ia:first-step');
        this.drawTotals();
        if (follow) window.scrollTo(0, document.body.scrollHeight);
        if (this.dirty.size > 0) await yieldToPage();
      }
    } finally {
      this.pumping = false;
    }
    if (this.initialLoaded && !this.marked) {
      this.marked = true;
      performance.mark('ia:steps-rendered');
      await nextFrame();
      performance.mark('ia:interactive');
      this.root.dataset.iaReady = 'true';
      this.scrollToHash();
    }
  }

  private atBottom(): boolean {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 120;
  }

  private scrollToHash(): void {
    const target = location.hash === '' ? null : document.getElementById(location.hash.slice(1));
    target?.scrollIntoView();
  }

  private drawStep(step: Step): void {
    let view = this.views.get(step);
    if (view === undefined) {
      view = new StepView(step);
      this.views.set(step, view);
      this.stepsEl.appendChild(view.el);
    } else view.draw();
  }

  private drawTotals(): void {
    this.root.dataset.steps = String(this.grouper.steps.filter((s) => s.index > 0).length);
    this.drawHeader();
  }

  private drawHeader(): void {
    const run = this.run;
    if (run === null) return;
    document.title = `${run.repo}#${run.issue} · Issue Agent`;
    clear(this.title);
    this.title.append(h('span', { class: 'ref' }, `${run.repo}#${run.issue}`), ' ', run.title);
    const t = this.grouper.totals;
    const steps = this.grouper.steps.filter((s) => s.index > 0).length;
    const duration =
      run.durationMs ?? (run.startedAt === null ? null : Date.now() - Date.parse(run.startedAt));
    const fact = (label: string, value: Node | string, key: string): HTMLElement =>
      h(
        'div',
        { class: 'fact', data: { fact: key } },
        h('span', { class: 'label' }, label),
        h('span', { class: 'value' }, value),
      );
    this.facts.replaceChildren(
      fact('state', stateBadge(run.state), 'state'),
      fact('outcome', h('span', { class: outcomeClass(run.outcome) }, run.outcome ?? '—'), 'outcome'),
      fact('steps', formatInt(Math.max(steps, run.steps)), 'steps'),
      fact('tokens', formatTokens(Math.max(t.tokens, run.tokens)), 'tokens'),
      fact('cost', formatUsd(Math.max(t.usd, run.costUsd)), 'cost'),
      fact('duration', formatDuration(duration), 'duration'),
      fact('kind', run.kind, 'kind'),
      ...(run.approvedBy === null ? [] : [fact('approved by', run.approvedBy, 'approved-by')]),
      ...(run.attempt === null
        ? []
        : [
            fact(
              'attempt',
              h(
                'span',
                {},
                `${run.attempt.number} of ${run.attempt.of} of job `,
                h('a', { href: `/runs/${encodeURIComponent(run.attempt.jobId)}` }, run.attempt.jobId),
              ),
              'attempt',
            ),
          ]),
      ...(run.ciRound === null
        ? []
        : [
            fact(
              'CI fix round',
              `${run.ciRound.round} of ${run.ciRound.of}: ${run.ciRound.checks.join(', ')}${
                run.ciRound.preExisting.length === 0
                  ? ''
                  : ` (pre-existing, not fixed: ${run.ciRound.preExisting.join(', ')})`
              }`,
              'ci-round',
            ),
          ]),
      ...(run.pull === null ? [] : [fact('pull request', `#${run.pull}`, 'pull')]),
      ...(run.prUrl === null
        ? []
        : [
            fact(
              'PR',
              h('a', { href: run.prUrl, class: 'pr-link' }, run.prUrl.replace(/^https?:\/\//, '')),
              'pr',
            ),
          ]),
      ...(this.base === null
        ? []
        : [
            fact('model', this.base.model, 'model'),
            fact('sandbox', this.base.sandbox, 'sandbox'),
            fact('base', this.base.workspace.baseCommit.slice(0, 12), 'base'),
            fact('tests', this.base.testCommand ?? 'none detected', 'tests'),
          ]),
    );
    this.drawActions(run);
    this.drawBanner();
    if (this.base !== null && this.task.childElementCount === 0) {
      const task = this.base.task;
      const body = task.body.trim();
      append(this.task, [
        h('div', { class: 'task-source' }, `Task from ${task.source}`),
        body === ''
          ? null
          : h('details', null, h('summary', null, task.title), h('div', { class: 'said' }, body)),
        ...task.instructions.map((i) => h('div', { class: 'said instruction' }, i)),
      ]);
    }
  }

  private drawBanner(): void {
    const outcome = this.grouper.steps
      .flatMap((s) => s.items)
      .findLast((i) => i.kind === 'event' && i.event.kind === 'outcome');
    if (outcome === undefined || outcome.kind !== 'event' || outcome.event.kind !== 'outcome') {
      this.banner.hidden = true;
      return;
    }
    const e = outcome.event;
    this.banner.hidden = false;
    this.banner.className = `banner ${outcomeClass(e.outcome)}`;
    this.banner.replaceChildren(
      h('strong', null, e.outcome === 'needs_info' ? 'needs_info: waiting for an answer' : e.outcome),
      ' — ',
      e.reason,
    );
  }

  private drawActions(run: RunSummary): void {
    this.actions.replaceChildren();
    if (run.state === 'finished') return;
    // A running job stops at its worker's next look at the cancel flag: until the run says it
    // finished, the button stays pressed.
    if (this.cancelRequested) {
      this.actions.append(
        h('button', { type: 'button', class: 'danger cancel', disabled: true }, 'Cancelling…'),
      );
      return;
    }
    const button = h('button', { type: 'button', class: 'danger cancel' }, 'Cancel run');
    button.addEventListener('click', () => {
      if (
        !confirm(
          `Cancel run ${run.id} (${run.repo}#${run.issue})? The agent stops and no pull request is opened for this run.`,
        )
      )
        return;
      button.disabled = true;
      button.textContent = 'Cancelling…';
      cancelRun(run.id).then(
        (r) => {
          this.cancelRequested = true;
          this.run = r.run;
          this.drawHeader();
          this.setStatus('Cancel requested.');
        },
        (error: unknown) => {
          button.disabled = false;
          button.textContent = 'Cancel run';
          this.setStatus(
            error instanceof ApiError && error.status === 409
              ? 'The run had already finished.'
              : `Cancel failed: ${(error as Error).message}`,
            true,
          );
        },
      );
    });
    this.actions.append(button);
  }
}
