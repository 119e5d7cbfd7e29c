import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { RecordedRequest } from './github-sim/index.js';

/**
 * Where the time of one job went, from what a person can see (the simulator's request log) and what
 * the job recorded (its trajectory folder). Epoch ms; null where the mark never happened.
 */
export interface JobTimeline {
  /** The label's webhook was sent. */
  readonly labelled: number;
  /** The progress comment was created (intake's "queued"). */
  readonly commentCreated: number | null;
  /** The job's base state was written: workspace made, sandbox ready. */
  readonly baseState: number | null;
  /** The baseline test run started (its end minus its duration). */
  readonly baselineStart: number | null;
  /** The agent's first event after the baseline. */
  readonly agentStart: number | null;
  /** The job's last event (its outcome). */
  readonly lastEvent: number | null;
  /**
   * The verdict began: the event before the final test run (the agent's last step is done). With
   * the Docker worker it is made in a fresh container, whose preparation is in this stage.
   */
  readonly verdictStart: number | null;
  /** The final test run started (its end minus its duration). */
  readonly finalRunStart: number | null;
  /** The pull request was created (the POST's arrival). */
  readonly prCreated: number | null;
  /** The last edit of the progress comment. */
  readonly lastCommentEdit: number | null;
  /** Edits of the progress comment (PATCH), and the job's events. */
  readonly commentEdits: number;
  readonly events: number;
}

interface EventFile {
  readonly kind: string;
  readonly ts: string;
  readonly phase?: string;
  readonly durationMs?: number;
}

export function jobTimeline(input: {
  readonly labelled: number;
  readonly requests: readonly RecordedRequest[];
  readonly owner: string;
  readonly repo: string;
  readonly trajectoryDir: string;
}): JobTimeline {
  const { owner, repo } = input;
  const after = input.requests.filter((r) => r.at >= input.labelled);
  const commentsPath = `/repos/${owner}/${repo}/issues/`;
  const created = after.find(
    (r) => r.method === 'POST' && r.path.startsWith(commentsPath) && r.path.endsWith('/comments'),
  );
  const edits = after.filter(
    (r) => r.method === 'PATCH' && r.path.startsWith(`/repos/${owner}/${repo}/issues/comments/`),
  );
  const pr = after.find((r) => r.method === 'POST' && r.path === `/repos/${owner}/${repo}/pulls`);
  const base = JSON.parse(readFileSync(join(input.trajectoryDir, 'base_state.json'), 'utf8')) as {
    createdAt: string;
  };
  const eventsDir = join(input.trajectoryDir, 'events');
  const events = readdirSync(eventsDir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(eventsDir, f), 'utf8')) as EventFile);
  const ms = (ts: string): number => Date.parse(ts);
  const baseline = events.find((e) => e.kind === 'test_run' && e.phase === 'baseline');
  const firstAgent = events.find((e) => e.kind !== 'test_run');
  const last = events.at(-1);
  const finalAt = events.findIndex((e) => e.kind === 'test_run' && e.phase === 'final');
  const final = finalAt < 0 ? undefined : events[finalAt];
  const beforeFinal = finalAt < 1 ? undefined : events[finalAt - 1];
  return {
    labelled: input.labelled,
    commentCreated: created?.at ?? null,
    baseState: ms(base.createdAt),
    baselineStart: baseline === undefined ? null : ms(baseline.ts) - (baseline.durationMs ?? 0),
    agentStart: firstAgent === undefined ? null : ms(firstAgent.ts),
    lastEvent: last === undefined ? null : ms(last.ts),
    verdictStart: beforeFinal === undefined ? null : ms(beforeFinal.ts),
    finalRunStart: final === undefined ? null : ms(final.ts) - (final.durationMs ?? 0),
    prCreated: pr?.at ?? null,
    lastCommentEdit: edits.at(-1)?.at ?? null,
    commentEdits: edits.length,
    events: events.length,
  };
}

/** One line per stage, for people: `label → PR 2.41 s: …`. */
export function describeTimeline(t: JobTimeline): string {
  const s = (a: number | null, b: number | null): string =>
    a === null || b === null ? '–' : `${((b - a) / 1000).toFixed(2)} s`;
  return [
    `label → pull request: ${s(t.labelled, t.prCreated)}`,
    `  label → job's base state (clone, workspace, sandbox ready): ${s(t.labelled, t.baseState)}`,
    `  baseline test run: ${s(t.baselineStart, t.agentStart)}`,
    `  agent (first step → last event): ${s(t.agentStart, t.lastEvent)}`,
    `    of which the verdict's preparation (last checkpoint; a fresh sandbox with the change applied): ${s(t.verdictStart, t.finalRunStart)}`,
    `  last event → pull request created: ${s(t.lastEvent, t.prCreated)}`,
    `  progress comment: ${t.commentEdits} edits for ${t.events} events; last edit ${s(t.prCreated, t.lastCommentEdit)} after the PR`,
  ].join('\n');
}
