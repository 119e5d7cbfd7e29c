import { Worker } from 'node:worker_threads';

/**
 * One event file written the way FileEventStore.appendSync writes it (temp file, fdatasync, the
 * claim link, the rename), on a thread of its own: the calling thread's event loop never waits for
 * the disk. On an idle disk an fdatasync is a fraction of a millisecond; on one that Docker and npm
 * keep busy it took seconds, and a worker's loop also renews every job's lock and serves every other
 * job. One thread does the writes in order, with synchronous calls: a single hop per append, where
 * fs.promises would make six (open, write, datasync, close, link, rename), each a thread-pool round
 * trip (measured: twice the harness overhead per step).
 */
export interface AppendWrite {
  readonly tmp: string;
  readonly claims: string;
  readonly claim: string;
  readonly final: string;
  readonly data: string;
}

// Plain CommonJS, evaluated as the thread's code: no file to ship beside a bundle (the Action).
const CODE = `
const { parentPort } = require('node:worker_threads');
const fs = require('node:fs');
const path = require('node:path');
parentPort.on('message', (m) => {
  try {
    const fd = fs.openSync(m.tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC, 0o600);
    try {
      const bytes = Buffer.from(m.data, 'utf8');
      for (let at = 0; at < bytes.length; ) at += fs.writeSync(fd, bytes, at, bytes.length - at);
      fs.fdatasyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    try {
      try {
        fs.linkSync(m.tmp, path.join(m.claims, m.claim));
      } catch (error) {
        if (error.code !== 'ENOENT' || fs.existsSync(m.claims)) throw error;
        fs.mkdirSync(m.claims, { recursive: true });
        fs.linkSync(m.tmp, path.join(m.claims, m.claim));
      }
    } catch (error) {
      fs.rmSync(m.tmp, { force: true });
      throw error;
    }
    fs.renameSync(m.tmp, m.final);
    parentPort.postMessage({ seq: m.seq });
  } catch (error) {
    parentPort.postMessage({ seq: m.seq, code: error.code ?? null, message: String(error.message ?? error) });
  }
});
`;

interface Reply {
  readonly seq: number;
  readonly code?: string | null;
  readonly message?: string;
}

type Pending = Map<number, { resolve: () => void; reject: (e: Error) => void }>;

/** The live writer and the writes it has not answered; a new thread gets a map of its own. */
let current: { readonly thread: Worker; readonly pending: Pending } | null = null;
let seq = 0;

function writer(): { readonly thread: Worker; readonly pending: Pending } {
  if (current !== null) return current;
  const thread = new Worker(CODE, { eval: true });
  const pending: Pending = new Map();
  const mine = { thread, pending };
  thread.on('message', (r: Reply) => {
    const p = pending.get(r.seq);
    pending.delete(r.seq);
    if (pending.size === 0) thread.unref();
    if (p === undefined) return;
    if (r.message === undefined) p.resolve();
    else p.reject(Object.assign(new Error(r.message), { code: r.code ?? undefined }));
  });
  // An error is followed by exit; the next write goes to a new thread from the error on.
  thread.on('error', () => {
    if (current === mine) current = null;
  });
  thread.on('exit', (code) => {
    if (current === mine) current = null;
    const error = new Error(`the event writer thread exited (${code}) before answering`);
    for (const p of pending.values()) p.reject(error);
    pending.clear();
  });
  thread.unref();
  current = mine;
  return mine;
}

/** Writes one event file on the writer thread; rejects with the fs error (its `code` kept). */
export function writeEvent(w: AppendWrite): Promise<void> {
  const { thread, pending } = writer();
  seq += 1;
  const id = seq;
  return new Promise<void>((resolve, reject) => {
    pending.set(id, { resolve, reject });
    thread.ref();
    thread.postMessage({ seq: id, ...w });
  });
}
