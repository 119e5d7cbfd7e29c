import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { holdPath, releasePath, removeHeldPaths } from '../../src/sandbox/held-paths.js';

test('removeHeldPaths removes what is held (folders with content, files), never what was released', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'ia-held-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const folder = holdPath(await mkdtemp(join(root, 'held-')));
  await writeFile(join(folder, 'inside.txt'), 'x');
  const file = holdPath(join(root, 'entry.tmp'));
  await writeFile(file, 'partial');
  const released = await mkdtemp(join(root, 'released-'));
  holdPath(released);
  releasePath(released);
  // A path held but never made (an owner that failed before creating it) is no error.
  holdPath(join(root, 'never-made'));

  await removeHeldPaths();
  assert.equal(existsSync(folder), false);
  assert.equal(existsSync(file), false);
  assert.equal(existsSync(released), true, 'its owner removes it, not this');
  // Nothing is held any more: a path made again under the same name survives a second call.
  await writeFile(file, 'again');
  await removeHeldPaths();
  assert.equal(existsSync(file), true);
});
