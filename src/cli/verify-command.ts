import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { Octokit } from '@octokit/rest';
import type { AgentEnv } from '../config/agent-env.js';
import type { EventOf } from '../events/schema.js';
import { fetchRepository } from '../eval/fetch-repo.js';
import { runTestsAt, type TestRun as GradedRun } from '../eval/grade.js';
import { hostProbe } from '../environment/host-probe.js';
import { CHECK_RUN_NAME } from '../publish/check-run.js';
import { renderVerification } from '../publish/verification.js';
import { detectTestCommand } from '../testing/detect-test-command.js';
import { isFailing } from '../testing/test-run.js';
import { chooseSandbox, sandboxKind, UsageError } from './workspace.js';

const run = promisify(execFile);

export const VERIFY_USAGE = `  issue-agent verify <repo-dir | owner/name> (--pr N | --base SHA --head SHA) [--api-url URL]
                     [--sandbox local|docker|unconfined] [--setup on|off] [--test-command CMD]`;

type TestRunEvent = EventOf<'test_run'>;
type Mark = '✅' | '❌' | '—';

/** What the check run on the change recorded: its per-test rows, its test command, which commit. */
interface Recorded {
  readonly sha: string;
  readonly text: string;
}

/**
 * `issue-agent verify`: reproduces a recorded verdict. The base and the head (the PR's merge base and
 * head, or as given) are each tested in a new sandbox by the harness that grades evals (a fresh
 * checkout, the change applied inside the sandbox, its runner configuration put back to the base's),
 * read by the same test-results engine, and shown with the same per-test table as the pull request
 * and its check run. Exit 0 only when every row matches the table recorded in the check run
 * "Issue Agent"; otherwise 1, naming each test that differs (2: usage).
 */
export async function verifyCommand(args: readonly string[], env: AgentEnv): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    allowPositionals: true,
    options: {
      pr: { type: 'string' },
      base: { type: 'string' },
      head: { type: 'string' },
      'api-url': { type: 'string' },
      sandbox: { type: 'string' },
      setup: { type: 'string' },
      'test-command': { type: 'string' },
    },
  });
  const [target] = positionals;
  if (target === undefined || positionals.length > 1) throw new UsageError(`usage:\n${VERIFY_USAGE}`);
  const pr = values.pr === undefined ? null : Number(values.pr);
  if (pr !== null && (!Number.isInteger(pr) || pr <= 0)) throw new UsageError('--pr takes a PR number');
  if (pr === null && (values.base === undefined || values.head === undefined))
    throw new UsageError('give --pr N, or --base SHA and --head SHA');
  const remote = /^[\w.-]+\/[\w.-]+$/.test(target) && !target.startsWith('.');
  if (pr !== null && !remote)
    throw new UsageError('--pr needs the repository as owner/name (read from the API)');
  const sandbox = await chooseSandbox(sandboxKind(values.sandbox ?? 'local'), env);
  // A verdict is only worth what its sandbox keeps out: the same rule as eval's.
  if (!sandbox.backend.isolated) throw new UsageError('verify runs in a sandbox: --sandbox docker or local');
  const setup = (values.setup ?? 'on') !== 'off';

  const work = await mkdtemp(join(tmpdir(), 'ia-verify-'));
  try {
    let repo = resolve(target);
    let base = values.base ?? '';
    let head = values.head ?? '';
    let recorded: Recorded | null = null;
    if (remote) {
      const [owner = '', name = ''] = target.split('/');
      const token = (process.env.GITHUB_TOKEN ?? process.env.GH_TOKEN ?? '').trim();
      if (token === '')
        throw new UsageError('verify reads owner/name with GITHUB_TOKEN (or GH_TOKEN): set one');
      const apiUrl = (values['api-url'] ?? process.env.GITHUB_API_URL ?? 'https://api.github.com').replace(
        /\/+$/,
        '',
      );
      const gh = new Octokit({ auth: token, baseUrl: apiUrl, log: quiet });
      const where = { owner, repo: name };
      const { data: meta } = await gh.rest.repos.get(where);
      const commits: string[] = [];
      if (pr !== null) {
        const { data: pull } = await gh.rest.pulls.get({ ...where, pull_number: pr });
        base = pull.base.sha;
        head = pull.head.sha;
        const listed = await gh.paginate(gh.rest.pulls.listCommits, {
          ...where,
          pull_number: pr,
          per_page: 100,
        });
        commits.push(...listed.map((c) => c.sha).reverse());
      } else {
        commits.push(head);
      }
      // The recorded verdict: the latest commit of the change with the agent's check run on it.
      for (const sha of commits) {
        const { data } = await gh.rest.checks.listForRef({ ...where, ref: sha, check_name: CHECK_RUN_NAME });
        const found = data.check_runs.find((c) => (c.output.text ?? '') !== '');
        if (found !== undefined) {
          recorded = { sha, text: found.output.text ?? '' };
          break;
        }
      }
      repo = join(work, 'clone.git');
      await fetchRepository({
        url: meta.clone_url,
        token,
        clone: repo,
        refspecs: [`+refs/heads/${meta.default_branch}:refs/heads/${meta.default_branch}`],
        commits: [base, head],
      });
    }
    const git = async (...a: string[]): Promise<string> =>
      (await run('git', ['-C', repo, ...a], { maxBuffer: 256 * 1024 * 1024 })).stdout;
    // The change is what the head adds to where it left the base (as a pull request shows it).
    base = (await git('merge-base', base, head)).trim();
    head = (await git('rev-parse', `${head}^{commit}`)).trim();
    const patch = await git('diff', '--binary', base, head);
    const command =
      values['test-command'] ??
      (recorded === null ? null : recordedCommand(recorded.text)) ??
      (await baseCommand(repo, base, work));
    if (command === null) throw new UsageError('no test command is known: give --test-command');

    const place = (key: string) => ({
      sandbox,
      env,
      setup,
      folder: join(work, key),
      key: `verify-${Date.now().toString(36)}-${key}`,
      hide: [work],
      cacheKey: `verify:${target}`,
    });
    const commands = [{ command }];
    console.error(
      `issue-agent verify: ${base.slice(0, 12)}..${head.slice(0, 12)}, \`${command}\` in fresh sandboxes`,
    );
    const before = asEvent(
      'baseline',
      command,
      await runTestsAt({ ...place('base'), repo, base, patch: null, testPatch: '', commands }),
    );
    const after = asEvent(
      'final',
      command,
      await runTestsAt({ ...place('head'), repo, base, patch, testPatch: '', commands }),
    );
    const table = renderVerification(before, after, { maxRows: 500 });
    console.log(table);
    if (recorded === null) {
      console.error(
        'issue-agent verify: no recorded verdict (no "Issue Agent" check run on the change) to compare with',
      );
      return 1;
    }
    const differ = compareRows(rowsOf(recorded.text), rowsOf(table));
    if (differ.length === 0) {
      console.error(`issue-agent verify: matches the verdict recorded on ${recorded.sha.slice(0, 12)}`);
      return 0;
    }
    console.error(`issue-agent verify: differs from the verdict recorded on ${recorded.sha.slice(0, 12)}:`);
    for (const d of differ) console.error(`  ${d}`);
    return 1;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

const quiet = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** The command the recorded table names ("Test command: `x`", the last one when two). */
function recordedCommand(text: string): string | null {
  const line = /^Test command: (.*)$/m.exec(text)?.[1];
  if (line === undefined) return null;
  const spans = [...line.matchAll(/(`+) ?(.*?) ?\1/g)].map((m) => m[2] ?? '');
  return spans.at(-1) ?? null;
}

/** The base commit's detected test command, read from a checkout of it. */
async function baseCommand(repo: string, base: string, work: string): Promise<string | null> {
  const dir = join(work, 'base-probe');
  await run('git', ['clone', '-q', '--no-checkout', repo, dir]);
  await run('git', ['-C', dir, 'checkout', '-q', base]);
  return (await detectTestCommand(hostProbe(dir)))?.command ?? null;
}

/** A graded run as the `test_run` event the renderer reads (no exit code: 0 unless a test failed). */
export function asEvent(phase: 'baseline' | 'final', command: string, r: GradedRun): TestRunEvent {
  if (r.kind !== 'ran') {
    const why = r.kind === 'patch_failed' ? `the change does not apply: ${r.output}` : r.reason;
    throw new Error(`could not run the tests on the ${phase === 'baseline' ? 'base' : 'head'}: ${why}`);
  }
  const tests = [...r.results.values()];
  const passed = tests.filter((t) => t.status === 'passed').map((t) => t.id);
  const failed = tests.filter((t) => isFailing(t.status)).map((t) => t.id);
  return {
    id: phase === 'baseline' ? 1 : 2,
    ts: new Date().toISOString(),
    kind: 'test_run',
    phase,
    command,
    exitCode: failed.length > 0 ? 1 : 0,
    killed: null,
    durationMs: r.testMs,
    summary: {
      runner: 'harness',
      passed: passed.length,
      failed: failed.length,
      skipped: tests.filter((t) => t.status === 'skipped').length,
      passedNames: passed.slice(0, 500),
      failedNames: failed.slice(0, 500),
      tests,
      complete: true,
      idScheme: 2,
    },
    output: r.output,
    outputBytes: Buffer.byteLength(r.output),
  };
}

/** The per-test rows of a rendered table: name (as shown) → before and after. */
export function rowsOf(table: string): Map<string, [Mark, Mark]> {
  const rows = new Map<string, [Mark, Mark]>();
  for (const line of table.split('\n')) {
    const m = /^\| (.+) \| (✅|❌|—) \| (✅|❌|—) \|$/.exec(line);
    if (m === null) continue;
    rows.set((m[1] ?? '').replace(/^(`+) ?(.*?) ?\1$/, '$2'), [m[2] as Mark, m[3] as Mark]);
  }
  return rows;
}

/** Each test whose row differs, in words. */
export function compareRows(recorded: Map<string, [Mark, Mark]>, now: Map<string, [Mark, Mark]>): string[] {
  const out: string[] = [];
  const words = (r: [Mark, Mark] | undefined): string =>
    r === undefined ? 'not in the table' : `${r[0]} before, ${r[1]} after`;
  for (const name of new Set([...recorded.keys(), ...now.keys()])) {
    const a = recorded.get(name);
    const b = now.get(name);
    if (a?.[0] === b?.[0] && a?.[1] === b?.[1]) continue;
    out.push(`${name}: recorded ${words(a)}, reproduced ${words(b)}`);
  }
  return out;
}
