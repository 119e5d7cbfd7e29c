import { join } from 'node:path';
import { PermanentJobError } from './permanent-job-error.js';

/** Job ids are made of [A-Za-z0-9-] (see queues.ts); anything else is refused rather than escaped. */
export function jobFolder(jobsDir: string, jobId: string): string {
  if (!/^[A-Za-z0-9-]+$/.test(jobId)) throw new PermanentJobError(`unexpected job id ${jobId}`);
  return join(jobsDir, jobId);
}
