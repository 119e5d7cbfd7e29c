import { codeSpan } from '../publish/markdown.js';

/**
 * Why a fork's pull request is not worked on by this worker: its sandbox backend is not isolated (a
 * plain child process of the worker), and a fork's code (its tests, its setup, what the agent runs
 * in its tree) runs only where no host file, process or network is in its reach. Every job kind
 * that runs a fork's head (a fix pushed to it, a review, a verification) asks this first.
 */
export function forkOnHost(
  fork: string,
  backend: string,
  what: 'verify' | 'review' | 'change' = 'verify',
): string {
  const where = fork === 'a deleted fork' ? 'a deleted fork' : codeSpan(fork);
  const also = what === 'verify' ? '; `issue-agent verify` runs the same check on your machine' : '';
  return `I can't ${what} this pull request here: its branch is in ${where}, and this worker's sandbox (${codeSpan(backend)}) is not isolated, so a fork's code would run on the worker's host. Workers with the \`docker\` or \`local\` sandbox ${what} forks' pull requests${also}.`;
}
