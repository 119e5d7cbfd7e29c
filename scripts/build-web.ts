/**
 * Bundles the browser client (src/server/web) into dist/web: index.html, and under assets/ app.js
 * (one ES module, with its source map) and app.css. The server serves index.html at `/` and
 * `/runs/:id`, and `dist/web/assets/<file>` at `/assets/<file>`.
 * `npm run build:web`; also used by the browser tests and the run-view benchmark.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

export const ROOT = join(import.meta.dirname, '..');
export const WEB_SRC = join(ROOT, 'src', 'server', 'web');
export const WEB_DIST = join(ROOT, 'dist', 'web');

export async function buildWeb(outDir = WEB_DIST): Promise<string> {
  const assets = join(outDir, 'assets');
  mkdirSync(assets, { recursive: true });
  await build({
    entryPoints: [join(WEB_SRC, 'main.ts')],
    outfile: join(assets, 'app.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022'],
    minify: true,
    sourcemap: true,
    // Nothing of Node may reach the bundle: a stray import fails the build instead.
    external: [],
    logLevel: 'warning',
    legalComments: 'none',
  });
  copyFileSync(join(WEB_SRC, 'index.html'), join(outDir, 'index.html'));
  copyFileSync(join(WEB_SRC, 'app.css'), join(assets, 'app.css'));
  return outDir;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const out = await buildWeb();
  console.log(`browser client built into ${out}`);
}
