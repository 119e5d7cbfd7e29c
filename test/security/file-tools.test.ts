import assert from 'node:assert/strict';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { defaultTools } from '../../src/agent/tools/index.js';
import { newToolContext, runToolCall } from '../../src/agent/tools/tool.js';
import { DockerSandbox } from '../../src/sandbox/docker/docker-sandbox.js';
import { LocalSandbox, canIsolate } from '../../src/sandbox/local/local-sandbox.js';
import type { Sandbox } from '../../src/sandbox/sandbox.js';
import { dockerEngine, testOwner } from '../sandbox/docker/docker-test-support.js';
import { attack, hostCanary, racerBinary } from './support.js';

/** Rounds per file tool while the racer swaps `d` and `l` (the issue asks for at least 200). */
const ROUNDS = 200;
const tools = defaultTools();

/**
 * The editor race: a process left running in the sandbox swaps a directory `d` with a link `l` to a
 * host directory (renameat2 RENAME_EXCHANGE in a loop) while every file tool works on `d/…`. On a
 * host that checks a path and opens it later, some calls land in the host directory: they read its
 * secret, or create files there (as the worker's user). The attack succeeds if any call read the
 * secret or left anything in the host directory.
 */
async function editorRace(sandbox: Sandbox, canary: ReturnType<typeof hostCanary>): Promise<void> {
  const ctx = newToolContext({ sandbox, limits: DEFAULT_LIMITS });
  const started = await sandbox.exec('(./racer d l >/dev/null 2>&1 &) ; sleep 0.2; pgrep -c racer', {
    timeoutMs: 10_000,
  });
  assert.match(started.output, /^[1-9]/m, `the racer runs: ${started.output}`);
  const outcomes = new Map<string, number>();
  const call = async (input: Record<string, unknown>): Promise<void> => {
    const r = await runToolCall(tools, 'editor', input, ctx);
    assert.ok(!r.content.includes(canary.secret), `the host secret came out: ${r.content.slice(0, 200)}`);
    const key = `${String(input.command)}:${r.isError ? 'refused' : 'ok'}`;
    outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
  };
  for (let i = 0; i < ROUNDS; i++) {
    await call({ command: 'view', path: 'd/secret' });
    await call({ command: 'view', path: 'd/sub' });
    await call({ command: 'create', path: `d/created-${i}`, file_text: 'pwned\n' });
    await call({ command: 'create', path: `d/newdir-${i}/x`, file_text: 'pwned\n' });
    await call({ command: 'str_replace', path: 'd/secret', old_str: 'inside', new_str: 'inside' });
    await call({ command: 'insert', path: 'd/secret', insert_line: 0, new_str: 'pwned' });
    await call({ command: 'undo_edit', path: 'd/secret' });
    await call({ command: 'undo_edit', path: `d/created-${i}` });
  }
  await sandbox.exec('pkill racer; true', { timeoutMs: 10_000 });
  // The race was real: some calls saw the directory, some the link.
  assert.ok((outcomes.get('view:ok') ?? 0) > 0, JSON.stringify([...outcomes]));
  assert.ok((outcomes.get('view:refused') ?? 0) > 0, JSON.stringify([...outcomes]));
  assert.deepEqual(readdirSync(canary.dir).sort(), ['secret', 'sub'], 'nothing was created on the host');
  assert.deepEqual(readdirSync(join(canary.dir, 'sub')), ['secret']);
  assert.equal(readFileSync(canary.file, 'utf8'), `${canary.secret}\n`, 'the host secret is unchanged');
}

/** A workspace holding the racer, `d/secret`, `d/sub/` and `l` → the host canary directory. */
function raceWorkspace(canary: ReturnType<typeof hostCanary>): string {
  const ws = mkdtempSync(join(tmpdir(), 'ia-race-ws-'));
  copyFileSync(racerBinary(), join(ws, 'racer'));
  mkdirSync(join(ws, 'd', 'sub'), { recursive: true });
  writeFileSync(join(ws, 'd', 'secret'), 'inside\n');
  writeFileSync(join(ws, 'd', 'sub', 'secret'), 'inside\n');
  symlinkSync(canary.dir, join(ws, 'l'));
  execChmod(join(ws, 'racer'));
  return ws;
}

function execChmod(path: string): void {
  // copyFileSync keeps the mode on Linux; make sure anyway.
  writeFileSync(path, readFileSync(path), { mode: 0o755 });
}

const engine = dockerEngine();
attack(
  'editor race against the Docker sandbox (view, create, mkdir, str_replace, insert, undo while a racer swaps a dir and a link to a host dir)',
  async (t) => {
    if (!('docker' in engine)) throw new Error(engine.reason);
    const canary = hostCanary();
    const ws = raceWorkspace(canary);
    const sandbox = await DockerSandbox.create({
      docker: engine.docker,
      workspace: ws,
      jobId: 'attack-race',
      image: 'issue-agent/base:latest',
      owner: testOwner('attack'),
    });
    t.after(async () => {
      await sandbox.close();
      rmSync(ws, { recursive: true, force: true });
      rmSync(canary.dir, { recursive: true, force: true });
    });
    await editorRace(sandbox, canary);
  },
  {
    timeout: 300_000,
    skip: 'reason' in engine && !engine.required ? engine.reason : false,
  },
);

const isolation = await canIsolate();
attack(
  'editor race against the isolated local sandbox (the host dir is one the sandbox hides)',
  async (t) => {
    const canary = hostCanary();
    const ws = raceWorkspace(canary);
    const sandbox = await LocalSandbox.create({
      workspace: ws,
      path: process.env.PATH ?? '/usr/bin:/bin',
      isolate: { hide: [canary.dir] },
    });
    t.after(async () => {
      await sandbox.close();
      rmSync(ws, { recursive: true, force: true });
      rmSync(canary.dir, { recursive: true, force: true });
    });
    await editorRace(sandbox, canary);
  },
  { timeout: 300_000, skip: isolation ? false : 'this host allows no namespaces for the isolated sandbox' },
);
