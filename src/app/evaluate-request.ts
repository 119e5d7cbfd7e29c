import { EVALUATE_MAX_TASKS, type EvaluateRequest } from '../queue/payloads.js';
import type { RestClient } from './trigger-rules.js';
import type { Trigger } from '../queue/trigger.js';

/**
 * `@agent evaluate [oracle] [limit N] [since YYYY-MM-DD]`: the eval of this repository's own closed
 * issues (see eval/from-repo.ts), reported in a comment where it was asked. Only a repository admin
 * may ask: it runs the deployment's model on up to `limit` tasks, at the deployment's cost.
 */

/** The instruction asks for an evaluation (and nothing else: `evaluate` must be its first word). */
export const EVALUATE = /^evaluate(?:\s|$)/i;

export const EVALUATE_DEFAULT_TASKS = 10;

export const EVALUATE_USAGE =
  '`@agent evaluate [oracle] [limit N] [since YYYY-MM-DD]`: `oracle` checks the harness with each fix as the model; ' +
  `\`limit\` is the number of tasks (1 to ${EVALUATE_MAX_TASKS}, default ${EVALUATE_DEFAULT_TASKS}); ` +
  '`since` keeps issues closed on or after that day.';

export type ParsedEvaluate =
  { readonly ok: true; readonly request: EvaluateRequest } | { readonly ok: false; readonly problem: string };

/**
 * The request in an instruction that starts with `evaluate`: its first line (the rest of the comment
 * is for people); words may be `limit N`, `limit=N` or `--limit N`.
 */
export function parseEvaluate(instruction: string): ParsedEvaluate {
  const words = (instruction.trim().split('\n')[0] ?? '')
    .split(/\s+/)
    .slice(1)
    .flatMap((w) => w.replace(/^--/, '').split('='))
    .filter((w) => w !== '');
  let model: EvaluateRequest['model'] = 'configured';
  let limit = EVALUATE_DEFAULT_TASKS;
  let since: string | null = null;
  for (let i = 0; i < words.length; i++) {
    const word = (words[i] ?? '').toLowerCase();
    const value = words[i + 1];
    if (word === 'oracle') {
      model = 'oracle';
    } else if (word === 'limit') {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 1 || n > EVALUATE_MAX_TASKS) {
        return { ok: false, problem: `\`limit\` takes a number of tasks from 1 to ${EVALUATE_MAX_TASKS}` };
      }
      limit = n;
      i++;
    } else if (word === 'since') {
      // A real day: 2026-02-31 is not one (Date would roll it over to March).
      const day =
        value === undefined || !/^\d{4}-\d{2}-\d{2}$/.test(value) ? null : new Date(`${value}T00:00:00Z`);
      if (
        value === undefined ||
        day === null ||
        Number.isNaN(day.getTime()) ||
        day.toISOString().slice(0, 10) !== value
      ) {
        return { ok: false, problem: '`since` takes a day as YYYY-MM-DD' };
      }
      since = value;
      i++;
    } else {
      return { ok: false, problem: `I don't know the option \`${word.slice(0, 40).replace(/`/g, '')}\`` };
    }
  }
  return { ok: true, request: { model, limit, since } };
}

export type EvaluatePermission =
  { readonly allowed: true } | { readonly allowed: false; readonly reason: string; readonly reply: string };

/** Whether the sender is an admin of the repository, asked of the API now. */
export async function mayEvaluate(trigger: Trigger, octokit: RestClient): Promise<EvaluatePermission> {
  const { data } = await octokit.rest.repos.getCollaboratorPermissionLevel({
    owner: trigger.repo.owner,
    repo: trigger.repo.name,
    username: trigger.sender.login,
  });
  if (data.role_name === 'admin' || data.permission === 'admin') return { allowed: true };
  return {
    allowed: false,
    reason: `${trigger.sender.login} has role ${data.role_name}, evaluate needs admin`,
    reply:
      `Only an admin of this repository can ask me to evaluate myself on it, @${trigger.sender.login}: ` +
      "it runs the model on up to dozens of this repository's closed issues, at the deployment's cost.",
  };
}
