import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tallied } from '../support/attack-log.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext, type TestOptions } from 'node:test';
import { fileURLToPath } from 'node:url';

/**
 * The standing attack suite. Each `attack` is one attempt of a hostile model (a prompt injection
 * steers it) to get something across the sandbox boundary: read, write or run something outside,
 * or get a secret out. The test passes when the attack fails. Every attempt is tallied in the file
 * named by ISSUE_AGENT_ATTACK_LOG (set by scripts/run-tests.mjs, which prints the one-line total:
 * attacks tried, succeeded).
 */
export function attack(
  name: string,
  fn: (t: TestContext) => Promise<void>,
  options: { readonly timeout?: number; readonly skip?: string | false } = {},
): void {
  attackTest(name, { timeout: options.timeout ?? 120_000, skip: options.skip ?? false }, fn);
}

let racerPath: string | null = null;

/**
 * A static binary that swaps two paths with renameat2(RENAME_EXCHANGE) in a loop, forever: the
 * process a hostile agent leaves running to win a race between a check and a use.
 */
export function racerBinary(): string {
  if (racerPath !== null && existsSync(racerPath)) return racerPath;
  const dir = mkdtempSync(join(tmpdir(), 'ia-racer-'));
  const out = join(dir, 'racer');
  const source = fileURLToPath(new URL('./fixtures/racer.c', import.meta.url));
  execFileSync('gcc', ['-O2', '-static', '-o', out, source], { stdio: 'pipe' });
  racerPath = out;
  return out;
}

/** A host directory outside every workspace holding a secret that must never come out. */
export function hostCanary(): { readonly dir: string; readonly secret: string; readonly file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'ia-host-canary-'));
  mkdirSync(join(dir, 'sub'));
  const secret = `HOST-CANARY-${Math.random().toString(36).slice(2)}`;
  const file = join(dir, 'secret');
  execFileSync('sh', [
    '-c',
    'printf "%s\\n" "$1" > "$2" && cp "$2" "$3/sub/secret"',
    'sh',
    secret,
    file,
    dir,
  ]);
  return { dir, secret, file };
}

export { runScripted, type ScriptedRun } from './scripted-run.js';

/** A committed git repository in a fresh temp dir (what a job's workspace copy is). */
export function gitWorkspace(files: Readonly<Record<string, string>> = { 'README.md': 'hello\n' }): string {
  const ws = mkdtempSync(join(tmpdir(), 'ia-attack-ws-'));
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(join(ws, name, '..'), { recursive: true });
    writeFileSync(join(ws, name), content);
  }
  const git = (...args: string[]): void => {
    execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.invalid', ...args], {
      cwd: ws,
      stdio: 'ignore',
    });
  };
  git('init', '-q', '-b', 'main');
  git('add', '-A');
  git('commit', '-q', '-m', 'initial');
  return ws;
}

type TestFn = (t: TestContext) => Promise<void> | void;

/**
 * `test`/`it` for an attack that lives beside the code it attacks (host git, webhooks, policy,
 * isolation): same call shape, and the attempt is tallied with the suite's.
 */
export function attackTest(name: string, fn: TestFn): void;
export function attackTest(name: string, options: TestOptions, fn: TestFn): void;
export function attackTest(name: string, a: TestOptions | TestFn, b?: TestFn): void {
  const fn = typeof a === 'function' ? a : b;
  const options = typeof a === 'function' ? {} : a;
  if (fn === undefined) throw new Error('attackTest needs a function');
  test(`attack: ${name}`, options, (t) => tallied(name, async () => fn(t)));
}
