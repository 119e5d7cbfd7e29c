// Bundles the GitHub Action's entry (src/action/main.ts) with everything it needs at start-up into
// dist-action/index.mjs, which action.yml runs. `--check` builds into a temporary folder and fails
// when the committed bundle differs, so CI catches a bundle that was not rebuilt.
//
// Files the code reads beside itself (`new URL('./x', import.meta.url)`) are copied next to the
// bundle, where the same expression finds them: the local sandbox's launcher.sh. Copied rather than
// inlined as text (esbuild's `text` loader) so that one line of code reads it in every form (src
// through tsx, the compiled dist/, this bundle), and the shipped script stays a file that the check
// below compares byte for byte and that shellcheck and a reader can open.
import { build } from 'esbuild';
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

/** Read at start by bundled modules, from beside the bundle (see above). */
const ASSETS = ['src/sandbox/local/launcher.sh'];

// `--out <dir>` compares against (or writes) another folder; the tests use it on a copy.
const outArg = process.argv.indexOf('--out');
const OUT = outArg === -1 ? 'dist-action' : process.argv[outArg + 1];
const check = process.argv.includes('--check');
const outdir = check ? mkdtempSync(join(tmpdir(), 'ia-action-')) : OUT;

await build({
  entryPoints: { index: 'src/action/main.ts' },
  outdir,
  outExtension: { '.js': '.mjs' },
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  splitting: false,
  minify: false,
  sourcemap: false,
  legalComments: 'linked',
  // Native add-ons of ssh2 (pulled in by dockerode) are optional and loaded in try/catch; the pure
  // JavaScript fallbacks are used without them.
  external: ['cpu-features', '*.node'],
  // Some dependencies are CommonJS and call require(); an ES module bundle needs one made for it.
  banner: {
    js: "import { createRequire as __iaCreateRequire } from 'node:module'; const require = __iaCreateRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
for (const asset of ASSETS) copyFileSync(asset, join(outdir, basename(asset)));

if (check) {
  const problems = [];
  for (const name of readdirSync(outdir)) {
    const committed = join(OUT, name);
    if (!existsSync(committed)) problems.push(`${committed} is missing`);
    else if (!readFileSync(committed).equals(readFileSync(join(outdir, name))))
      problems.push(`${committed} differs from a fresh build`);
  }
  for (const name of existsSync(OUT) ? readdirSync(OUT) : [])
    if (!existsSync(join(outdir, name))) problems.push(`${join(OUT, name)} is not produced by the build`);
  rmSync(outdir, { recursive: true, force: true });
  if (problems.length > 0) {
    console.error(
      `The action bundle is out of date:\n  ${problems.join('\n  ')}\nRun \`npm run build:action\` and commit ${OUT}/.`,
    );
    process.exit(1);
  }
  console.log(`${OUT}/ matches a fresh build`);
}
