import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { chooseImage, chooseImageKind } from '../../../src/sandbox/docker/choose-image.js';

test('chooseImageKind (project files only): node for package.json, python for pyproject/requirements/setup.py, base otherwise', () => {
  assert.equal(chooseImageKind(['package.json', 'README.md']), 'node');
  assert.equal(chooseImageKind(['pyproject.toml']), 'python');
  assert.equal(chooseImageKind(['pytest.ini', 'stats.py']), 'python', 'a bare pytest project');
  assert.equal(chooseImageKind(['conftest.py']), 'python');
  assert.equal(chooseImageKind(['requirements-dev.txt']), 'python');
  assert.equal(chooseImageKind(['setup.py']), 'python');
  assert.equal(chooseImageKind(['Makefile', 'main.c']), 'base');
  assert.equal(chooseImageKind(['package.json', 'pyproject.toml']), 'node');
});

test('chooseImage: reads the workspace root; a per-repo override wins', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ia-choose-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  assert.equal(await chooseImage(dir), 'issue-agent/base:latest');
  // No project file: the code and its tests decide (src/testing/detect-project.ts).
  await writeFile(join(dir, 'test_calc.py'), 'def test_add():\n    assert 1 + 1 == 2\n');
  assert.equal(await chooseImage(dir), 'issue-agent/python:latest');
  await rm(join(dir, 'test_calc.py'));
  await writeFile(join(dir, 'calc.test.js'), "const test = require('node:test');\n");
  assert.equal(await chooseImage(dir), 'issue-agent/node:latest');
  await rm(join(dir, 'calc.test.js'));
  await writeFile(join(dir, 'requirements.txt'), '');
  assert.equal(await chooseImage(dir), 'issue-agent/python:latest');
  assert.equal(await chooseImage(dir, 'node'), 'issue-agent/node:latest');
  assert.equal(await chooseImage(dir, 'example.com/custom:1'), 'example.com/custom:1');
});
