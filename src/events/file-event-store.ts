import {
  closeSync,
  constants,
  fdatasyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  renameSync,
  linkSync,
  writeSync,
  existsSync,
  rmSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, open as openFile, readFile, rename, stat } from 'node:fs/promises';
import { writeEvent } from './append-thread.js';
import { join } from 'node:path';
import {
  agentEvent,
  baseState,
  SCHEMA_VERSION,
  type AgentEvent,
  type BaseState,
  type NewEvent,
} from './schema.js';
import { AppendQueue, attachmentName, EventStoreError, fencedRun, type EventStore } from './event-store.js';

const EVENT_FILE = /^(\d{6,})-([a-z_]+)\.json$/;
/** An event's claim in `claims/`: a hard link to its file, named by the id alone (see appendSync). */
const CLAIM_FILE = /^(\d{6,})$/;

export { asFencedWriter } from './event-store.js';

/**
 * Bytes of attached files (complete command outputs) one trajectory keeps at most. Each command's
 * output is already capped where it is captured; this bounds their sum, so a run of many chatty
 * commands cannot fill the host's disk. Past it an attachment keeps what fits and says so.
 */
export const MAX_ATTACHED_BYTES = 256 * 1024 * 1024;

/** Writes a file so that readers see either nothing or the whole content: temp, fdatasync, rename. */
function writeAtomic(path: string, data: string): void {
  const tmp = `${path}.tmp`;
  writeFile(tmp, data);
  renameSync(tmp, path);
}

/** Links `file` as `claims/<id>`; a log from before claims existed gets the folder now. */
function claim(file: string, claims: string, id: string): void {
  try {
    linkSync(file, join(claims, id));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || existsSync(claims)) throw error;
    mkdirSync(claims, { recursive: true });
    linkSync(file, join(claims, id));
  }
}

/** A new file with `data`, on disk before this returns (fdatasync). */
function writeFile(path: string, data: string): void {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
  try {
    writeSync(fd, data);
    fdatasyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * One folder per conversation: `base_state.json` and `events/NNNNNN-kind.json`, one file per event,
 * each written atomically. `append` writes on a thread of its own (see append-thread.ts), so the
 * event loop never waits for the disk; appends of one store are serialized (each takes the next id).
 * `appendSync` is the same write on the calling thread, for tools and tests that build logs offline.
 */
export class FileEventStore implements EventStore {
  private readonly list: AgentEvent[];
  private attached: number;
  /** Why appends are refused: an earlier one failed in a way that may have left it half done. */
  private unusable: unknown = null;
  /** The last append in flight: the next one starts after it. */
  private readonly appends = new AppendQueue();

  private constructor(
    readonly location: string,
    readonly base: BaseState,
    events: AgentEvent[],
    private readonly maxAttachedBytes = MAX_ATTACHED_BYTES,
  ) {
    this.list = events;
    this.attached = sizeOfFiles(join(location, 'files'));
  }

  /** A store with a different attachment budget (tests). */
  withAttachmentBudget(bytes: number): FileEventStore {
    return new FileEventStore(this.location, this.base, this.list, bytes);
  }

  get events(): readonly AgentEvent[] {
    return this.list;
  }

  static create(dir: string, base: BaseState): FileEventStore {
    if (existsSync(join(dir, 'base_state.json'))) {
      throw new EventStoreError('exists', `${dir} already holds a conversation; use resume`);
    }
    mkdirSync(join(dir, 'events'), { recursive: true });
    mkdirSync(join(dir, 'files'), { recursive: true });
    mkdirSync(join(dir, 'claims'), { recursive: true });
    writeAtomic(join(dir, 'base_state.json'), `${JSON.stringify(baseState.parse(base), null, 2)}\n`);
    return new FileEventStore(dir, base, []);
  }

  /**
   * create() with the disk's waits (the folders, the fdatasync of base_state.json) off the event
   * loop: what a worker uses, whose lock renewals run on that loop and whose disk may be busy.
   */
  static async createAsync(dir: string, base: BaseState): Promise<FileEventStore> {
    const path = join(dir, 'base_state.json');
    if (existsSync(path)) {
      throw new EventStoreError('exists', `${dir} already holds a conversation; use resume`);
    }
    const text = `${JSON.stringify(baseState.parse(base), null, 2)}\n`;
    for (const sub of ['events', 'files', 'claims']) await mkdir(join(dir, sub), { recursive: true });
    const tmp = `${path}.tmp`;
    const file = await openFile(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
    try {
      await file.writeFile(text);
      await file.datasync();
    } finally {
      await file.close();
    }
    await rename(tmp, path);
    return new FileEventStore(dir, base, []);
  }

  static open(dir: string): FileEventStore {
    let raw: string;
    try {
      raw = readFileSync(join(dir, 'base_state.json'), 'utf8');
    } catch (error) {
      throw new EventStoreError('not_found', `${dir} is not a trajectory folder (no base_state.json)`, {
        cause: error,
      });
    }
    const json = parseJson(raw, 'base_state.json');
    const version = (json as { schemaVersion?: unknown }).schemaVersion;
    if (version !== SCHEMA_VERSION) {
      throw new EventStoreError(
        'unsupported_version',
        `base_state.json has schema version ${String(version)}; this build reads ${SCHEMA_VERSION}`,
      );
    }
    const base = baseState.safeParse(json);
    if (!base.success) throw new EventStoreError('corrupt', `base_state.json: ${base.error.message}`);

    const eventsDir = join(dir, 'events');
    const all = readdirSync(eventsDir);
    // Leftover temp files of an interrupted write are ignored: the claim never happened.
    for (const n of all.filter((n) => n.endsWith('.tmp'))) rmSync(join(eventsDir, n), { force: true });
    // A claim whose rename never happened (a crash in between) holds the complete event: named now.
    const named = new Set(all.flatMap((n) => EVENT_FILE.exec(n)?.[1] ?? []));
    const claimsDir = join(dir, 'claims');
    for (const n of existsSync(claimsDir) ? readdirSync(claimsDir) : []) {
      const claim = CLAIM_FILE.exec(n)?.[1];
      if (claim === undefined || named.has(claim)) continue;
      const parsed = agentEvent.safeParse(parseJson(readFileSync(join(claimsDir, n), 'utf8'), n));
      if (!parsed.success) throw new EventStoreError('corrupt', `claim ${n}: ${parsed.error.message}`);
      try {
        linkSync(join(claimsDir, n), join(eventsDir, `${claim}-${parsed.data.kind}.json`));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
    }
    const names = readdirSync(eventsDir)
      .filter((n) => EVENT_FILE.test(n))
      .sort();
    const events: AgentEvent[] = [];
    for (const [i, name] of names.entries()) {
      const parsed = agentEvent.safeParse(parseJson(readFileSync(join(dir, 'events', name), 'utf8'), name));
      if (!parsed.success) throw new EventStoreError('corrupt', `${name}: ${parsed.error.message}`);
      if (parsed.data.id !== i + 1) {
        throw new EventStoreError('corrupt', `${name}: expected event ${i + 1}, found ${parsed.data.id}`);
      }
      events.push(parsed.data);
    }
    return new FileEventStore(dir, base.data, events);
  }

  append(event: NewEvent): Promise<AgentEvent> {
    return this.appends.run(() => this.appendNow(event));
  }

  private async appendNow(event: NewEvent): Promise<AgentEvent> {
    const { full, id, tmp } = this.prepare(event);
    try {
      await writeEvent({
        tmp,
        claims: join(this.location, 'claims'),
        claim: id,
        final: join(this.location, 'events', `${id}-${full.kind}.json`),
        data: JSON.stringify(full),
      });
    } catch (error) {
      // Any failure but a refused claim may come after the claim was made: this store's view of
      // the log can no longer be trusted; the run fails and a retry opens the folder again.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') this.unusable = error;
      throw this.claimError(error, full.id);
    }
    this.list.push(full);
    return full;
  }

  /** The event with its id and time, and the temp file it is first written to. */
  private prepare(event: NewEvent): { full: AgentEvent; id: string; tmp: string } {
    if (fencedRun()) {
      throw new EventStoreError('fenced', `this run lost its job: another worker continues ${this.location}`);
    }
    if (this.unusable !== null) {
      throw new Error(`an earlier append to ${this.location} failed; open the log again`, {
        cause: this.unusable,
      });
    }
    const full: AgentEvent = { ...event, id: this.list.length + 1, ts: new Date().toISOString() };
    const id = String(full.id).padStart(6, '0');
    const tmp = join(
      this.location,
      'events',
      `${id}-${full.kind}.json.${randomBytes(6).toString('hex')}.tmp`,
    );
    return { full, id, tmp };
  }

  private claimError(error: unknown, id: number): unknown {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return error;
    return new EventStoreError(
      'conflict',
      `event ${id} of ${this.location} was written by another run of this conversation: this run stops`,
      { cause: error },
    );
  }

  /**
   * Appends one event. Two writers of one conversation (a worker frozen past its job's lock and the
   * worker that took the job over, both on this host's folder) can never both write event N: the
   * event is written complete to a temp file of this writer, then claimed by a hard link named by
   * its id alone (`claims/NNNNNN`), which fails for the second writer whatever the kind of its event;
   * only then is it renamed to its readable name. A crash between the claim and the rename leaves a
   * complete claim, which open() turns into the event.
   */
  appendSync(event: NewEvent): AgentEvent {
    const { full, id, tmp } = this.prepare(event);
    writeFile(tmp, JSON.stringify(full));
    try {
      claim(tmp, join(this.location, 'claims'), id);
    } catch (error) {
      rmSync(tmp, { force: true });
      throw this.claimError(error, full.id);
    }
    renameSync(tmp, join(this.location, 'events', `${id}-${full.kind}.json`));
    this.list.push(full);
    return full;
  }

  async readAttachment(rel: string): Promise<Buffer | null> {
    const name = attachmentName(rel);
    if (name === null) return null;
    try {
      return await readFile(join(this.location, 'files', name));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  async attachFile(sourcePath: string, name: string): Promise<string> {
    const rel = join('files', name);
    const target = join(this.location, rel);
    const size = (await stat(sourcePath)).size;
    const room = Math.max(0, this.maxAttachedBytes - this.attached);
    if (size <= room) {
      this.attached += size;
      await copyFile(sourcePath, target);
      return rel;
    }
    this.attached += await copyPrefix(
      sourcePath,
      target,
      room,
      `\n[... the trajectory's budget for attached output (${this.maxAttachedBytes} bytes) is used up: ${size - room} bytes of this output were not kept ...]\n`,
    );
    return rel;
  }
}

/**
 * Copies the first `bytes` of a file and a closing note; returns the bytes written. Off the event
 * loop (the budget is megabytes, copied while other jobs' steps wait otherwise).
 */
async function copyPrefix(from: string, to: string, bytes: number, note: string): Promise<number> {
  const src = await openFile(from, 'r');
  let written = 0;
  try {
    const dst = await openFile(to, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
    try {
      const buf = Buffer.alloc(1024 * 1024);
      while (written < bytes) {
        const { bytesRead } = await src.read(buf, 0, Math.min(buf.length, bytes - written), null);
        if (bytesRead === 0) break;
        for (let at = 0; at < bytesRead;) at += (await dst.write(buf, at, bytesRead - at)).bytesWritten;
        written += bytesRead;
      }
      written += (await dst.write(note)).bytesWritten;
    } finally {
      await dst.close();
    }
  } finally {
    await src.close();
  }
  return written;
}

function sizeOfFiles(dir: string): number {
  try {
    return readdirSync(dir).reduce((sum, name) => sum + statSync(join(dir, name)).size, 0);
  } catch {
    return 0;
  }
}

function parseJson(raw: string, name: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch (error) {
    throw new EventStoreError('corrupt', `${name} is not valid JSON`, { cause: error });
  }
}
