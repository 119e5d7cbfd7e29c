import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ROOT } from '../support/pipeline.js';

const check = (out: string) =>
  spawnSync(process.execPath, ['scripts/build-action.mjs', '--check', '--out', out], {
    cwd: ROOT,
    encoding: 'utf8',
  });

/** Must-show 5: the committed bundle is what the sources build to, and `npm test` fails otherwise. */
describe('the bundled action entry', () => {
  const temp = mkdtempSync(join(tmpdir(), 'ia-bundle-'));
  after(() => {
    rmSync(temp, { recursive: true, force: true });
  });

  it('dist-action/ matches a fresh build of src/action/main.ts', () => {
    const r = check('dist-action');
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  });

  it('a stale, missing or extra file fails the check with the command that fixes it', () => {
    const stale = join(temp, 'stale');
    cpSync(join(ROOT, 'dist-action'), stale, { recursive: true });
    appendFileSync(join(stale, 'index.mjs'), '\n// edited by hand\n');
    const r1 = check(stale);
    assert.equal(r1.status, 1);
    assert.match(r1.stderr, /index\.mjs differs from a fresh build/);
    assert.match(r1.stderr, /npm run build:action/);

    const missing = join(temp, 'missing');
    cpSync(join(ROOT, 'dist-action'), missing, { recursive: true });
    unlinkSync(join(missing, 'index.mjs'));
    appendFileSync(join(missing, 'old-chunk.mjs'), 'export {};\n');
    const r2 = check(missing);
    assert.equal(r2.status, 1);
    assert.match(r2.stderr, /index\.mjs is missing/);
    assert.match(r2.stderr, /old-chunk\.mjs is not produced by the build/);
  });

  it('package.json runs the check before the tests', async () => {
    const { default: pkg } = (await import(join(ROOT, 'package.json'), { with: { type: 'json' } })) as {
      default: { scripts: Record<string, string> };
    };
    // `npm test` makes its checks (scripts/checks.mjs, check:action and the build among them) before
    // the tests, which then run the programs they start from that build (--built).
    assert.match(pkg.scripts.test ?? '', /^node scripts\/checks\.mjs && npm run test:unit -- --built$/);
    assert.match(readFileSync(join(ROOT, 'scripts', 'checks.mjs'), 'utf8'), /'check:action'/);
    assert.equal(pkg.scripts['check:action'], 'node scripts/build-action.mjs --check');
  });
});
