/**
 * The runs list: one row per run, newest first, updated in place from the runs stream (`event: run`
 * carries a whole RunSummary; a run not in the list yet is added at the top).
 */
import { getSpend, listRuns } from './api.js';
import { h } from './dom.js';
import { formatAge, formatDuration, formatInt, formatTokens, formatUsd } from './format.js';
import type { RunStateName, RunSummary } from './types.js';

export function stateBadge(state: RunStateName): HTMLElement {
  return h('span', { class: `badge state-${state}` }, state === 'active' ? '● active' : state);
}

export function outcomeClass(outcome: string | null): string {
  if (outcome === null) return 'outcome-none';
  return `outcome outcome-${outcome.replace(/[^a-z_]/g, '')}`;
}

/** The server's order (src/server/runs.ts compareRuns): newest queued (or started) first, then id. */
export function compareRuns(a: RunSummary, b: RunSummary): number {
  const ka = a.queuedAt ?? a.startedAt ?? '';
  const kb = b.queuedAt ?? b.startedAt ?? '';
  if (ka !== kb) return ka < kb ? 1 : -1;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

function durationOf(run: RunSummary, now: number): number | null {
  if (run.durationMs !== null) return run.durationMs;
  if (run.startedAt === null) return null;
  return now - Date.parse(run.startedAt);
}

const COLUMNS = [
  'run',
  'repo',
  'issue / PR',
  'state',
  'outcome',
  'steps',
  'tokens',
  'cost',
  'duration',
  'started',
] as const;

function row(run: RunSummary, now: number): HTMLTableRowElement {
  const href = `/runs/${encodeURIComponent(run.id)}`;
  const issue = `#${run.issue}`;
  return h(
    'tr',
    { class: `run-row state-${run.state}`, data: { runId: run.id, state: run.state } },
    h(
      'td',
      { class: 'c-run' },
      h('a', { href, class: 'run-link' }, run.title === '' ? run.id : run.title),
      h(
        'div',
        { class: 'muted small' },
        `${run.kind === 'fix-issue' ? 'fix issue' : run.kind}${
          run.attempt === null ? '' : ` · attempt ${run.attempt.number} of ${run.attempt.of}`
        }`,
      ),
    ),
    h('td', { class: 'c-repo' }, run.repo),
    h('td', { class: 'c-ref' }, run.pull === null ? issue : `${issue} → PR #${run.pull}`),
    h('td', { class: 'c-state' }, stateBadge(run.state)),
    h('td', { class: `c-outcome ${outcomeClass(run.outcome)}` }, run.outcome ?? '—'),
    h('td', { class: 'c-num c-steps' }, formatInt(run.steps)),
    h('td', { class: 'c-num c-tokens', title: formatInt(run.tokens) }, formatTokens(run.tokens)),
    h('td', { class: 'c-num c-cost' }, formatUsd(run.costUsd)),
    h('td', { class: 'c-num c-duration' }, formatDuration(durationOf(run, now))),
    h(
      'td',
      { class: 'c-started', title: run.startedAt ?? run.queuedAt ?? '' },
      formatAge(run.startedAt ?? run.queuedAt, now),
    ),
  );
}

export class RunsList {
  readonly root: HTMLElement;
  private readonly tbody = h('tbody');
  private readonly empty = h(
    'p',
    { class: 'muted empty' },
    'No runs yet. Label an issue or mention the agent to start one.',
  );
  private readonly more = h('button', { type: 'button', class: 'more', hidden: true }, 'Load older runs');
  private readonly status = h('div', { class: 'live-status' });
  private readonly spend = h('p', { class: 'muted small month-spend', hidden: true });
  private readonly filter = h(
    'select',
    { name: 'state', aria: { label: 'show runs in state' } },
    h('option', { value: '' }, 'all runs'),
    h('option', { value: 'queued' }, 'queued'),
    h('option', { value: 'active' }, 'active'),
    h('option', { value: 'finished' }, 'finished'),
  );
  private readonly runs = new Map<string, RunSummary>();
  private readonly rows = new Map<string, HTMLTableRowElement>();
  private next: string | null = null;
  private source: EventSource | null = null;
  private ticker: number | null = null;

  constructor() {
    this.root = h(
      'main',
      { class: 'runs-view' },
      h('div', { class: 'list-head' }, h('h1', null, 'Runs'), this.filter, this.status),
      this.spend,
      h(
        'table',
        { class: 'runs' },
        h(
          'thead',
          null,
          h('tr', null, ...COLUMNS.map((c) => h('th', { class: `c-${c.replace(/[^a-z]/g, '')}` }, c))),
        ),
        this.tbody,
      ),
      this.empty,
      this.more,
    );
    const initial = new URLSearchParams(location.search).get('state') ?? '';
    this.filter.value = ['queued', 'active', 'finished'].includes(initial) ? initial : '';
    this.filter.addEventListener('change', () => {
      const url = new URL(location.href);
      if (this.filter.value === '') url.searchParams.delete('state');
      else url.searchParams.set('state', this.filter.value);
      history.replaceState(null, '', url);
      this.runs.clear();
      this.rows.clear();
      this.tbody.replaceChildren();
      this.next = null;
      void this.load();
    });
    this.more.addEventListener('click', () => {
      void this.load();
    });
  }

  private get state(): RunStateName | '' {
    const v = this.filter.value;
    return v === 'queued' || v === 'active' || v === 'finished' ? v : '';
  }

  async start(): Promise<void> {
    await this.load();
    void this.showSpend();
    this.follow();
    // Durations and ages of active runs move with the clock.
    this.ticker = window.setInterval(() => {
      const now = Date.now();
      for (const run of this.runs.values()) if (run.state !== 'finished') this.draw(run, now);
    }, 1000);
  }

  stop(): void {
    this.source?.close();
    if (this.ticker !== null) clearInterval(this.ticker);
  }

  /** This month's spend per repository, under the heading (nothing when none is kept or spent). */
  private async showSpend(): Promise<void> {
    try {
      const spend = await getSpend();
      if (spend.repositories.length === 0) return;
      this.spend.textContent = `Spent on the model in ${spend.month} (UTC): ${spend.repositories
        .map((r) => `${r.repo} ${formatUsd(r.usd)}`)
        .join(' · ')}`;
      this.spend.hidden = false;
    } catch {
      // No spend kept here (no Redis or run store): the line stays hidden.
    }
  }

  private async load(): Promise<void> {
    try {
      const page = await listRuns({ state: this.state, before: this.next });
      const now = Date.now();
      for (const run of page.runs) this.upsert(run, now, false);
      this.next = page.next;
      this.more.hidden = page.next === null;
      this.empty.hidden = this.runs.size > 0;
      this.root.dataset.iaReady = 'true';
    } catch (error) {
      this.status.textContent = `Could not load runs: ${(error as Error).message}`;
      this.status.classList.add('error');
    }
  }

  private follow(): void {
    const es = new EventSource('/api/runs/stream');
    this.source = es;
    es.addEventListener('open', () => {
      this.status.textContent = '● live';
      this.status.className = 'live-status live';
    });
    es.addEventListener('run', (m: MessageEvent<string>) => {
      this.upsert(JSON.parse(m.data) as RunSummary, Date.now(), true);
      this.empty.hidden = this.runs.size > 0;
    });
    es.addEventListener('error', () => {
      this.status.textContent =
        es.readyState === EventSource.CLOSED ? 'live updates stopped; reload to resume' : 'reconnecting…';
      this.status.className = 'live-status';
    });
  }

  private upsert(run: RunSummary, now: number, fromStream: boolean): void {
    const state = this.state;
    if (state !== '' && run.state !== state) {
      // A run that left the filtered state leaves the list.
      this.rows.get(run.id)?.remove();
      this.rows.delete(run.id);
      this.runs.delete(run.id);
      return;
    }
    const known = this.runs.get(run.id);
    // The stream and a page may cross: never go back to an older summary.
    if (known !== undefined && known.lastEventId > run.lastEventId && known.state === 'finished') return;
    const old = this.rows.get(run.id);
    if (old === undefined && fromStream && this.next !== null) {
      // The stream names every run (it starts with all of them): one older than the oldest row
      // loaded belongs to a page not read yet.
      const oldest = [...this.runs.values()].sort(compareRuns).at(-1);
      if (oldest !== undefined && compareRuns(run, oldest) > 0) return;
    }
    const tr = row(run, now);
    this.runs.set(run.id, run);
    this.rows.set(run.id, tr);
    if (old !== undefined) {
      old.replaceWith(tr);
      return;
    }
    // In the server's order: newest queued first.
    const sorted = [...this.runs.values()].sort(compareRuns);
    const follower = sorted[sorted.findIndex((r) => r.id === run.id) + 1];
    const before = follower === undefined ? undefined : this.rows.get(follower.id);
    if (before === undefined) this.tbody.append(tr);
    else this.tbody.insertBefore(tr, before);
  }

  /** Only the cells that move with the clock: replacing the row would steal a click or focus. */
  private draw(run: RunSummary, now: number): void {
    const tr = this.rows.get(run.id);
    if (tr === undefined) return;
    const duration = tr.querySelector('.c-duration');
    if (duration !== null) duration.textContent = formatDuration(durationOf(run, now));
    const started = tr.querySelector('.c-started');
    if (started !== null) started.textContent = formatAge(run.startedAt ?? run.queuedAt, now);
  }
}
