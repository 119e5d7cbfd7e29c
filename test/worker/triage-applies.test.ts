import assert from 'node:assert/strict';
import { test } from 'node:test';
import { repoConfigSchema } from '../../src/config/repo-config.js';
import { triageApplies } from '../../src/worker/stages/run.js';

/** Where pre-flight triage applies (issue 15): the repository's `triage`, issues only, the App only. */
void test('triage: on for issues by default, off with `triage: off`, never on a PR round, never where no answer can continue', () => {
  const config = (yaml: Record<string, unknown>): { triage: 'on' | 'off' } => repoConfigSchema.parse(yaml);
  const issue = { kind: 'fix-issue' as const, config: config({}) };
  assert.equal(config({}).triage, 'on', 'the default');
  assert.equal(triageApplies(issue, false, true), true);
  assert.equal(triageApplies({ ...issue, config: config({ triage: 'off' }) }, false, true), false);
  // A follow-up or CI round on the App's PR: asked to act.
  assert.equal(triageApplies({ kind: 'follow-up', config: config({}) }, true, true), false);
  assert.equal(triageApplies(issue, true, true), false);
  // The Action: nothing would carry the answer back to the same conversation.
  assert.equal(triageApplies(issue, false, false), false);
  assert.throws(() => config({ triage: 'sometimes' }));
});
