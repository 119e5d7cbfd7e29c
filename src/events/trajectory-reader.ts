import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { reduceState, type RunState } from '../events/reduce-state.js';
import { agentEvent, baseState, type AgentEvent, type BaseState } from '../events/schema.js';
import type { Redactor } from '../publish/redact.js';

const EVENT_FILE = /^(\d{6,})-[a-z_]+\.json$/;

/**
 * What every reader of a run's log shares: the base state and the events read so far (in id order,
 * none skipped), their reduced state (memoised until more are read), and the events served
 * redacted, each redacted once when first served and kept.
 */
export abstract class RunLogReader {
  protected baseState: BaseState | null = null;
  protected readonly list: AgentEvent[] = [];
  protected readonly redacted: AgentEvent[] = [];
  protected reduced: RunState | null = null;

  constructor(protected readonly redactor: Redactor) {}

  get base(): BaseState | null {
    return this.baseState;
  }

  get events(): readonly AgentEvent[] {
    return this.list;
  }

  get lastEventId(): number {
    return this.list.length;
  }

  /** reduceState of the events read so far (memoised until more are read). */
  get state(): RunState | null {
    if (this.baseState === null) return null;
    this.reduced ??= reduceState(this.list);
    return this.reduced;
  }

  /** Reads whatever is new; true when something changed. */
  abstract refresh(): Promise<boolean>;

  /** Events with id > after, at most limit of them, redacted. */
  eventsAfter(after: number, limit: number): AgentEvent[] {
    const start = Math.max(0, Math.floor(after));
    const end = Math.min(this.list.length, start + limit);
    const out: AgentEvent[] = [];
    for (let i = start; i < end; i++) {
      let r = this.redacted[i];
      if (r === undefined) {
        r = this.redactor.redactDeep(this.list[i] as AgentEvent);
        this.redacted[i] = r;
      }
      out.push(r);
    }
    return out;
  }
}

/**
 * A read-only, incremental view of a trajectory folder that a worker may be appending to. Unlike
 * FileEventStore.open it never deletes anything (a `.tmp` file may be a write in progress) and reads
 * only the event files it has not read yet. Event files appear whole (the store renames them into
 * place), so a file that is listed can be read completely.
 */
export class TrajectoryReader extends RunLogReader {
  private dirStamp = '';

  constructor(
    readonly dir: string,
    redactor: Redactor,
  ) {
    super(redactor);
  }

  refresh(): Promise<boolean> {
    return Promise.resolve(this.refreshSync());
  }

  /** Reads whatever is new, synchronously; true when something changed. */
  refreshSync(): boolean {
    let changed = false;
    if (this.baseState === null) {
      this.baseState = readBase(this.dir);
      if (this.baseState === null) return false;
      changed = true;
    }
    const eventsDir = join(this.dir, 'events');
    let stamp: string;
    try {
      const s = statSync(eventsDir);
      stamp = `${s.mtimeMs}:${s.ino}`;
    } catch {
      return changed;
    }
    if (stamp === this.dirStamp) return changed;
    let names: string[];
    try {
      names = readdirSync(eventsDir);
    } catch {
      return changed;
    }
    const numbered = names
      .map((n) => ({ n, id: Number(EVENT_FILE.exec(n)?.[1] ?? NaN) }))
      .filter((x) => Number.isInteger(x.id))
      .sort((a, b) => a.id - b.id);
    if (numbered.length < this.list.length) {
      // The folder was replaced (a run restarted from scratch before its base state was written).
      this.list.length = 0;
      this.redacted.length = 0;
      this.baseState = readBase(this.dir);
      changed = true;
    }
    let complete = true;
    for (const { n, id } of numbered) {
      if (id <= this.list.length) continue;
      if (id !== this.list.length + 1) {
        complete = false;
        break;
      }
      let parsed: ReturnType<typeof agentEvent.safeParse>;
      try {
        parsed = agentEvent.safeParse(JSON.parse(readFileSync(join(eventsDir, n), 'utf8')));
      } catch {
        complete = false;
        break;
      }
      if (!parsed.success || parsed.data.id !== id) {
        complete = false;
        break;
      }
      this.list.push(parsed.data);
      changed = true;
    }
    // A gap or an unreadable file: read the folder again next time rather than trust the stamp.
    this.dirStamp = complete ? stamp : '';
    if (changed) this.reduced = null;
    return changed;
  }
}

function readBase(dir: string): BaseState | null {
  try {
    const parsed = baseState.safeParse(JSON.parse(readFileSync(join(dir, 'base_state.json'), 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
