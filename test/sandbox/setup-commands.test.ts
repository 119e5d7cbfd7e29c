import assert from 'node:assert/strict';
import { test } from 'node:test';

import type { SetupCommandResult } from '../../src/sandbox/docker/setup-phase.js';
import { SetupCommandQueue, type SetupFallbackRule } from '../../src/sandbox/setup-commands.js';

/**
 * Drives a queue as both sandboxes' setup loops do: each command "runs" and exits with the code
 * `exits` gives it (0 when absent); the first failure the queue does not absorb ends setup.
 */
function drive(
  commands: readonly string[],
  exits: Readonly<Record<string, number>>,
  rule?: SetupFallbackRule,
): { ran: string[]; failure: string | null } {
  const queue = new SetupCommandQueue(commands, rule);
  const ran: string[] = [];
  for (let command = queue.next(); command !== undefined; command = queue.next()) {
    ran.push(command);
    const exitCode = exits[command] ?? 0;
    if (exitCode === 0) continue;
    const r: SetupCommandResult = {
      command,
      exitCode,
      timedOut: false,
      durationMs: 1,
      output: `${command} failed`,
      outputBytes: 0,
    };
    const failure = queue.failed(r, `exited with ${exitCode}`);
    if (failure !== null) return { ran, failure };
  }
  return { ran, failure: null };
}

const RULE: SetupFallbackRule = (r) =>
  r.command === 'install' ? { why: 'its backend is missing', commands: ['deps', 'path', 'check'] } : null;

test('a failed command with a fallback: its commands run in its place, then the rest', () => {
  assert.deepEqual(drive(['venv', 'install', 'after'], { install: 1 }, RULE), {
    ran: ['venv', 'install', 'deps', 'path', 'check', 'after'],
    failure: null,
  });
});

test('without a fallback, or when the rule declines, the first failure ends setup as before', () => {
  assert.deepEqual(drive(['venv', 'install', 'after'], { install: 2 }), {
    ran: ['venv', 'install'],
    failure: 'the setup command `install` exited with 2',
  });
  assert.deepEqual(drive(['venv', 'other', 'install'], { other: 1 }, RULE), {
    ran: ['venv', 'other'],
    failure: 'the setup command `other` exited with 1',
  });
});

test('a fallback command that fails ends setup with both failures in the message', () => {
  assert.deepEqual(drive(['venv', 'install', 'after'], { install: 1, check: 1 }, RULE), {
    ran: ['venv', 'install', 'deps', 'path', 'check'],
    failure:
      'the setup command `install` exited with 1 (its backend is missing), and `check`, run in its place, exited with 1',
  });
});

test('after a fallback, a later command fails on its own, and no second fallback is taken', () => {
  assert.deepEqual(drive(['install', 'after'], { install: 1, after: 3 }, RULE), {
    ran: ['install', 'deps', 'path', 'check', 'after'],
    failure: 'the setup command `after` exited with 3',
  });
  const always: SetupFallbackRule = () => ({ why: 'again', commands: ['instead'] });
  assert.deepEqual(drive(['a', 'b'], { a: 1, b: 1 }, always), {
    ran: ['a', 'instead', 'b'],
    failure: 'the setup command `b` exited with 1',
  });
});
