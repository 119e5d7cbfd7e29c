// Runs every test file with node's test runner (TypeScript through tsx). Node 20 has no glob support
// in --test, so the files are listed here. Extra arguments filter by path substring.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
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
// The attack suite (test/security) tallies every attack it tries here; the total is printed last.
const tally = mkdtempSync(join(tmpdir(), 'ia-attacks-'));
const attackLog = join(tally, 'attacks.jsonl');
const r = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-concurrency=2', ...files],
  { stdio: 'inherit', env: { ...process.env, ISSUE_AGENT_ATTACK_LOG: attackLog } },
);
let attacks = [];
try {
  attacks = readFileSync(attackLog, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l));
} catch {
  attacks = [];
}
rmSync(tally, { recursive: true, force: true });
if (attacks.length > 0) {
  const succeeded = attacks.filter((a) => a.succeeded);
  for (const a of succeeded) console.log(`attack succeeded: ${a.name}`);
  console.log(`security: ${attacks.length} attacks tried, ${succeeded.length} succeeded`);
}
process.exit(r.status ?? 1);
