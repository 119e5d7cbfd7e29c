// TypeScript for the test processes and the programs they start from source: `node --import
// ./scripts/ts-hooks.mjs file.ts`. Node's synchronous module hooks (`module.registerHooks`, in the
// loading thread) and esbuild's `transformSync`, each file's output kept on disk by its path and
// text. What tsx does, without its hooks thread: every import there is a message to another thread
// and back, which cost about 1 s of CPU per test process here (a whole test file of 3 s). Types are
// only stripped, never checked (`npm run typecheck` does that), as with tsx.
//
// A relative `./x.js` that does not exist resolves to `./x.ts` beside it (the project's imports name
// the compiled file, as NodeNext wants). Source maps are inline and enabled, so stack traces name
// the .ts file's own lines.
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';
import { threadId } from 'node:worker_threads';

// esbuild is loaded on the first file not in the cache: most processes find every file there.
const require = nodeModule.createRequire(import.meta.url);
const esbuildVersion = require('esbuild/package.json').version;
let esbuild;

/** Bump when the options below change: it is part of every cache key. */
const OPTIONS_VERSION = '1';
const OPTIONS = {
  loader: 'ts',
  format: 'esm',
  target: 'node22',
  sourcemap: 'inline',
  // tsconfig.json's settings that change the output: imports are kept as written (verbatim), and
  // class fields are defined as ES2022+ defines them.
  tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true, useDefineForClassFields: true } },
};
const uid = typeof process.getuid === 'function' ? process.getuid() : -1;
const CACHE = join(tmpdir(), `issue-agent-ts-${uid}`);
mkdirSync(CACHE, { recursive: true, mode: 0o700 });
// Code from the cache runs as this user: a folder someone else made (in a shared /tmp) or may write
// to is not used, and every file is compiled anew.
const folder = lstatSync(CACHE);
const cacheUsable = folder.isDirectory() && (uid === -1 || folder.uid === uid) && (folder.mode & 0o022) === 0;

process.setSourceMapsEnabled(true);

function isLocal(specifier) {
  return specifier.startsWith('./') || specifier.startsWith('../') || specifier.startsWith('file:');
}

function compile(path) {
  const source = readFileSync(path, 'utf8');
  const key = createHash('sha256')
    .update(`${esbuildVersion}\0${OPTIONS_VERSION}\0${path}\0`)
    .update(source)
    .digest('hex');
  const cached = join(CACHE, `${key}.mjs`);
  if (cacheUsable) {
    try {
      return readFileSync(cached, 'utf8');
    } catch {
      // Not compiled yet.
    }
  }
  esbuild ??= require('esbuild');
  const { code } = esbuild.transformSync(source, { ...OPTIONS, sourcefile: path });
  if (!cacheUsable) return code;
  // Written whole under a name of its own, then renamed: a process reading it sees all of it or none.
  const partial = `${cached}.${process.pid}.${threadId}.tmp`;
  writeFileSync(partial, code, { mode: 0o600 });
  renameSync(partial, cached);
  return code;
}

// Node before 22.15 has no synchronous hooks: tsx then, as before.
if (typeof nodeModule.registerHooks !== 'function') await import('tsx');
else
  nodeModule.registerHooks({
    resolve(specifier, context, nextResolve) {
      if (specifier.endsWith('.js') && isLocal(specifier) && context.parentURL?.startsWith('file:')) {
        const ts = new URL(`${specifier.slice(0, -3)}.ts`, context.parentURL);
        if (!ts.pathname.includes('/node_modules/') && existsSync(fileURLToPath(ts)))
          return { url: ts.href, format: 'module', shortCircuit: true };
      }
      return nextResolve(specifier, context);
    },
    load(url, context, nextLoad) {
      if (!url.startsWith('file:') || !url.endsWith('.ts') || url.includes('/node_modules/'))
        return nextLoad(url, context);
      return { format: 'module', source: compile(fileURLToPath(url)), shortCircuit: true };
    },
  });
