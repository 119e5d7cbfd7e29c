/**
 * The pre-receive hook every simulated repository runs: it hands the push's ref updates (and where
 * git keeps the push's quarantined objects) to the simulator, which answers with the refusal lines
 * GitHub would print, or none. The hook prints them as `error: …` (git shows `remote: error: …`) and
 * exits 1, which refuses the whole push, as GitHub does.
 */
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The simulator's endpoint a push's hook calls: `/_sim/pre-receive/<push id>`. */
export const PRE_RECEIVE_PATH = /^\/_sim\/pre-receive\/([0-9a-f]{32})$/;

/** The environment variable holding the hook's URL, set for each push. */
export const HOOK_URL_VARIABLE = 'GITHUB_SIM_PRE_RECEIVE_URL';

const HOOK = `
void (async () => {
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const updates = Buffer.concat(chunks).toString('utf8').split('\\n').filter((l) => l !== '').map((line) => {
  const [old, now, ref] = line.split(' ');
  const zero = /^0+$/;
  return { ref, old: zero.test(old) ? null : old, new: zero.test(now) ? null : now };
});
const env = {};
for (const name of ['GIT_OBJECT_DIRECTORY', 'GIT_ALTERNATE_OBJECT_DIRECTORIES', 'GIT_QUARANTINE_PATH'])
  if (process.env[name] !== undefined) env[name] = process.env[name];
const url = process.env.${HOOK_URL_VARIABLE};
if (url === undefined) process.exit(0);
try {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ updates, env }) });
  const answer = await res.json();
  for (const line of answer.lines ?? []) process.stderr.write('error: ' + line + '\\n');
  process.exit(answer.ok === true ? 0 : 1);
} catch (error) {
  process.stderr.write('error: github-sim: pre-receive hook failed: ' + String(error) + '\\n');
  process.exit(1);
}
})();
`;

/** Writes the hook into `<dir>/pre-receive` (a hooks directory repositories point core.hooksPath at). */
export async function writeHooks(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, 'pre-receive');
  await writeFile(file, `#!${process.execPath}\n${HOOK}`);
  await chmod(file, 0o755);
}
