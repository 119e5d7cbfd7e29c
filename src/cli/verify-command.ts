import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Octokit } from '@octokit/rest';
import type { AgentEnv } from '../config/agent-env.js';
import { fetchRepository } from '../eval/fetch-repo.js';
import { ReproduceError, reproduceVerdict } from '../execution/reproduce.js';
import { pullChange, recordedVerdict, type AgentCheckRun } from '../github/recorded-verdict.js';
import { CHECK_RUN_NAME } from '../publish/check-run.js';
import { commandMismatch, compareRows, recordedCommands, rowsOf } from '../publish/reproduction.js';
import { chooseSandbox, sandboxKind, UsageError } from './workspace.js';

export { compareRows, rowsOf } from '../publish/reproduction.js';

export const VERIFY_USAGE = `  issue-agent verify <repo-dir | owner/name> (--pr N | --base SHA --head SHA) [--api-url URL]
                     [--app SLUG[,SLUG]]... [--sandbox local|docker|unconfined] [--setup on|off]
                     [--test-command CMD]`;

/**
 * The App whose **Issue Agent** check run is the recorded verdict unless `--app` names others: the
 * slug GitHub gives the App registered from app.yml (`name: Issue Agent`). A deployment registered
 * under another name, and the Action (whose runs are `github-actions`'), are named with `--app`.
 */
export const DEFAULT_VERDICT_APP = 'issue-agent';

/**
 * `issue-agent verify`: reproduces a recorded verdict. The base and the head (the PR's merge base and
 * head, or as given) are each tested in a new sandbox by the harness that grades evals (a fresh
 * checkout, the change applied inside the sandbox, its runner configuration put back to the base's),
 * read by the same test-results engine, and shown with the same per-test table as the pull request
 * and its check run. The tests run with the base's command (--test-command, else `testCommand` in
 * the base commit's `.github/issue-agent.yml`, else the one detected on the base), never one read
 * from the head or from the record. Exit 0 only when the check run "Issue Agent" recorded that same
 * command (in the marker its renderer writes) and every row matches its table; otherwise 1, saying
 * which command it recorded and naming each test that differs (2: usage). Only a check run by one of
 * the expected Apps (`--app`, default DEFAULT_VERDICT_APP) is the record: anyone who can install an
 * App on the repository can make a run of that name, and one by another App is ignored with a note.
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
      app: { type: 'string', multiple: true },
    },
  });
  const apps = [
    ...new Set((values.app ?? [DEFAULT_VERDICT_APP]).flatMap((a) => a.split(',')).map((a) => a.trim())),
  ];
  if (apps.length === 0 || apps.some((a) => !/^[a-z0-9][a-z0-9-]*$/i.test(a)))
    throw new UsageError(
      '--app takes App slugs (e.g. issue-agent, github-actions), comma-separated or repeated',
    );
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
    let recorded: AgentCheckRun | null = null;
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
      let commits: readonly string[] = [head];
      if (pr !== null) {
        const change = await pullChange(gh, where, pr);
        ({ base, head, commits } = change);
      }
      // The recorded verdict: the latest commit of the change with a check run of that name by one
      // of the expected Apps; one by any other App is said and ignored.
      recorded = await recordedVerdict(gh, where, commits, { slugs: apps }, (run) => {
        console.error(
          `issue-agent verify: ignored the "${CHECK_RUN_NAME}" check run on ${run.sha.slice(0, 12)} made by ${run.app === null ? 'an unknown app' : `\`${run.app}\``}: only ${appList(apps)} record a verdict here (--app)`,
        );
      });
      repo = join(work, 'clone.git');
      await fetchRepository({
        url: meta.clone_url,
        token,
        clone: repo,
        refspecs: [`+refs/heads/${meta.default_branch}:refs/heads/${meta.default_branch}`],
        commits: [base, head],
      });
    }
    let reproduced;
    try {
      reproduced = await reproduceVerdict({
        repo,
        base,
        head,
        command: values['test-command'] ?? null,
        commandSource: 'given with --test-command',
        baseSettings: true,
        sandbox,
        env,
        setup,
        work,
        cacheKey: `verify:${target}`,
        starting: (at) => {
          console.error(
            `issue-agent verify: ${at.base.slice(0, 12)}..${at.head.slice(0, 12)}, \`${at.command}\` (${at.source}) in fresh sandboxes`,
          );
        },
      });
    } catch (error) {
      if (error instanceof ReproduceError && error.code === 'no_test_command')
        throw new UsageError('no test command is known: give --test-command');
      if (error instanceof ReproduceError && error.code === 'invalid_settings') {
        // The fix job would not have run on these settings either: nothing was recorded the base's way.
        console.error(`issue-agent verify: ${error.message} (or give --test-command)`);
        return 1;
      }
      throw error;
    }
    const table = reproduced.table;
    console.log(table);
    if (recorded === null) {
      console.error(
        `issue-agent verify: no recorded verdict (no "${CHECK_RUN_NAME}" check run by ${appList(apps)} on the change) to compare with`,
      );
      return 1;
    }
    const whose = `the verdict recorded by \`${recorded.app ?? '?'}\` on ${recorded.sha.slice(0, 12)}`;
    const differ = compareRows(rowsOf(recorded.text), rowsOf(table));
    const mismatch = commandMismatch(
      recordedCommands(recorded.text),
      reproduced.command,
      reproduced.commandSource,
    );
    if (differ.length === 0 && mismatch === null) {
      console.error(`issue-agent verify: matches ${whose}`);
      return 0;
    }
    console.error(`issue-agent verify: differs from ${whose}:`);
    if (mismatch !== null) console.error(`  test command: ${mismatch}`);
    for (const d of differ) console.error(`  ${d}`);
    return 1;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

function appList(apps: readonly string[]): string {
  return apps.map((a) => `\`${a}\``).join(' or ');
}

const quiet = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
