import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Logger } from 'pino';
import { isTestPath } from '../testing/test-paths.js';
import { tokenClient, type GitHubClient } from '../github/app-client.js';
import { HostGit } from '../github/host-git.js';
import { fetchRepository } from './fetch-repo.js';
import { Redactor } from '../publish/redact.js';
import { shellQuote } from '../sandbox/shell-session.js';
import {
  commandsForFiles,
  passed,
  runTestsAt,
  type SandboxPlace,
  type TestCommand,
  type TestRun,
} from './grade.js';
import type { EvalTask } from './tasks.js';

/**
 * `issue-agent eval --from-repo owner/name`: a task set made from a repository's own history, as
 * SWE-bench made its own. A task is a closed issue fixed by a merged pull request that changed
 * tests: the base is the pull request's base commit, the problem is the issue's title and text,
 * the test patch is the pull request's change to test files and the gold patch the rest of it.
 * FAIL_TO_PASS and PASS_TO_PASS are found by running the changed test files in the sandbox twice,
 * at the base with the test patch (before) and with the whole pull request (after): a test that did
 * not pass before and passes after is FAIL_TO_PASS, one that passes in both is PASS_TO_PASS.
 *
 * An issue is linked to the pull request that names it with a closing keyword (`fixes #12`,
 * `closes owner/name#12`, or the issue's URL) in its title or body, as GitHub closes issues and as
 * SWE-bench's collection links them. Issues linked only by hand in the sidebar are not found (that
 * link is GraphQL-only).
 *
 * The token is used by this process alone: the REST client and host git (as an HTTP header of one
 * process, see host-git.ts). The repository is fetched into a bare clone of ours under the output
 * folder; the sandboxes get checkouts made from it with nothing of the later history (checkout.ts).
 */

export interface FromRepoOptions extends Omit<SandboxPlace, 'folder' | 'key' | 'cacheKey'> {
  /** `owner/name`. */
  readonly repo: string;
  readonly apiUrl: string;
  readonly token: string;
  /** Only issues closed at or after this time. */
  readonly since: Date | null;
  /** At most this many tasks are built (the newest closed issues first). */
  readonly limit: number;
  /** Runs the test files (appended, quoted) when there is no default for them; read by the test-results engine. */
  readonly testCommand: string | null;
  /** Where the clone, the candidates' records and the task set go. */
  readonly out: string;
  readonly concurrency: number;
  readonly logger: Logger;
  readonly onProgress?: ((line: string) => void) | undefined;
}

export type SkipCode =
  | 'no_pull_request'
  | 'no_test_changes'
  | 'only_test_changes'
  | 'commits_missing'
  | 'no_test_command'
  | 'patch_does_not_apply'
  | 'tests_did_not_run'
  | 'no_fail_to_pass'
  | 'too_large'
  /** The harness failed on it (the environment's setup, a git error): tried again by the next run. */
  | 'harness_error';

export interface Skipped {
  /** The issue, or the first of the issues one pull request fixes. */
  readonly issue: number;
  readonly pull: number | null;
  readonly code: SkipCode;
  readonly reason: string;
}

/** A built task: the SWE-bench fields and ours, with where it came from. */
export type BuiltTask = EvalTask & {
  readonly issue_number: number;
  /** Every issue the pull request closes (its problem statement is all of theirs). */
  readonly issue_numbers: readonly number[];
  readonly pull_number: number;
  readonly created_at: string;
};

export interface FromRepoResult {
  readonly tasks: readonly BuiltTask[];
  readonly skipped: readonly Skipped[];
  /** The task file written (`<out>/from-repo/tasks.jsonl`). */
  readonly file: string;
  readonly clone: string;
}

export class FromRepoError extends Error {
  override readonly name = 'FromRepoError';
}

interface IssueInfo {
  readonly number: number;
  readonly title: string;
  readonly body: string;
  readonly createdAt: string;
  readonly closedAt: string;
}

interface PullInfo {
  readonly number: number;
  readonly baseSha: string;
  readonly headSha: string;
  readonly mergeCommitSha: string | null;
  readonly mergedAt: string;
}

type Decision = { readonly task: BuiltTask } | { readonly skipped: Skipped };

/** A candidate whose two patches are larger is skipped (it would not fit a model's context either). */
const MAX_PATCH_BYTES = 8 * 2 ** 20;
/** Candidates that may run tests per task asked for (`limit`): a bound on the sandboxes one build starts. */
const TRIES_PER_TASK = 3;
/** Pages of 100 issues, and of 100 pull requests, read at most. */
const MAX_PAGES = 20;

/** GitHub's web host for an API URL (api.github.com → github.com; a GHES or simulator host as is). */
function webHosts(apiUrl: string): string[] {
  try {
    const host = new URL(apiUrl).host.toLowerCase();
    return host.startsWith('api.') ? [host.slice(4)] : [host];
  } catch {
    return [];
  }
}

const KEYWORD = /\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+([^\s,;()]+)/gi;

/**
 * The issue numbers `text` closes in `owner/name` by GitHub's closing keywords: `#12`, `owner/name#12`
 * (this repository only, any case) or an issue URL of this repository on one of `hosts` (GitHub's web
 * host, `host:port` as in a URL).
 */
export function closingReferences(
  text: string,
  owner: string,
  name: string,
  hosts: readonly string[],
): number[] {
  const found = new Set<number>();
  const repo = `${owner}/${name}`.toLowerCase();
  for (const m of text.matchAll(KEYWORD)) {
    const ref = (m[1] ?? '').replace(/[.:!?]+$/, '');
    let n: string | undefined;
    const short = /^(?:([\w.-]+\/[\w.-]+))?#(\d+)$/.exec(ref);
    if (short !== null) {
      if (short[1] === undefined || short[1].toLowerCase() === repo) n = short[2];
    } else {
      const url = /^https?:\/\/([^/\s]+)\/([\w.-]+\/[\w.-]+)\/issues\/(\d+)$/i.exec(ref);
      if (url?.[2]?.toLowerCase() === repo && hosts.includes((url[1] ?? '').toLowerCase())) n = url[3];
    }
    if (n !== undefined && Number(n) > 0) found.add(Number(n));
  }
  return [...found];
}

/** The test files of a test patch that a test runner runs (not fixtures, data or helpers). */
export function runnableTestFiles(paths: readonly string[]): string[] {
  return paths.filter((p) => {
    const file = basename(p);
    if (/\.py$/.test(file)) return /^test_.*\.py$|_test\.py$/.test(file);
    if (/\.[cm]?[jt]sx?$/.test(file)) {
      if (/\.(?:test|spec)\.[cm]?[jt]sx?$/.test(file)) return true;
      // node's runner: files in a test folder, other than its fixtures and helpers.
      const dirs = p.split('/').slice(0, -1);
      return (
        dirs.some((d) => /^(?:tests?|__tests__)$/.test(d)) &&
        !dirs.some((d) => /^(?:fixtures?|helpers?|support|utils?|__fixtures__|__mocks__)$/.test(d))
      );
    }
    return false;
  });
}

export async function buildTasksFromRepo(options: FromRepoOptions): Promise<FromRepoResult> {
  const [owner = '', name = ''] = options.repo.split('/');
  const redactor = new Redactor([options.token]);
  const redact = (text: string): string => redactor.redact(text);
  const client = tokenClient(options.apiUrl, () => Promise.resolve(options.token), options.logger, {
    userAgent: 'issue-agent-eval',
  });
  const dir = join(options.out, 'from-repo');
  await mkdir(join(dir, 'candidates'), { recursive: true });
  let meta;
  try {
    meta = (await client.rest.repos.get({ owner, repo: name })).data;
  } catch (error) {
    throw new FromRepoError(
      `cannot read ${options.repo} from ${options.apiUrl}: ${redact(messageOf(error))}`,
    );
  }
  const issues = await closedIssues(client, owner, name, options.since);
  const pulls = await mergedPulls(client, owner, name, options.since);
  // The latest merged pull request naming each issue.
  const hosts = webHosts(options.apiUrl);
  const fixes = new Map<number, PullInfo>();
  for (const { pull, text } of pulls) {
    for (const n of closingReferences(text, owner, name, hosts)) {
      const known = fixes.get(n);
      if (known === undefined || known.mergedAt < pull.mergedAt) fixes.set(n, pull);
    }
  }
  const clone = join(options.out, 'repos', `${owner}__${name}.git`);
  const git = new HostGit(process.env.PATH ?? '/usr/bin:/bin', redact);
  // The default branch and every pull request's head (`refs/pull/N/head`, which GitHub keeps after
  // the branch is deleted).
  try {
    await fetchRepository({
      url: meta.clone_url,
      token: options.token,
      clone,
      refspecs: [
        `+refs/heads/${meta.default_branch}:refs/heads/${meta.default_branch}`,
        '+refs/pull/*/head:refs/pull/*/head',
      ],
    });
  } catch (error) {
    throw new FromRepoError(messageOf(error));
  }
  const inClone = async (args: readonly string[]): Promise<string> =>
    (await git.run(['-C', clone, ...args], { env: { GIT_LITERAL_PATHSPECS: '1' } })).stdout;
  const build: BuildContext = { options, owner, name, dir, clone, redact, inClone };
  const candidates = groupCandidates(issues, fixes, options.since);
  const decisions = await decideAll(build, candidates);
  const tasks: BuiltTask[] = [];
  const skipped: Skipped[] = [];
  for (const candidate of candidates) {
    const d = decisions.get(candidate.issues[0]?.number ?? 0);
    if (d === undefined) continue;
    if ('task' in d) {
      if (tasks.length < options.limit) tasks.push(d.task);
    } else skipped.push(d.skipped);
  }
  const file = join(dir, 'tasks.jsonl');
  await writeText(file, tasks.map((t) => JSON.stringify(t)).join('\n') + (tasks.length > 0 ? '\n' : ''));
  await writeText(
    join(dir, 'skipped.jsonl'),
    skipped.map((s) => JSON.stringify(s)).join('\n') + (skipped.length > 0 ? '\n' : ''),
  );
  return { tasks, skipped, file, clone };
}

/** What deciding a candidate needs: the build's options and the repository's bare clone. */
interface BuildContext {
  readonly options: FromRepoOptions;
  readonly owner: string;
  readonly name: string;
  /** The build's folder (candidates' records, the task set). */
  readonly dir: string;
  readonly clone: string;
  readonly redact: (text: string) => string;
  /** Runs git in the clone (literal pathspecs) and answers its standard output. */
  readonly inClone: (args: readonly string[]) => Promise<string>;
}

interface Candidate {
  readonly issues: IssueInfo[];
  readonly pull: PullInfo | null;
}

/**
 * One candidate per pull request (with every issue it closes, as SWE-bench does), or per issue
 * that no merged pull request names; the most recently closed first.
 */
function groupCandidates(
  issues: readonly IssueInfo[],
  fixes: ReadonlyMap<number, PullInfo>,
  since: Date | null,
): Candidate[] {
  const candidates: Candidate[] = [];
  const byPull = new Map<number, Candidate>();
  for (const issue of issues) {
    if (since !== null && Date.parse(issue.closedAt) < since.getTime()) continue;
    const pull = fixes.get(issue.number) ?? null;
    const known = pull === null ? undefined : byPull.get(pull.number);
    if (known !== undefined) {
      known.issues.push(issue);
      continue;
    }
    const candidate = { issues: [issue], pull };
    candidates.push(candidate);
    if (pull !== null) byPull.set(pull.number, candidate);
  }
  return candidates;
}

/**
 * Decides candidates in order, `concurrency` at a time, until `limit` tasks are built, the tries
 * run out or the build is interrupted; by each candidate's first issue.
 */
async function decideAll(
  build: BuildContext,
  candidates: readonly Candidate[],
): Promise<Map<number, Decision>> {
  const { options, redact } = build;
  const decisions = new Map<number, Decision>();
  const say = (line: string): void => {
    options.onProgress?.(line);
  };
  let built = 0;
  let next = 0;
  // Each candidate that gets as far as running tests costs two sandboxes: at most this many are tried.
  const maxTried = options.limit * TRIES_PER_TASK;
  let tried = 0;
  let capped = false;
  const worker = async (): Promise<void> => {
    for (;;) {
      if (options.signal?.aborted === true || built >= options.limit || capped) return;
      if (tried >= maxTried) {
        capped = true;
        say(`stopping after ${maxTried} candidates that ran tests`);
        return;
      }
      const candidate = candidates[next++];
      if (candidate === undefined) return;
      const first = candidate.issues[0];
      if (first === undefined) continue;
      let decision: Decision | null;
      try {
        decision = await decideCandidate(build, candidate.issues, candidate.pull, () => {
          tried += 1;
        });
      } catch (error) {
        // Cut short by the interrupt (a sandbox command killed by the same Ctrl-C): not a decision.
        if (interrupted(options.signal)) return;
        // A candidate's failure is its own (a setup that fails at an old commit, git refusing an
        // unrelated history): recorded, not cached, and the build goes on.
        decision = {
          skipped: {
            issue: first.number,
            pull: candidate.pull?.number ?? null,
            code: 'harness_error',
            reason: `the harness failed: ${redact(messageOf(error)).split('\n')[0]?.slice(0, 500) ?? ''}`,
          },
        };
      }
      if (decision === null) return;
      decisions.set(first.number, decision);
      if ('task' in decision) {
        built += 1;
        say(
          `#${first.number} (pull request #${decision.task.pull_number}): a task, ${decision.task.FAIL_TO_PASS.length} FAIL_TO_PASS, ${decision.task.PASS_TO_PASS.length} PASS_TO_PASS`,
        );
      } else {
        say(`#${first.number}: skipped, ${decision.skipped.reason}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.concurrency) }, worker));
  return decisions;
}

/** What a candidate's pull request changed, read from the clone. */
interface PullChange {
  readonly from: string;
  readonly head: string;
  readonly testPaths: readonly string[];
  readonly codePaths: readonly string[];
  readonly commands: TestCommand[];
}

/** The task a candidate makes, or why it makes none; null when interrupted. */
async function decideCandidate(
  build: BuildContext,
  fixed: readonly IssueInfo[],
  pull: PullInfo | null,
  runsTests: () => void,
): Promise<Decision | null> {
  const issue = fixed[0];
  if (issue === undefined) return null;
  const others =
    fixed.length > 1
      ? ` (with ${fixed
          .slice(1)
          .map((i) => `#${i.number}`)
          .join(', ')})`
      : '';
  const skip = (code: SkipCode, reason: string): Decision => ({
    skipped: { issue: issue.number, pull: pull?.number ?? null, code, reason: `${reason}${others}` },
  });
  if (pull === null) {
    return skip(
      'no_pull_request',
      'closed without a merged pull request that names it with a closing keyword (fixes #N)',
    );
  }
  const change = await readPullChange(build, pull);
  if ('code' in change) return skip(change.code, change.reason);
  const { options, dir, clone, owner, name, inClone } = build;
  const { from, head, testPaths, codePaths, commands } = change;
  // Cached by everything the decision depends on: a second build runs nothing again.
  const cacheKey = createHash('sha256')
    .update(
      JSON.stringify([
        options.sandbox.backend.kind,
        options.setup,
        fixed.map((i) => [i.number, i.title, i.body]),
        pull.number,
        pull.baseSha,
        head,
        commands.map((c) => c.command),
      ]),
    )
    .digest('hex');
  const cached = join(dir, 'candidates', `${issue.number}.json`);
  if (existsSync(cached)) {
    const earlier = JSON.parse(await readFile(cached, 'utf8')) as { key: string; decision: Decision };
    if (earlier.key === cacheKey) return earlier.decision;
  }
  runsTests();
  const diff = (paths: readonly string[]): Promise<string> =>
    inClone([
      'diff',
      '--no-ext-diff',
      '--no-textconv',
      '--no-color',
      '--no-renames',
      '--binary',
      '--full-index',
      from,
      head,
      '--',
      ...paths,
    ]);
  const testPatch = await diff(testPaths);
  const gold = await diff(codePaths);
  if (Buffer.byteLength(testPatch) + Buffer.byteLength(gold) > MAX_PATCH_BYTES) {
    return skip(
      'too_large',
      `pull request #${pull.number} changes more than ${MAX_PATCH_BYTES / 2 ** 20} MiB`,
    );
  }
  const place = (which: string): SandboxPlace => ({
    sandbox: options.sandbox,
    env: options.env,
    setup: options.setup,
    signal: options.signal,
    folder: join(dir, 'candidates', String(issue.number)),
    key: `from-repo-${cacheKey.slice(0, 16)}-${which}`,
    hide: [...options.hide, options.out, clone],
    mask: options.mask ?? [],
    cacheKey: `eval:${clone}`,
  });
  const common = { repo: clone, base: pull.baseSha, testPatch, commands };
  const before = await runTestsAt({ ...place('before'), ...common, patch: null });
  const after = await runTestsAt({ ...place('after'), ...common, patch: gold });
  if (options.signal?.aborted === true) return null;
  const decision = judge(before, after);
  let result: Decision;
  if ('code' in decision) {
    result = skip(decision.code, decision.reason);
  } else {
    result = {
      task: {
        instance_id: `${owner}__${name}-${pull.number}`,
        repo: `${owner}/${name}`,
        repo_path: clone,
        base_commit: pull.baseSha,
        problem_statement: fixed.map((i) => `${i.title}\n${i.body}\n`).join('\n'),
        test_patch: testPatch,
        patch: gold,
        FAIL_TO_PASS: decision.failToPass,
        PASS_TO_PASS: decision.passToPass,
        ...(options.testCommand === null ? {} : { test_command: commands[0]?.command ?? '' }),
        issue_number: issue.number,
        issue_numbers: fixed.map((i) => i.number),
        pull_number: pull.number,
        created_at: issue.createdAt,
      },
    };
  }
  // A harness failure is not the candidate's: the next build tries it again.
  if (!('skipped' in result && result.skipped.code === 'harness_error')) {
    await writeJson(cached, { key: cacheKey, decision: result });
  }
  return result;
}

/** What the pull request changed, or why its candidate is no task (the skip's code and reason). */
async function readPullChange(
  build: BuildContext,
  pull: PullInfo,
): Promise<PullChange | { readonly code: SkipCode; readonly reason: string }> {
  const { options, inClone } = build;
  const has = (sha: string): Promise<boolean> =>
    inClone(['cat-file', '-e', `${sha}^{commit}`]).then(
      () => true,
      () => false,
    );
  const head = (await has(pull.headSha)) ? pull.headSha : pull.mergeCommitSha;
  if (!(await has(pull.baseSha)) || head === null || !(await has(head))) {
    return {
      code: 'commits_missing',
      reason: `the commits of pull request #${pull.number} are not in the repository`,
    };
  }
  const from = (await inClone(['merge-base', pull.baseSha, head])).trim();
  const paths = (await inClone(['diff', '--no-renames', '--name-only', '-z', from, head, '--']))
    .split('\0')
    .filter((p) => p !== '');
  const testPaths = paths.filter(isTestPath);
  const codePaths = paths.filter((p) => !isTestPath(p));
  if (testPaths.length === 0)
    return { code: 'no_test_changes', reason: `pull request #${pull.number} changed no tests` };
  if (codePaths.length === 0) {
    return {
      code: 'only_test_changes',
      reason: `pull request #${pull.number} changed only tests (there is no fix to find)`,
    };
  }
  const runnable = runnableTestFiles(testPaths);
  const commands = commandsFor(runnable, options.testCommand);
  if (commands === null) {
    return {
      code: 'no_test_command',
      reason:
        runnable.length === 0
          ? `pull request #${pull.number} changed test files but none that a test runner runs (${testPaths.slice(0, 3).join(', ')})`
          : `no default way to run ${runnable.slice(0, 3).join(', ')} (pytest or node's test runner): give --test-command`,
    };
  }
  return { from, head, testPaths, codePaths, commands };
}

/** The commands for the test files: the default for their language, or `--test-command` with them appended. */
function commandsFor(files: readonly string[], testCommand: string | null): TestCommand[] | null {
  if (files.length === 0) return null;
  if (testCommand !== null) {
    return [{ command: `${testCommand}${files.map((f) => ` ${shellQuote(f)}`).join('')}` }];
  }
  return commandsForFiles(files);
}

/** FAIL_TO_PASS and PASS_TO_PASS from the two runs, or why there is no task. */
export function judge(
  before: TestRun,
  after: TestRun,
): { failToPass: string[]; passToPass: string[] } | { code: SkipCode; reason: string } {
  for (const run of [before, after]) {
    if (run.kind === 'harness_failed') {
      return {
        code: run.stage === 'test_patch' ? 'patch_does_not_apply' : 'harness_error',
        reason: run.reason,
      };
    }
  }
  if (after.kind === 'patch_failed') {
    return {
      code: 'patch_does_not_apply',
      reason: `the fix does not apply to the base commit: ${after.output}`,
    };
  }
  if (before.kind !== 'ran' || after.kind !== 'ran') {
    return { code: 'patch_does_not_apply', reason: 'the test patch does not apply to the base commit' };
  }
  if (after.results.size === 0) {
    const tail = after.output.trim().split('\n').slice(-3).join(' | ').slice(0, 400);
    return {
      code: 'tests_did_not_run',
      reason: `the tests reported no results after the fix; the output ended: ${tail}`,
    };
  }
  const failToPass: string[] = [];
  const passToPass: string[] = [];
  for (const [id, fact] of after.results) {
    // A whole file (one that could not run) is not a test to list.
    if (!passed(fact) || fact.id === fact.file) continue;
    if (passed(before.results.get(id) ?? null)) passToPass.push(id);
    else failToPass.push(id);
  }
  if (failToPass.length === 0) {
    return {
      code: 'no_fail_to_pass',
      reason: `no test fails before the fix and passes after it (${after.results.size} ran after it, ${passToPass.length} passing both times)`,
    };
  }
  return { failToPass: failToPass.sort(), passToPass: passToPass.sort() };
}

async function closedIssues(
  client: GitHubClient,
  owner: string,
  repo: string,
  since: Date | null,
): Promise<IssueInfo[]> {
  const out: IssueInfo[] = [];
  let pages = 0;
  for await (const page of client.paginate.iterator(client.rest.issues.listForRepo, {
    owner,
    repo,
    state: 'closed',
    sort: 'updated',
    direction: 'desc',
    per_page: 100,
    ...(since === null ? {} : { since: since.toISOString() }),
  })) {
    for (const i of page.data) {
      // The list holds pull requests too.
      if (i.pull_request !== undefined || i.closed_at === null) continue;
      out.push({
        number: i.number,
        title: i.title,
        body: i.body ?? '',
        createdAt: i.created_at,
        closedAt: i.closed_at,
      });
    }
    if (++pages >= MAX_PAGES) break;
  }
  return out.sort((a, b) => b.closedAt.localeCompare(a.closedAt) || b.number - a.number);
}

/** Merged pull requests with the text that may name the issues they fix. */
async function mergedPulls(
  client: GitHubClient,
  owner: string,
  repo: string,
  since: Date | null,
): Promise<{ pull: PullInfo; text: string }[]> {
  const out: { pull: PullInfo; text: string }[] = [];
  // A fix merged well before `since` cannot close an issue closed after it, except by a person
  // closing it later: a month of slack, then the listing (newest update first) stops.
  const stop = since === null ? null : new Date(since.getTime() - 30 * 24 * 3600_000).toISOString();
  let pages = 0;
  for await (const page of client.paginate.iterator(client.rest.pulls.list, {
    owner,
    repo,
    state: 'closed',
    sort: 'updated',
    direction: 'desc',
    per_page: 100,
  })) {
    for (const p of page.data) {
      if (p.merged_at === null) continue;
      out.push({
        pull: {
          number: p.number,
          baseSha: p.base.sha,
          headSha: p.head.sha,
          mergeCommitSha: p.merge_commit_sha,
          mergedAt: p.merged_at,
        },
        text: `${p.title}\n${p.body ?? ''}`,
      });
    }
    const last = page.data.at(-1);
    if (stop !== null && last !== undefined && last.updated_at < stop) break;
    if (++pages >= MAX_PAGES) break;
  }
  return out;
}

/** Read after an await (TypeScript keeps a narrowing of `signal.aborted` across them). */
function interrupted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function writeJson(path: string, value: unknown): Promise<void> {
  await writeText(path, `${JSON.stringify(value, null, 2)}\n`);
}

async function writeText(path: string, text: string): Promise<void> {
  const tmp = `${path}.tmp`;
  await writeFile(tmp, text);
  await rename(tmp, path);
}
