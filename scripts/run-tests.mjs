// Runs every test file with node's test runner (TypeScript through tsx). Node 20 has no glob support
// in --test, so the files are listed here. Extra arguments filter by path substring.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return name === 'fixtures' ? [] : walk(p);
    return p.endsWith('.test.ts') ? [p] : [];
  });
}

const filters = process.argv.slice(2);
const files = walk('test')
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const r = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-concurrency=2', ...files],
  { stdio: 'inherit' },
);
process.exit(r.status ?? 1);
