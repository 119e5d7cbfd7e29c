import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';

/**
 * The runner's file and stdout protocols. Outputs and the summary go to the files the runner names
 * (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY), never through stdout. Workflow commands on stdout are
 * switched off (`::stop-commands::`) for the whole run, because logs carry untrusted text (issue
 * bodies, model output, command output) and a line such as `::add-mask::` or `::error::` in it would
 * otherwise be obeyed. They are switched on again only for the action's own annotations.
 */
export class RunnerIo {
  private resumeToken: string | null = null;

  constructor(
    private readonly outputFile: string | null,
    private readonly summaryFile: string | null,
    private readonly write: (line: string) => void = (line) => {
      process.stdout.write(`${line}\n`);
    },
  ) {}

  /** Masks secrets in the job log (before anything else is printed), then stops command processing. */
  start(secrets: readonly string[]): void {
    for (const s of secrets) {
      for (const line of s.split(/\r?\n/)) if (line.trim() !== '') this.write(`::add-mask::${line}`);
    }
    this.resumeToken = randomBytes(16).toString('hex');
    this.write(`::stop-commands::${this.resumeToken}`);
  }

  /** An annotation on the run (error or notice), the one thing the action still prints as a command. */
  annotate(kind: 'error' | 'warning' | 'notice', message: string): void {
    const token = this.resumeToken;
    if (token !== null) this.write(`::${token}::`);
    this.write(`::${kind}::${escapeData(message)}`);
    if (token !== null) this.write(`::stop-commands::${token}`);
  }

  /** `name=value` in GITHUB_OUTPUT, in the multi-line form with a delimiter that the value cannot hold. */
  setOutput(name: string, value: string): void {
    if (this.outputFile === null) return;
    let delimiter = `ghadelimiter_${randomBytes(12).toString('hex')}`;
    while (value.includes(delimiter)) delimiter = `ghadelimiter_${randomBytes(12).toString('hex')}`;
    appendFileSync(this.outputFile, `${name}<<${delimiter}\n${value}\n${delimiter}\n`);
  }

  appendSummary(markdown: string): void {
    if (this.summaryFile === null) return;
    appendFileSync(this.summaryFile, markdown.endsWith('\n') ? markdown : `${markdown}\n`);
  }
}

/** The runner's escaping of a command's data: %, CR and LF. */
function escapeData(text: string): string {
  return text.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}
