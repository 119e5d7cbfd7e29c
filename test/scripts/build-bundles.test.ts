import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FROM_DIST } from '../support/entry.js';
import { ROOT } from '../support/pipeline.js';

/** The programs `npm run build` bundles, at the paths everything starts them by. */
const PROGRAMS = ['src/app/main.js', 'workers/main.js', 'src/cli/main.js', 'src/server/main.js'];

/** What a bundle may still import at run time besides Node's own modules: the declared externals. */
const EXTERNAL =
  /^(@bull-board\/|@opentelemetry\/(exporter-trace-otlp-http|resources|sdk-trace-node)$|cpu-features$)/;

/**
 * Every package a bundle imports, statically (esbuild puts those imports at the start of a line) or
 * dynamically with a literal name. Relative names are left out: they appear in dependencies' strings
 * and comments, and a bundle has no module of its own to import by path.
 */
function importedPackages(text: string): string[] {
  const found = new Set<string>();
  for (const m of text.matchAll(/^import [^\n;]* from "([^"]+)";$/gm)) found.add(m[1] ?? '');
  for (const m of text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)) found.add(m[1] ?? '');
  return [...found].filter((name) => !/^[./]/.test(name));
}

const run = (file: string, args: string[], env: Record<string, string>) =>
  spawnSync(process.execPath, [file, ...args], {
    cwd: tmpdir(),
    encoding: 'utf8',
    timeout: 60_000,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
  });

describe('the shipped programs are bundles (scripts/build-bundles.mjs)', () => {
  // Under `npm test` the build just made dist/ (FROM_DIST); otherwise the bundles are built here.
  let out = join(ROOT, 'dist');
  before(() => {
    if (FROM_DIST) return;
    out = mkdtempSync(join(tmpdir(), 'ia-bundles-'));
    const r = spawnSync(process.execPath, ['scripts/build-bundles.mjs', '--out', out], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  });
  after(() => {
    if (!FROM_DIST) rmSync(out, { recursive: true, force: true });
  });

  it('each program is one file that imports nothing from node_modules but the declared externals', () => {
    for (const program of PROGRAMS) {
      const text = readFileSync(join(out, program), 'utf8');
      const outside = importedPackages(text).filter((m) => !isBuiltin(m) && !EXTERNAL.test(m));
      assert.deepEqual(outside, [], `${program} imports ${outside.join(', ')} at run time`);
      // The bundle holds our modules and the dependencies (esbuild names each module's origin).
      assert.match(text, /^\/\/ node_modules\/zod\//m, program);
      // CommonJS dependencies call require() and read __dirname / __filename (ioredis on an error's
      // path, for one): an ES module has none unless the bundle defines them.
      for (const name of ['require', '__filename', '__dirname'])
        assert.match(text, new RegExp(`^const ${name} = `, 'm'), `${program} defines ${name}`);
    }
  });

  it("the local sandbox's launcher is beside every bundle that reads it", () => {
    for (const program of ['src/app/main.js', 'workers/main.js', 'src/cli/main.js']) {
      const dir = join(out, program, '..');
      assert.ok(existsSync(join(dir, 'launcher.sh')), `launcher.sh beside ${program}`);
      assert.equal(
        readFileSync(join(dir, 'launcher.sh'), 'utf8'),
        readFileSync(join(ROOT, 'src/sandbox/local/launcher.sh'), 'utf8'),
      );
    }
  });

  it('each program loads whole and ends with its own message', () => {
    const cli = run(join(out, 'src/cli/main.js'), ['--help'], {});
    assert.equal(cli.status, 0, cli.stderr);
    assert.match(cli.stdout, /issue-agent resolve <repo-dir>/);

    const worker = run(join(out, 'workers/main.js'), [], {});
    assert.match(worker.stderr, /issue-agent worker: invalid App settings: APP_ID/);

    const app = run(join(out, 'src/app/main.js'), [], {
      APP_ID: '1',
      WEBHOOK_SECRET: 's',
      PRIVATE_KEY: 'not a key',
    });
    assert.match(app.stderr, /issue-agent app: PRIVATE_KEY is not a PEM private key/);

    const server = run(join(out, 'src/server/main.js'), [], { PORT: 'x' });
    assert.match(server.stderr, /issue-agent server: invalid server settings: PORT/);
  });

  it('npm run build makes them, and the image builds with the script', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    assert.match(pkg.scripts.build ?? '', /&& node scripts\/build-bundles\.mjs$/);
    assert.match(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'), /COPY [^\n]*scripts\/build-bundles\.mjs/);
    assert.match(readFileSync(join(ROOT, '.dockerignore'), 'utf8'), /^!scripts\/build-bundles\.mjs$/m);
  });
});
