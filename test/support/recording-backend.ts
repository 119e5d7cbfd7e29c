import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { SandboxBackend } from '../../src/sandbox/backend.js';

/** The name the recording backend has in the table (see register-recording-backend.ts). */
export const RECORDING_KIND = 'recording';

/** Where a process that preloads the hook appends its records (one JSON line per sandbox). */
export const RECORDING_LOG_ENV = 'ISSUE_AGENT_TEST_RECORDING_LOG';

/** The preload that adds the recording backend to the table: `node --import tsx --import <this>`. */
export const RECORDING_HOOK = join(import.meta.dirname, 'register-recording-backend.ts');

/** One sandbox the recording backend was asked for. */
export interface ProvisionRecord {
  /** The process's entry script, relative to the repository (`src/cli/main.ts`, `workers/main.ts`). */
  readonly entry: string;
  /** Its first argument (the CLI's command). */
  readonly command: string | null;
  readonly pid: number;
  /** The sandbox's job label (`cli-<runId>` for the CLI and eval, the job id for the worker). */
  readonly jobId: string;
  readonly lazyAgentShell: boolean;
  /** The sandbox it handed back, as the trajectory records it. */
  readonly sandboxKind: string;
}

const ROOT = join(import.meta.dirname, '..', '..');

/**
 * A third backend that is neither Docker's nor the local one as the table lists them: it takes
 * every capability from `inner` and records each provisioning (who asked, for which job) in `log`
 * before handing it on. A test registers it through the table's test hook and names it where a
 * user names a backend (`--sandbox`, ISSUE_AGENT_SANDBOX); nothing else of an entry point changes.
 */
export function recordingBackend(inner: SandboxBackend, log: string): SandboxBackend {
  return {
    kind: RECORDING_KIND,
    isolated: inner.isolated,
    hostDiskSealed: inner.hostDiskSealed,
    checksOutInside: inner.checksOutInside,
    needsHostSupport: inner.needsHostSupport,
    async provision(request) {
      const provisioned = await inner.provision(request);
      const record: ProvisionRecord = {
        entry: relative(ROOT, process.argv[1] ?? ''),
        command: process.argv[2] ?? null,
        pid: process.pid,
        jobId: request.jobId,
        lazyAgentShell: request.lazyAgentShell === true,
        sandboxKind: provisioned.sandbox.kind,
      };
      appendFileSync(log, `${JSON.stringify(record)}\n`);
      return provisioned;
    },
    ...(inner.removeOwned === undefined
      ? {}
      : { removeOwned: () => inner.removeOwned?.() ?? Promise.resolve() }),
  };
}

/** What the recording backend wrote to `log` (none yet: an empty list). */
export function readRecords(log: string): ProvisionRecord[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as ProvisionRecord);
}
