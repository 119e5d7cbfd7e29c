// The checks `npm test` makes before the tests: lint, format, types, the Action bundle, the build.
// Each is single-threaded, so on a 2-core machine they run in two lanes at once (lint alone, the rest
// in order, the build last because the tests need it); each check's output is printed whole when it
// ends, and the first failure fails the whole (after both lanes end, so no output is cut off).
import { spawn } from 'node:child_process';

const lanes = [['lint'], ['format:check', 'typecheck', 'check:action', 'build']];

function run(script) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn('npm', ['run', '--silent', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks = [];
    child.stdout.on('data', (c) => chunks.push(c));
    child.stderr.on('data', (c) => chunks.push(c));
    child.on('close', (code) => {
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      process.stdout.write(`━━ ${code === 0 ? '✔' : '✖'} npm run ${script} · ${seconds} s\n`);
      for (const c of chunks) process.stdout.write(c);
      resolve(code === 0);
    });
  });
}

const results = await Promise.all(
  lanes.map(async (lane) => {
    for (const script of lane) if (!(await run(script))) return false;
    return true;
  }),
);
process.exit(results.every(Boolean) ? 0 : 1);
