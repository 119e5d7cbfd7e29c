import assert from 'node:assert/strict';
import { readFile, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { test } from 'node:test';
import { caMountFile } from '../../../src/sandbox/docker/ca-file.js';

test('the CA mount file: one file per content, 0644 in a 0700 folder, written again when removed', async () => {
  const pem = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  const path = await caMountFile(pem);
  assert.equal(await caMountFile(pem), path, 'the same content, the same file');
  assert.deepEqual(await readFile(path), pem);
  assert.equal((await stat(path)).mode & 0o777, 0o644, 'readable by the sandbox user through the mount');
  assert.equal((await stat(dirname(path))).mode & 0o777, 0o700, 'the folder is the worker’s own');
  const other = await caMountFile(Buffer.from('other'));
  assert.notEqual(other, path);
  await rm(path);
  assert.equal(await caMountFile(pem), path);
  assert.deepEqual(await readFile(path), pem, 'a removed file (a tmp cleaner) is written again');
  await rm(dirname(path), { recursive: true, force: true });
  assert.equal(await caMountFile(pem), path);
  assert.equal((await stat(dirname(path))).mode & 0o777, 0o700, 'and so is a removed folder');
  await rm(dirname(path), { recursive: true, force: true });
});
