import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isReadOnlyCommand } from '../../src/agent/read-only-command.js';

test('plain reads skip the checkpoint', () => {
  for (const c of [
    'ls -la',
    'cat src/a.js',
    'grep -rn foo src | head -20',
    'git diff',
    'git log --oneline | wc -l',
    'true',
    'uniq -c words.txt',
    'sort -n sizes.txt',
    'rg -n foo src',
  ]) {
    assert.equal(isReadOnlyCommand(c), true, c);
  }
});

test('anything that could write is a possible change', () => {
  for (const c of [
    'echo x > a.txt',
    'cat a >> b',
    'ls; rm -rf src',
    'ls && touch x',
    'sed -i s/a/b/ f',
    'echo $(rm x)',
    'cat `touch y`',
    'git checkout -- .',
    'git stash',
    'sort -o out in',
    'npm test',
    'python3 -c "open(1)"',
    'tee file',
    'ls\nrm x',
    'find . -delete',
    // Readers that write a file or run another program.
    'env rm -rf src',
    'sort -no out in',
    'sort --compress-program=./x in',
    'tree -o out.txt',
    'uniq in.txt out.txt',
    'rg --pre ./run foo',
    'file -C -m magic',
    'git diff --output=patch.txt',
    'git grep -Ovim foo',
    'git diff --ext-diff',
  ]) {
    assert.equal(isReadOnlyCommand(c), false, c);
  }
});
