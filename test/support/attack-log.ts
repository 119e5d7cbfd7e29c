import { appendFileSync } from 'node:fs';

/**
 * Records one attempt of the attack suite in the file named by ISSUE_AGENT_ATTACK_LOG (set by
 * scripts/run-tests.mjs, which prints the total): whether the attack got through.
 */
export function recordAttack(name: string, held: boolean): void {
  const log = process.env.ISSUE_AGENT_ATTACK_LOG;
  if (log === undefined || log === '') return;
  appendFileSync(log, `${JSON.stringify({ name, succeeded: !held })}\n`);
}

/** Runs an attack's test body and records whether the boundary held (the body passed). */
export async function tallied<T>(name: string, body: () => Promise<T>): Promise<T> {
  let held = false;
  try {
    const result = await body();
    held = true;
    return result;
  } finally {
    recordAttack(name, held);
  }
}
