// Bundles the four programs the package ships (the App, the worker, the CLI and the run server) over
// the files tsc wrote for their entries, so every way of starting them (npm start, the image's CMD,
// compose, bin/issue-agent.js, the tests' `--built` runs) runs one file per program: part of `npm run
// build`, after tsc. The rest of dist/ stays as tsc wrote it.
//
// Why: starting a program from tsc's output resolves, reads and compiles each of its ~700 modules
// (ours and node_modules') one by one; on the machines measured here that was most of a start's CPU.
// One bundle per program cut it by a third to a half (docs/benchmarks.md, "Programs shipped as
// bundles"): a worker or an App host that restarts, a CLI run, an Action run (bundled the same way,
// scripts/build-action.mjs) all pay less.
//
// Kept outside the bundles, loaded from node_modules when used:
// - native add-ons (ssh2's, optional and loaded in try/catch; pure JavaScript fallbacks are used);
// - bull-board (the admin page, loaded on its first request; it serves its UI's files from its own
//   package folder);
// - the OpenTelemetry SDK (loaded only when an OTLP endpoint is set).
// CommonJS dependencies call require() and read __dirname / __filename: the banner gives the bundle
// its own (a dependency's path-relative lookups then start from dist/…, as optional ones may fail;
// none the programs use reads a file beside itself: checked by the programs' tests, which run the
// bundles). Files our code reads beside itself (`new URL('./x', import.meta.url)`: the local sandbox's
// launcher.sh) are copied next to each bundle that contains the module reading them.
import { build } from 'esbuild';
import { copyFileSync, existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

const ENTRIES = ['src/app/main.ts', 'workers/main.ts', 'src/cli/main.ts', 'src/server/main.ts'];

/** Module → the file it reads beside itself. */
const ASSETS = { 'src/sandbox/local/launch.ts': 'src/sandbox/local/launcher.sh' };

const EXTERNAL = [
  'cpu-features',
  '*.node',
  '@bull-board/*',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/resources',
  '@opentelemetry/sdk-trace-node',
];

const BANNER = [
  "import { createRequire as __iaCreateRequire } from 'node:module';",
  "import { fileURLToPath as __iaFileURLToPath } from 'node:url';",
  "import { dirname as __iaDirname } from 'node:path';",
  'const require = __iaCreateRequire(import.meta.url);',
  'const __filename = __iaFileURLToPath(import.meta.url);',
  'const __dirname = __iaDirname(__filename);',
].join('\n');

// `--out <dir>` writes the bundles under another folder than dist/ (the tests build into a scratch one).
const outArg = process.argv.indexOf('--out');
const OUT = outArg === -1 ? 'dist' : process.argv[outArg + 1];

for (const entry of ENTRIES) {
  const outfile = join(OUT, entry.replace(/\.ts$/, '.js'));
  const result = await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node22',
    format: 'esm',
    splitting: false,
    minify: false,
    // Linked, without the sources: a debugger or --enable-source-maps maps a line back to its module.
    sourcemap: 'linked',
    sourcesContent: false,
    legalComments: 'linked',
    external: EXTERNAL,
    banner: { js: BANNER },
    metafile: true,
    logLevel: 'warning',
  });
  for (const [module, asset] of Object.entries(ASSETS)) {
    if (!(module in result.metafile.inputs)) continue;
    if (!existsSync(asset)) throw new Error(`${asset} is missing`);
    copyFileSync(asset, join(dirname(outfile), basename(asset)));
  }
}
